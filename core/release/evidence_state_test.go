package release_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

func request(eventID string) *contract.EvidenceRequest {
	job := release.PlanJob{JobID: "job-1", SourceLocale: "en-US", SourceSHA256: strings.Repeat("a", 64), TargetLocale: "de-DE", ContentType: "page"}
	r := &release.Result{
		SourceSHA256: job.SourceSHA256, TargetSHA256: strings.Repeat("b", 64), SourceLocale: "en-US", TargetLocale: "de-DE",
		ContentType: "page", GlossaryVersion: "g", PolicyVersion: "p", Provider: release.Provider{ID: "mt", ModelID: "m", ModelVersion: "1"},
		SoftwareVersion: "s", ReviewConfidence: map[string]string{}, QualityProfile: map[string]string{}, Candidate: "x",
	}
	req, err := release.BuildEvidenceRequest(eventID, "plan-1", job, "src", r, strings.Repeat("c", 64), "rev-1")
	if err != nil {
		panic(err)
	}
	return req
}

type stateBundle struct {
	store *releasetest.MemStore
	state release.EvidenceState
	snap  release.Snapshot
	ctx   context.Context
}

func newState(t *testing.T) *stateBundle {
	t.Helper()
	s := releasetest.NewMemStore()
	return &stateBundle{store: s, state: release.EvidenceState{Store: s}, snap: release.NewSnapshot(), ctx: context.Background()}
}

func (s *stateBundle) reload(t *testing.T, eventID string) {
	t.Helper()
	snap, err := s.store.Load(s.ctx, eventID)
	if err != nil {
		t.Fatal(err)
	}
	s.snap = snap
}

func TestRequestIDIsBindingHash(t *testing.T) {
	a, b := request("evt-1"), request("evt-1")
	if a.RequestID != b.RequestID || !strings.HasPrefix(a.RequestID, contract.EvidenceRequestIDPrefix) || len(a.RequestID) != len(contract.EvidenceRequestIDPrefix)+64 {
		t.Fatalf("request id %q", a.RequestID)
	}
	if request("evt-2").RequestID == a.RequestID {
		t.Fatal("different binding, same id")
	}
}

func TestClaimValidation(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*contract.EvidenceRequest)
		worker string
		lease  time.Duration
		max    int
		code   string
	}{
		{"bad request id", func(r *contract.EvidenceRequest) { r.RequestID = "" }, "w", time.Minute, 5, release.CodeEvidenceRequestInvalid},
		{"bad revision", func(r *contract.EvidenceRequest) { r.EvidenceRevision = "a b" }, "w", time.Minute, 5, release.CodeRevisionInvalid},
		{"bad result hash", func(r *contract.EvidenceRequest) { r.ResultSHA256 = "X" }, "w", time.Minute, 5, "evidence.result_sha256.invalid"},
		{"bad worker", nil, "w w", time.Minute, 5, release.CodeWorkerIDInvalid},
		{"zero lease", nil, "w", 0, 5, release.CodeEvidenceLeaseInvalid},
		{"lease over 3600 s", nil, "w", release.MaxLease + time.Second, 5, release.CodeEvidenceLeaseInvalid},
		{"zero attempts", nil, "w", time.Minute, 0, release.CodeMaxAttemptsInvalid},
		{"21 attempts", nil, "w", time.Minute, 21, release.CodeMaxAttemptsInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newState(t)
			req := request("evt-1")
			if tt.mutate != nil {
				tt.mutate(req)
			}
			_, err := s.state.Claim(s.ctx, &s.snap, req, tt.worker, t0, tt.lease, tt.max)
			wantCode(t, err, tt.code)
			if _, puts := s.store.Counts(); puts != 0 {
				t.Fatal("invalid claim wrote state")
			}
		})
	}
	s := newState(t)
	if c, err := s.state.Claim(s.ctx, &s.snap, request("evt-1"), "w", t0, release.MaxLease, release.MaxAttempts); err != nil || c == nil {
		t.Fatalf("bounds are inclusive: %v", err)
	}
}

func TestClaimBindingAndPolicy(t *testing.T) {
	s := newState(t)
	req := request("evt-1")
	c, err := s.state.Claim(s.ctx, &s.snap, req, "w1", t0, time.Minute, 5)
	if err != nil || c == nil || c.Attempt != 1 || len(c.LeaseToken) < 32 {
		t.Fatalf("claim %+v %v", c, err)
	}
	// Another worker sees the live lease and waits.
	s.reload(t, "evt-1")
	if c2, err := s.state.Claim(s.ctx, &s.snap, req, "w2", t0.Add(time.Second), time.Minute, 5); err != nil || c2 != nil {
		t.Fatalf("second claim %+v %v", c2, err)
	}
	_, err = s.state.Claim(s.ctx, &s.snap, req, "w2", t0, time.Minute, 6)
	wantCode(t, err, release.CodeAttemptPolicyChanged)
	// A stored record whose binding differs from the request.
	other := *req
	other.JobID = "job-2"
	_, err = s.state.Claim(s.ctx, &s.snap, &other, "w2", t0, time.Minute, 5)
	wantCode(t, err, release.CodeBindingMismatch)
	// A corrupted stored record.
	rec := *s.snap.Evidence[req.RequestID]
	rec.Attempts, rec.Version = 99, rec.Version+1
	if err := s.store.Put(s.ctx, &rec, rec.Version-1); err != nil {
		t.Fatal(err)
	}
	s.reload(t, "evt-1")
	_, err = s.state.Claim(s.ctx, &s.snap, req, "w2", t0, time.Minute, 5)
	wantCode(t, err, release.CodeEvidenceStateInvalid)
}

func TestLeaseExpiry(t *testing.T) {
	s := newState(t)
	req := request("evt-1")
	now := t0
	for attempt := 1; attempt <= 3; attempt++ {
		s.reload(t, "evt-1")
		c, err := s.state.Claim(s.ctx, &s.snap, req, "w", now, time.Minute, 3)
		if err != nil || c == nil || c.Attempt != attempt {
			t.Fatalf("attempt %d: %+v %v", attempt, c, err)
		}
		now = now.Add(time.Minute) // the lease runs out
	}
	s.reload(t, "evt-1")
	_, err := s.state.Claim(s.ctx, &s.snap, req, "w", now, time.Minute, 3)
	wantCode(t, err, release.CodeAttemptsExhausted)
	rec := s.snap.Evidence[req.RequestID]
	if rec.Status != release.StateFailed || rec.LastErrorCode != "lease_expired" || rec.LeaseToken != "" {
		t.Fatalf("%+v", rec)
	}
}

func TestLeaseExpiredBecomesRetryWait(t *testing.T) {
	s := newState(t)
	req := request("evt-1")
	if _, err := s.state.Claim(s.ctx, &s.snap, req, "w", t0, time.Minute, 5); err != nil {
		t.Fatal(err)
	}
	// Exactly at expiry the lease is gone and the next attempt starts.
	c, err := s.state.Claim(s.ctx, &s.snap, req, "w2", t0.Add(time.Minute), time.Minute, 5)
	if err != nil || c == nil || c.Attempt != 2 {
		t.Fatalf("%+v %v", c, err)
	}
}

func TestFinishFencing(t *testing.T) {
	s := newState(t)
	req := request("evt-1")
	c, err := s.state.Claim(s.ctx, &s.snap, req, "w", t0, time.Minute, 5)
	if err != nil {
		t.Fatal(err)
	}
	err = s.state.Succeed(s.ctx, &s.snap, c, t0.Add(time.Minute))
	wantCode(t, err, release.CodeEvidenceLeaseExpired)
	forged := *c
	forged.LeaseToken = "other"
	wantCode(t, s.state.Fail(s.ctx, &s.snap, &forged, core.Retry("x.y"), t0), release.CodeEvidenceLeaseLost)
	wantCode(t, s.state.Fail(s.ctx, &s.snap, c, plainError{}, t0), "evidence.failure.invalid")
	// Someone else changes the record: the finish loses the race, re-reads
	// and finds its lease gone.
	rec := *s.snap.Evidence[req.RequestID]
	rec.LeaseToken, rec.Version = "stolen", rec.Version+1
	if err := s.store.Put(s.ctx, &rec, rec.Version-1); err != nil {
		t.Fatal(err)
	}
	wantCode(t, s.state.Succeed(s.ctx, &s.snap, c, t0), release.CodeEvidenceLeaseLost)
}

type plainError struct{}

func (plainError) Error() string { return "plain" }

func TestFinishLostWhenWriteConflictsAgain(t *testing.T) {
	s := newState(t)
	req := request("evt-1")
	c, err := s.state.Claim(s.ctx, &s.snap, req, "w", t0, time.Minute, 5)
	if err != nil {
		t.Fatal(err)
	}
	s.store.FailPuts(func(release.Record) error { return release.ErrConflict })
	wantCode(t, s.state.Succeed(s.ctx, &s.snap, c, t0), release.CodeEvidenceFinishLost)
	s.store.FailPuts(nil)
	// Claim races are the retryable claim.lost.
	s.store.FailPuts(func(release.Record) error { return release.ErrConflict })
	fresh := newState(t)
	fresh.store.FailPuts(func(release.Record) error { return release.ErrConflict })
	_, err = fresh.state.Claim(fresh.ctx, &fresh.snap, req, "w", t0, time.Minute, 5)
	wantCode(t, err, release.CodeClaimLost)
	if !core.IsRetryable(err) {
		t.Fatal("claim.lost must be retryable")
	}
}

func TestSucceedThenReclaim(t *testing.T) {
	s := newState(t)
	req := request("evt-1")
	c, _ := s.state.Claim(s.ctx, &s.snap, req, "w", t0, time.Minute, 5)
	if err := s.state.Succeed(s.ctx, &s.snap, c, t0); err != nil {
		t.Fatal(err)
	}
	// Succeed and Fail on a record already succeeded are no-ops: it is
	// left as it is (docs/design.md "Evidence and delivery leases").
	if err := s.state.Succeed(s.ctx, &s.snap, c, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.state.Fail(s.ctx, &s.snap, c, core.Retry("x.y"), t0); err != nil {
		t.Fatal(err)
	}
	_, err := s.state.Claim(s.ctx, &s.snap, req, "w", t0, time.Minute, 5)
	wantCode(t, err, release.CodeAlreadyConsumed)
}

func TestMarkApproved(t *testing.T) {
	s := newState(t)
	req := request("evt-1")
	if _, err := s.state.Claim(s.ctx, &s.snap, req, "w", t0, time.Minute, 5); err != nil {
		t.Fatal(err)
	}
	wantCode(t, s.state.MarkApproved(s.ctx, &s.snap, "evt-1", "plan-1", "job-1", strings.Repeat("d", 64), t0), release.CodeBindingMismatch)
	wantCode(t, s.state.MarkApproved(s.ctx, &s.snap, "evt 1", "plan-1", "job-1", req.ResultSHA256, t0), release.CodeEventIDInvalid)
	wantCode(t, s.state.MarkApproved(s.ctx, &s.snap, "evt-1", "", "job-1", req.ResultSHA256, t0), "evidence.plan_id.invalid")
	wantCode(t, s.state.MarkApproved(s.ctx, &s.snap, "evt-1", "plan-1", "", req.ResultSHA256, t0), "evidence.job_id.invalid")
	wantCode(t, s.state.MarkApproved(s.ctx, &s.snap, "evt-1", "plan-1", "job-1", "nope", t0), "evidence.result_sha256.invalid")
	if err := s.state.MarkApproved(s.ctx, &s.snap, "evt-1", "plan-1", "job-1", req.ResultSHA256, t0); err != nil {
		t.Fatal(err)
	}
	s.reload(t, "evt-1")
	if rec := s.snap.Evidence[req.RequestID]; rec.Status != release.StateSucceeded || rec.LeaseToken != "" {
		t.Fatalf("%+v", rec)
	}
	_, puts := s.store.Counts()
	if err := s.state.MarkApproved(s.ctx, &s.snap, "evt-1", "plan-1", "job-1", req.ResultSHA256, t0); err != nil {
		t.Fatal(err)
	}
	if _, again := s.store.Counts(); again != puts {
		t.Fatal("marking an approved record again wrote")
	}
}
