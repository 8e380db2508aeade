package releasetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
)

// Run is the conformance suite of release.Store. newStore returns a fresh,
// empty store for each subtest.
func Run(t *testing.T, newStore func(t *testing.T) release.Store) {
	t.Helper()
	ctx := context.Background()

	t.Run("EmptyEventLoadsEmptySnapshot", func(t *testing.T) {
		s := newStore(t)
		snap, err := s.Load(ctx, "evt-none")
		if err != nil {
			t.Fatal(err)
		}
		if snap.Plan != nil || snap.Delivery != nil || len(snap.Jobs)+len(snap.Evidence)+len(snap.Approvals)+len(snap.Results)+len(snap.Sources) != 0 {
			t.Fatalf("snapshot not empty: %+v", snap)
		}
	})

	t.Run("EveryRecordKindRoundTrips", func(t *testing.T) {
		s := newStore(t)
		recs := SampleRecords("evt-rt")
		for _, r := range recs {
			if err := s.Put(ctx, r, 0); err != nil {
				t.Fatalf("put %T: %v", r, err)
			}
		}
		snap, err := s.Load(ctx, "evt-rt")
		if err != nil {
			t.Fatal(err)
		}
		want := release.NewSnapshot()
		for _, r := range recs {
			want.Add(r)
		}
		if !reflect.DeepEqual(snap, want) {
			t.Fatalf("round trip differs:\n got %+v\nwant %+v", snap, want)
		}
	})

	t.Run("LoadStateLeavesOutTextsAndLoadKeysReadsTheNamedRecords", func(t *testing.T) {
		s := newStore(t)
		recs := SampleRecords("evt-part")
		for _, r := range recs {
			if err := s.Put(ctx, r, 0); err != nil {
				t.Fatalf("put %T: %v", r, err)
			}
		}
		// Another event's records are never read.
		if err := s.Put(ctx, SampleRecords("evt-part2")[0], 0); err != nil {
			t.Fatal(err)
		}
		state, err := s.LoadState(ctx, "evt-part")
		if err != nil {
			t.Fatal(err)
		}
		// Nor the tally: it sorts after the texts (sk "tally"), out of
		// the state's range.
		wantState, texts := release.NewSnapshot(), []string{}
		for _, r := range recs {
			if _, sk := r.Key(); release.IsTextKey(sk) || sk == release.SKTally {
				if sk != release.SKTally {
					texts = append(texts, sk)
				}
				continue
			}
			wantState.Add(r)
		}
		if len(texts) == 0 || !reflect.DeepEqual(state, wantState) {
			t.Fatalf("LoadState differs:\n got %+v\nwant %+v (texts %v)", state, wantState, texts)
		}
		keys := append([]string{release.SKPlan, "approval#missing", release.SKTally}, texts...)
		got, err := s.LoadKeys(ctx, "evt-part", keys...)
		if err != nil {
			t.Fatal(err)
		}
		want := release.NewSnapshot()
		for _, r := range recs {
			if _, sk := r.Key(); sk == release.SKPlan || sk == release.SKTally || release.IsTextKey(sk) {
				want.Add(r)
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("LoadKeys differs:\n got %+v\nwant %+v", got, want)
		}
		for _, prefix := range []string{release.SKResultPrefix, release.SKSourcePrefix, release.SKJobPrefix} {
			got, err := s.LoadPrefix(ctx, "evt-part", prefix)
			if err != nil {
				t.Fatal(err)
			}
			want := release.NewSnapshot()
			for _, r := range recs {
				if _, sk := r.Key(); strings.HasPrefix(sk, prefix) {
					want.Add(r)
				}
			}
			if !reflect.DeepEqual(got, want) || len(got.Sources)+len(got.Results)+len(got.Jobs) == 0 || got.Tally != nil {
				t.Fatalf("LoadPrefix %s differs:\n got %+v\nwant %+v", prefix, got, want)
			}
		}
		if none, err := s.LoadKeys(ctx, "evt-none", release.SKPlan); err != nil || none.Plan != nil {
			t.Fatalf("LoadKeys of an empty event = %+v, %v", none, err)
		}
	})

	// An approval is stored as its signed body and signature
	// (docs/design.md "Compact approvals"): it reads back with its token
	// rebuilt byte for byte and the ids its body holds filled in, by every
	// read, also after a rewrite; an approval whose fields disagree with
	// its body, or without a key id, is refused, nothing written.
	t.Run("ApprovalsRoundTrip", func(t *testing.T) {
		s := newStore(t)
		const eventID = "evt-layout"
		compact := SampleCompactApproval(eventID, "job-c", 1_764_460_800_000)
		if err := s.Put(ctx, compact, 0); err != nil {
			t.Fatal(err)
		}
		check := func(what string, snap release.Snapshot) {
			t.Helper()
			if got := snap.Approvals["job-c"]; !reflect.DeepEqual(got, compact) {
				t.Fatalf("%s: approval\n got %+v\nwant %+v", what, got, compact)
			}
		}
		snap, err := s.Load(ctx, eventID)
		if err != nil {
			t.Fatal(err)
		}
		check("Load", snap)
		if snap, err = s.LoadState(ctx, eventID); err != nil {
			t.Fatal(err)
		}
		check("LoadState", snap)
		if snap, err = s.LoadKeys(ctx, eventID, release.SKApprovalPrefix+"job-c"); err != nil {
			t.Fatal(err)
		}
		check("LoadKeys", snap)
		if snap, err = s.LoadPrefix(ctx, eventID, release.SKApprovalPrefix); err != nil {
			t.Fatal(err)
		}
		check("LoadPrefix", snap)
		if want := release.BuildToken([]byte(compact.Body), compact.Sig); snap.Approvals["job-c"].Token != want {
			t.Fatal("token not rebuilt from the stored bytes")
		}
		// A rewrite (marking it awaiting delivery, as settling does)
		// keeps the signed bytes.
		next := *snap.Approvals["job-c"]
		next.AwaitingDelivery = true
		next.Version++
		if err := s.Put(ctx, &next, compact.Version); err != nil {
			t.Fatal(err)
		}
		if snap, err = s.LoadState(ctx, eventID); err != nil {
			t.Fatal(err)
		}
		if c := snap.Approvals["job-c"]; c.Body != compact.Body || c.Token != compact.Token || !reflect.DeepEqual(c.Sig, compact.Sig) || !c.AwaitingDelivery {
			t.Fatalf("rewrite changed the approval: %+v", c)
		}
		// Fields the stored form does not hold must agree with its body.
		for name, alter := range map[string]func(a *release.ApprovalRecord){
			"approval id":   func(a *release.ApprovalRecord) { a.ApprovalID = "apv-other" },
			"result":        func(a *release.ApprovalRecord) { a.ResultSHA256 = sha('d') },
			"request":       func(a *release.ApprovalRecord) { a.RequestID = "req-other" },
			"token":         func(a *release.ApprovalRecord) { a.Token += "x" },
			"expiry":        func(a *release.ApprovalRecord) { a.ExpiresMS++ },
			"signature":     func(a *release.ApprovalRecord) { a.Sig = a.Sig[:63] },
			"body not json": func(a *release.ApprovalRecord) { a.Body = "{" },
			"no body":       func(a *release.ApprovalRecord) { a.Body, a.Sig = "", nil },
			"no key id":     func(a *release.ApprovalRecord) { a.KeyID = "" },
		} {
			bad := SampleCompactApproval(eventID, "job-bad", 1_764_460_800_000)
			alter(bad)
			if err := s.Put(ctx, bad, 0); !core.HasCode(err, release.CodeStoredApprovalInvalid) {
				t.Fatalf("%s: put %v, want %s", name, err, release.CodeStoredApprovalInvalid)
			}
		}
		if snap, err = s.LoadKeys(ctx, eventID, release.SKApprovalPrefix+"job-bad"); err != nil || len(snap.Approvals) != 0 {
			t.Fatalf("refused approval stored: %+v %v", snap.Approvals, err)
		}
	})

	t.Run("CreateIsConditional", func(t *testing.T) {
		s := newStore(t)
		rec := SampleRecords("evt-c")[0]
		if err := s.Put(ctx, rec, 0); err != nil {
			t.Fatal(err)
		}
		if err := s.Put(ctx, rec, 0); !errors.Is(err, release.ErrConflict) {
			t.Fatalf("second create: %v, want conflict", err)
		}
	})

	// Ingest writes a job input first (docs/design.md "Ingest: plan and
	// job events"): a create (prev 0) of any record that exists must be
	// refused with ErrConflict, and must leave the stored record as it was.
	t.Run("CreateOverAnExistingRecordIsAConflictOfEveryKind", func(t *testing.T) {
		s := newStore(t)
		recs := SampleRecords("evt-cx")
		for _, r := range recs {
			if err := s.Put(ctx, r, 0); err != nil {
				t.Fatalf("put %T: %v", r, err)
			}
		}
		want, err := s.Load(ctx, "evt-cx")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if err := s.Put(ctx, r, 0); !errors.Is(err, release.ErrConflict) {
				t.Fatalf("create of an existing %T: %v, want conflict", r, err)
			}
		}
		// Another job event, another result, over the stored ones.
		job := &release.JobRecord{EventID: "evt-cx", PlanID: "plan-1", JobID: "job-1", Status: release.JobFailed, ErrorCode: "provider.down",
			PayloadSHA256: sha('e'), ReceivedMS: 2, Version: 1}
		res := &release.ResultRecord{EventID: "evt-cx", PlanID: "plan-1", JobID: "job-1", ResultSHA256: sha('e'), ResultJSON: `{"candidate":"other"}`, Version: 1}
		for _, r := range []release.Record{job, res} {
			if err := s.Put(ctx, r, 0); !errors.Is(err, release.ErrConflict) {
				t.Fatalf("create of another %T over the stored one: %v, want conflict", r, err)
			}
		}
		got, err := s.Load(ctx, "evt-cx")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("refused creates changed the records:\n got %+v\nwant %+v", got, want)
		}
	})

	t.Run("UpdateNeedsCurrentVersion", func(t *testing.T) {
		s := newStore(t)
		job := &release.JobRecord{EventID: "evt-u", PlanID: "plan-1", JobID: "job-1", Status: release.JobFailed, PayloadSHA256: sha('a'), ReceivedMS: 1, Version: 1}
		if err := s.Put(ctx, job, 0); err != nil {
			t.Fatal(err)
		}
		missing := &release.JobRecord{EventID: "evt-u", PlanID: "plan-1", JobID: "job-2", Status: release.JobFailed, PayloadSHA256: sha('a'), Version: 2}
		if err := s.Put(ctx, missing, 1); !errors.Is(err, release.ErrConflict) {
			t.Fatalf("update of a missing record: %v, want conflict", err)
		}
		next := *job
		next.Status, next.Version = release.JobSucceeded, 2
		if err := s.Put(ctx, &next, 1); err != nil {
			t.Fatal(err)
		}
		stale := *job
		stale.Status, stale.Version = release.JobFailed, 2
		if err := s.Put(ctx, &stale, 1); !errors.Is(err, release.ErrConflict) {
			t.Fatalf("stale update: %v, want conflict", err)
		}
		snap, err := s.Load(ctx, "evt-u")
		if err != nil {
			t.Fatal(err)
		}
		if got := snap.Jobs["job-1"]; got == nil || got.Status != release.JobSucceeded || got.Version != 2 {
			t.Fatalf("stored job = %+v", got)
		}
	})

	t.Run("EventsAreIsolated", func(t *testing.T) {
		s := newStore(t)
		for _, r := range SampleRecords("evt-a") {
			if err := s.Put(ctx, r, 0); err != nil {
				t.Fatal(err)
			}
		}
		snap, err := s.Load(ctx, "evt-b")
		if err != nil {
			t.Fatal(err)
		}
		if snap.Plan != nil || len(snap.Jobs) != 0 {
			t.Fatal("records leaked into another event")
		}
	})

	t.Run("PutAllWritesAllOrNothing", func(t *testing.T) {
		s := newStore(t)
		job := &release.JobRecord{EventID: "evt-tx", PlanID: "plan-1", JobID: "job-1", Status: release.JobFailed, PayloadSHA256: sha('a'), ReceivedMS: 1, Version: 1}
		if err := s.Put(ctx, job, 0); err != nil {
			t.Fatal(err)
		}
		res := &release.ResultRecord{EventID: "evt-tx", PlanID: "plan-1", JobID: "job-1", ResultSHA256: sha('c'), ResultJSON: `{"candidate":"x"}`, Version: 1}
		next := *job
		next.Status, next.ResultSHA256, next.Version = release.JobSucceeded, sha('c'), 2
		// The job write's condition fails (stale version): the result
		// write, whose own condition holds, must not happen either.
		stale := next
		stale.Version = 3
		if err := s.PutAll(ctx, release.Write{Rec: res, Prev: 0}, release.Write{Rec: &stale, Prev: 2}); !errors.Is(err, release.ErrConflict) {
			t.Fatalf("put all with a stale write: %v, want conflict", err)
		}
		snap, err := s.Load(ctx, "evt-tx")
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Results) != 0 || snap.Jobs["job-1"].Version != 1 {
			t.Fatalf("a refused transaction wrote: results %v, job %+v", snap.Results, snap.Jobs["job-1"])
		}
		if err := s.PutAll(ctx, release.Write{Rec: res, Prev: 0}, release.Write{Rec: &next, Prev: 1}); err != nil {
			t.Fatal(err)
		}
		snap, err = s.Load(ctx, "evt-tx")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(snap.Results["job-1"], res) || !reflect.DeepEqual(snap.Jobs["job-1"], &next) {
			t.Fatalf("transaction stored %+v and %+v", snap.Results["job-1"], snap.Jobs["job-1"])
		}
	})

	t.Run("PutAllRefusesMalformedBatches", func(t *testing.T) {
		s := newStore(t)
		a := SampleEvidence("evt-m", "req-a")
		other := SampleEvidence("evt-other", "req-b")
		for name, writes := range map[string][]release.Write{
			"empty":         nil,
			"two events":    {{Rec: a, Prev: 0}, {Rec: other, Prev: 0}},
			"same key":      {{Rec: a, Prev: 0}, {Rec: a, Prev: 0}},
			"wrong version": {{Rec: a, Prev: 1}},
		} {
			if err := s.PutAll(ctx, writes...); err == nil || errors.Is(err, release.ErrConflict) {
				t.Errorf("%s: %v, want a refused batch", name, err)
			}
		}
		if snap, err := s.Load(ctx, "evt-m"); err != nil || len(snap.Evidence) != 0 {
			t.Fatalf("a malformed batch wrote: %v %v", snap.Evidence, err)
		}
	})

	t.Run("ConcurrentTransactionsOneWins", func(t *testing.T) {
		s := newStore(t)
		const writers = 6
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := 0
		for i := 0; i < writers; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				h := sha(byte('a' + i))
				res := &release.ResultRecord{EventID: "evt-ct", PlanID: "plan-1", JobID: "job-1", ResultSHA256: h, ResultJSON: fmt.Sprintf(`{"w":%d}`, i), Version: 1}
				job := &release.JobRecord{EventID: "evt-ct", PlanID: "plan-1", JobID: "job-1", Status: release.JobSucceeded, ResultSHA256: h, PayloadSHA256: h, Version: 1}
				err := s.PutAll(ctx, release.Write{Rec: res}, release.Write{Rec: job})
				for try := 0; err != nil && !errors.Is(err, release.ErrConflict) && core.IsRetryable(err) && try < 50; try++ {
					// DynamoDB cancels a transaction that collides with
					// another in flight; the retry meets the winner's
					// versions.
					time.Sleep(20 * time.Millisecond)
					err = s.PutAll(ctx, release.Write{Rec: res}, release.Write{Rec: job})
				}
				if err == nil {
					mu.Lock()
					wins++
					mu.Unlock()
				} else if !errors.Is(err, release.ErrConflict) {
					t.Errorf("writer %d: %v", i, err)
				}
			}(i)
		}
		wg.Wait()
		if wins != 1 {
			t.Fatalf("%d transactions won, want exactly 1", wins)
		}
		snap, err := s.Load(ctx, "evt-ct")
		if err != nil {
			t.Fatal(err)
		}
		if snap.Jobs["job-1"].ResultSHA256 != snap.Results["job-1"].ResultSHA256 {
			t.Fatal("job and result records come from different transactions")
		}
	})

	t.Run("ConcurrentWritersOneWinsPerVersion", func(t *testing.T) {
		s := newStore(t)
		base := SampleEvidence("evt-cc", "req-1")
		if err := s.Put(ctx, base, 0); err != nil {
			t.Fatal(err)
		}
		const writers = 8
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := 0
		for i := 0; i < writers; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				next := *base
				next.Status, next.Attempts, next.LeaseOwner = release.StateLeased, 1, fmt.Sprintf("w%d", i)
				next.LeaseToken, next.LeaseExpiresMS, next.Version = fmt.Sprintf("t%d", i), base.NextAttemptMS+1000, 2
				err := s.Put(ctx, &next, 1)
				if err == nil {
					mu.Lock()
					wins++
					mu.Unlock()
				} else if !errors.Is(err, release.ErrConflict) {
					t.Errorf("writer %d: %v", i, err)
				}
			}(i)
		}
		wg.Wait()
		if wins != 1 {
			t.Fatalf("%d writers won version 2, want exactly 1", wins)
		}
	})
}

func sha(c byte) string {
	b := make([]byte, 64)
	for i := range b {
		b[i] = c
	}
	return string(b)
}

// SampleEvidence is a pending evidence record.
func SampleEvidence(eventID, requestID string) *release.EvidenceRecord {
	return &release.EvidenceRecord{
		RequestID: requestID, EventID: eventID, PlanID: "plan-1", JobID: "job-1",
		ResultSHA256: sha('c'), EvidenceRevision: "rev-1",
		Lease:   release.Lease{Status: release.StatePending, MaxAttempts: 5, NextAttemptMS: 1_764_460_800_000, CreatedMS: 1_764_460_800_000, UpdatedMS: 1_764_460_800_000},
		Version: 1,
	}
}

// SampleRecords returns one record of every kind for eventID, each with
// every field set, at version 1.
func SampleRecords(eventID string) []release.Record {
	const ms = 1_764_460_800_000
	leased := SampleEvidence(eventID, "blun-l10n-evidence-"+sha('e'))
	leased.Status, leased.Attempts, leased.LeaseOwner, leased.LeaseToken, leased.LeaseExpiresMS = release.StateLeased, 1, "worker-1", "tok-1", ms+300_000
	failed := SampleEvidence(eventID, "req-failed")
	failed.Status, failed.Attempts, failed.LastErrorCode = release.StateFailed, 5, "evidence.http_503"
	parked := SampleEvidence(eventID, "req-parked")
	parked.Status, parked.Attempts, parked.LastErrorCode, parked.Parked = release.StateRetryWait, 1, "evidence.http_503", true
	completing := SampleCompactApproval(eventID, "job-1", ms+1)
	completing.AwaitingDelivery = true
	return []release.Record{
		parked,
		&release.BlockedRecord{EventID: eventID, Code: release.CodeAttemptsExhausted, BlockedMS: ms + 2, Version: 1},
		&release.PlanRecord{
			Event:  release.Event{EventID: eventID, SiteID: "site-1", WebsiteVersion: "v1", SourceSequence: 7},
			PlanID: "plan-1",
			Jobs: []release.PlanJob{
				{JobID: "job-1", SourceLocale: "en-US", SourceSHA256: sha('a'), TargetLocale: "de-DE", ContentType: "page", CommercialProfile: "retail"},
				{JobID: "job-2", SourceLocale: "en-US", SourceSHA256: sha('b'), TargetLocale: "fr-FR", ContentType: "page"},
			},
			PayloadSHA256: sha('d'), ReceivedMS: ms, Seal: sha('9'), SealKey: "0123456789abcdef", Version: 1,
		},
		&release.JobRecord{EventID: eventID, PlanID: "plan-1", JobID: "job-1", Status: release.JobSucceeded, ResultSHA256: sha('c'), PayloadSHA256: sha('d'), ReceivedMS: ms, AwaitingClaim: true, Version: 1},
		&release.JobRecord{EventID: eventID, PlanID: "plan-1", JobID: "job-2", Status: release.JobFailed, ErrorCode: "provider.down", PayloadSHA256: sha('d'), ReceivedMS: ms, Version: 1},
		&release.SourceRecord{EventID: eventID, JobID: "job-1", SourceSHA256: sha('a'), Text: "Hallo «Welt» ünïcödé", Version: 1},
		&release.ResultRecord{EventID: eventID, PlanID: "plan-1", JobID: "job-1", ResultSHA256: sha('c'), ResultJSON: `{"candidate":"x"}`, Version: 1},
		leased,
		failed,
		completing,
		SampleCompactApproval(eventID, "job-2", ms+2),
		&release.DeliveryRecord{
			EventID: eventID, PlanID: "plan-1", SiteID: "site-1", DeliveryID: "dlv-1", BundleSHA256: sha('f'), Signature: "sig", KeyID: "fedcba9876543210", PreparedMS: ms,
			Lease:   release.Lease{Status: release.StateRetryWait, Attempts: 2, MaxAttempts: 5, NextAttemptMS: ms + 10_000, LastErrorCode: "cms.http_503", CreatedMS: ms, UpdatedMS: ms},
			Version: 1,
		},
		&release.TallyRecord{EventID: eventID, PlanID: "plan-1", Jobs: 2, Approved: []string{"job-1"}, UpdatedMS: ms + 3, Version: 1},
	}
}

// SampleCompactApproval is an approval of jobID (docs/design.md "Compact
// approvals"), every field set: its body is the
// canonical JSON of an approval payload, its signature 64 made-up bytes
// (a store never verifies it).
func SampleCompactApproval(eventID, jobID string, approvedMS int64) *release.ApprovalRecord {
	p := contract.ApprovalPayload{
		Schema: contract.ApprovalSchema, ApprovalID: "apv-" + sha('7')[:40], EventID: eventID, SiteID: "site-1",
		PlanID: "plan-1", JobID: jobID, TargetLocale: "fr-FR", ResultSHA256: sha('c'),
		EvidenceRequestID: "blun-l10n-evidence-" + sha('e'), QualityReceiptSHA256: sha('1'),
		ApprovedAtMS: approvedMS, ExpiresAtMS: approvedMS + 1000,
	}
	body, err := core.Canonical(p)
	if err != nil {
		panic(err)
	}
	sig := make([]byte, 64)
	for i := range sig {
		sig[i] = byte(i * 7)
	}
	a := &release.ApprovalRecord{
		EventID: eventID, PlanID: p.PlanID, JobID: jobID, TargetLocale: p.TargetLocale, ResultSHA256: p.ResultSHA256,
		RequestID: p.EvidenceRequestID, ApprovalID: p.ApprovalID, KeyID: "0123456789abcdef",
		ApprovedMS: approvedMS, ExpiresMS: p.ExpiresAtMS, Version: 1,
	}
	a.SetSigned(body, sig)
	return a
}

// RunDue is the conformance suite of release.DueFinder: exactly the
// records that can wake, up to the time bound, each once across pages of
// any size (the wake index is eventually consistent, so reads are retried
// until they settle).
func RunDue(t *testing.T, newStore func(t *testing.T) interface {
	release.Store
	release.DueFinder
}) {
	t.Helper()
	ctx := context.Background()
	s := newStore(t)
	const ms = 1_764_460_800_000
	for _, r := range SampleRecords("evt-due") {
		if err := s.Put(ctx, r, 0); err != nil {
			t.Fatal(err)
		}
	}
	// SampleRecords: the never-claimed job wakes at ms, the approval that
	// completed the plan at ms+1, the retry_wait delivery at ms+10000, the
	// leased evidence at ms+300000; the failed and the parked evidence,
	// the blocked marker and the other records never.
	want := map[string]bool{"evt-due/run/0": true, "evt-due/run/1": true, "evt-due/deliver/10000": true, "evt-due/run/300000": true}
	// More releases, each with one pending evidence record, so that the
	// pages cross shards.
	for i := 0; i < 9; i++ {
		e := SampleEvidence(fmt.Sprintf("evt-due-%d", i), "req-1")
		e.NextAttemptMS = ms + int64(i)*10
		if err := s.Put(ctx, e, 0); err != nil {
			t.Fatal(err)
		}
		want[fmt.Sprintf("evt-due-%d/run/%d", i, i*10)] = true
	}
	late := SampleEvidence("evt-due-late", "req-1")
	late.NextAttemptMS = ms + 2_000_000
	if err := s.Put(ctx, late, 0); err != nil {
		t.Fatal(err)
	}
	collect := func(limit int) (map[string]bool, error) {
		got, cursor := map[string]bool{}, ""
		for pages := 0; pages < 100; pages++ {
			page, err := s.Due(ctx, ms+1_000_000, cursor, limit)
			if err != nil {
				return nil, err
			}
			if len(page.Items) > limit {
				return nil, fmt.Errorf("page of %d items, limit %d", len(page.Items), limit)
			}
			for _, it := range page.Items {
				kind := "run"
				if it.Delivery {
					kind = "deliver"
				}
				key := fmt.Sprintf("%s/%s/%d", it.EventID, kind, it.WakeMS-ms)
				if got[key] {
					return nil, fmt.Errorf("%s on two pages", key)
				}
				got[key] = true
			}
			if page.Next == "" {
				return got, nil
			}
			cursor = page.Next
		}
		return nil, errors.New("paging does not end")
	}
	for _, limit := range []int{1, 3, 500} {
		var got map[string]bool
		var err error
		for i := 0; i < 100; i++ {
			if got, err = collect(limit); err != nil {
				t.Fatal(err)
			}
			if reflect.DeepEqual(got, want) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("limit %d: due = %v, want %v", limit, got, want)
		}
	}
	if _, err := s.Due(ctx, ms, "not-a-cursor", 5); err == nil {
		t.Fatal("a foreign cursor was accepted")
	}
}

// Foreign is a release store a test can put an item of another storage
// format into, and read an item back from as stored.
type Foreign interface {
	release.Store
	// PutForeign stores rec as the store writes it, except its
	// schema_version: schemaVersion (0: the attribute left out).
	PutForeign(ctx context.Context, rec release.Record, schemaVersion int) error
	// Stored returns the stored item of eventID and sk, comparable with
	// reflect.DeepEqual (nil when absent).
	Stored(ctx context.Context, eventID, sk string) (any, error)
}

// RunSchema is the conformance suite of the storage format's version
// (release.SchemaVersion): an item of every kind stored with another
// schema_version, or none, is refused by every read that meets it
// (release.CodeSchemaUnsupported) and left as it is by every write (a
// conditional update of it is refused; so is a create over it).
func RunSchema(t *testing.T, newStore func(t *testing.T) Foreign) {
	t.Helper()
	ctx := context.Background()
	for _, version := range []int{0, release.SchemaVersion + 1} {
		recs := append(SampleRecords("evt-schema"), &release.AckRecord{
			EventID: "evt-schema", AckedKey: release.SKBlocked, Count: 1, By: "arn:aws:iam::123456789012:user/oncall", AckMS: 1_764_460_900_000,
			Reason: "checked", AckedState: "blocked", AckedCode: release.CodeAttemptsExhausted, AckedUpdated: 1_764_460_800_002, Version: 1,
		})
		for _, rec := range recs {
			eventID, sk := rec.Key()
			t.Run(fmt.Sprintf("v%d/%s", version, sk), func(t *testing.T) {
				s := newStore(t)
				if err := s.PutForeign(ctx, rec, version); err != nil {
					t.Fatal(err)
				}
				before, err := s.Stored(ctx, eventID, sk)
				if err != nil || before == nil {
					t.Fatalf("stored: %v %v", before, err)
				}
				reads := map[string]func() error{
					"Load":       func() error { _, err := s.Load(ctx, eventID); return err },
					"LoadKeys":   func() error { _, err := s.LoadKeys(ctx, eventID, sk); return err },
					"LoadPrefix": func() error { _, err := s.LoadPrefix(ctx, eventID, sk); return err },
				}
				if sk < release.SKResultPrefix {
					reads["LoadState"] = func() error { _, err := s.LoadState(ctx, eventID); return err }
				}
				for name, read := range reads {
					if err := read(); !core.HasCode(err, release.CodeSchemaUnsupported) {
						t.Errorf("%s: %v, want %s", name, err, release.CodeSchemaUnsupported)
					}
				}
				next := NewRecordLike(rec)
				if err := s.Put(ctx, next, rec.RecordVersion()); err == nil {
					t.Error("an update over the foreign item was accepted")
				}
				if err := s.PutAll(ctx, release.Write{Rec: next, Prev: rec.RecordVersion()}); err == nil {
					t.Error("a transactional update over the foreign item was accepted")
				}
				if err := s.Put(ctx, rec, 0); err == nil {
					t.Error("a create over the foreign item was accepted")
				}
				after, err := s.Stored(ctx, eventID, sk)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(before, after) {
					t.Fatalf("the foreign item changed:\n was %v\n now %v", before, after)
				}
			})
		}
	}
}

// NewRecordLike returns a copy of rec at the next version (rec must be one
// of SampleRecords' kinds).
func NewRecordLike(rec release.Record) release.Record {
	switch r := rec.(type) {
	case *release.PlanRecord:
		c := *r
		c.Version++
		return &c
	case *release.JobRecord:
		c := *r
		c.Version++
		return &c
	case *release.SourceRecord:
		c := *r
		c.Version++
		return &c
	case *release.ResultRecord:
		c := *r
		c.Version++
		return &c
	case *release.EvidenceRecord:
		c := *r
		c.Version++
		return &c
	case *release.ApprovalRecord:
		c := *r
		c.Version++
		return &c
	case *release.DeliveryRecord:
		c := *r
		c.Version++
		return &c
	case *release.BlockedRecord:
		c := *r
		c.Version++
		return &c
	case *release.TallyRecord:
		c := *r
		c.Version++
		return &c
	case *release.AckRecord:
		c := *r
		c.Version++
		return &c
	}
	panic(fmt.Sprintf("releasetest: no copy of %T", rec))
}

// Expiring is a release store that reports the expiry (the TTL attribute,
// epoch seconds) it wrote with a record.
type Expiring interface {
	release.Store
	ExpiresAt(ctx context.Context, eventID, sk string) (int64, bool, error)
}

// RunRetention is the conformance suite of record retention and
// acknowledgement: a content-free record in no index expires retention
// after its last write; texts, open records and records that need
// attention do not; an acknowledgement takes the failed and blocked records
// out of the attention index, journals who, when and why, and lets them
// expire from then on; a second acknowledgement writes nothing. newStore
// returns an empty store with the given retention.
func RunRetention(t *testing.T, newStore func(t *testing.T, retention time.Duration) Expiring) {
	t.Helper()
	ctx := context.Background()
	const ms = 1_764_460_800_000
	const retention = 48 * time.Hour
	s := newStore(t, retention)
	eventID := "evt-retention"
	records := SampleRecords(eventID)
	done := SampleEvidence(eventID, "req-done")
	done.Status, done.Attempts, done.UpdatedMS = release.StateSucceeded, 1, ms+5
	records = append(records, done)
	for _, r := range records {
		if err := s.Put(ctx, r, 0); err != nil {
			t.Fatal(err)
		}
	}
	expiry := func(sk string) (int64, bool) {
		t.Helper()
		at, ok, err := s.ExpiresAt(ctx, eventID, sk)
		if err != nil {
			t.Fatal(err)
		}
		return at, ok
	}
	wantAt := func(sk string, lastMS int64) {
		t.Helper()
		at, ok := expiry(sk)
		if want := (lastMS + retention.Milliseconds()) / 1000; !ok || at != want {
			t.Errorf("%s: expires_at = %d, %v; want %d", sk, at, ok, want)
		}
	}
	wantNone := func(sk, why string) {
		t.Helper()
		if at, ok := expiry(sk); ok {
			t.Errorf("%s (%s) expires at %d; want never", sk, why, at)
		}
	}
	wantAt(release.SKPlan, ms)
	wantAt(release.SKEvidencePrefix+"req-done", ms+5)
	wantAt(release.SKEvidencePrefix+"req-parked", ms)
	wantNone(release.SKEvidencePrefix+"req-failed", "failed, needs attention")
	wantNone(release.SKJobPrefix+"job-2", "failed job, needs attention")
	wantNone(release.SKBlocked, "blocked, needs attention")
	wantNone(release.SKDelivery, "retry_wait, wakes")
	wantNone(release.SKJobPrefix+"job-1", "awaiting claim, wakes")
	wantNone(release.SKApprovalPrefix+"job-1", "awaiting delivery, wakes")
	wantNone(release.SKSourcePrefix+"job-1", "a text: its own retention")
	wantNone(release.SKResultPrefix+"job-1", "a text: its own retention")

	by, reason := "arn:aws:iam::123456789012:user/oncall", "provider outage, re-run upstream"
	if _, err := release.Acknowledge(ctx, s, eventID, release.SKDelivery, by, reason, ms+100); !core.HasCode(err, release.CodeAckNotNeeded) {
		t.Fatalf("ack of a retry_wait delivery: %v, want %s", err, release.CodeAckNotNeeded)
	}
	if _, err := release.Acknowledge(ctx, s, eventID, release.SKEvidencePrefix+"req-nope", by, reason, ms+100); !core.HasCode(err, release.CodeAckRecordMissing) {
		t.Fatalf("ack of an unknown record: %v, want %s", err, release.CodeAckRecordMissing)
	}
	if _, err := release.Acknowledge(ctx, s, "evt-nothing", "", by, reason, ms+100); !core.HasCode(err, release.CodeAckRecordMissing) {
		t.Fatalf("ack of an unknown event: %v, want %s", err, release.CodeAckRecordMissing)
	}
	got, err := release.Acknowledge(ctx, s, eventID, "", by, reason, ms+100)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{}
	for _, a := range got {
		if a.Already || a.Journal.By != by || a.Journal.Reason != reason || a.Journal.AckMS != ms+100 || a.Journal.Count != 1 {
			t.Errorf("acknowledged %+v", a)
		}
		kinds[a.Journal.AckedKey] = a.Kind
	}
	want := map[string]string{release.SKBlocked: release.AckKindBlocked, release.SKEvidencePrefix + "req-failed": release.AckKindEvidence,
		release.SKJobPrefix + "job-2": release.AckKindJob}
	if !reflect.DeepEqual(kinds, want) {
		t.Fatalf("acknowledged %v, want %v", kinds, want)
	}
	snap, err := s.Load(ctx, eventID)
	if err != nil {
		t.Fatal(err)
	}
	for sk := range want {
		j := snap.Acks[sk]
		if j == nil || release.ValidateAckRecord(j) != nil || j.By != by || j.AckedUpdated > j.AckMS {
			t.Errorf("journal of %s: %+v", sk, j)
		}
		wantAt(sk, ms+100)
		wantAt(release.SKAckPrefix+sk, ms+100)
	}
	for _, r := range []release.Record{snap.Evidence["req-failed"], snap.Jobs["job-2"], snap.Blocked} {
		if _, _, _, attention := release.Wake(r); attention {
			t.Errorf("%T still needs attention after the acknowledgement", r)
		}
	}
	if release.ValidateEvidenceRecord(snap.Evidence["req-failed"]) != nil || release.ValidateBlockedRecord(snap.Blocked) != nil {
		t.Error("an acknowledged record does not validate")
	}
	again, err := release.Acknowledge(ctx, s, eventID, "", by, "again", ms+200)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range again {
		if !a.Already || a.Journal.AckMS != ms+100 || a.Journal.Reason != reason {
			t.Errorf("second ack %+v: want already acknowledged at the first ack", a)
		}
	}
	after, err := s.Load(ctx, eventID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(after, snap) {
		t.Error("a second acknowledgement wrote")
	}
}

// TextExpiring is a store whose texts can be given their expiry, as
// adapters/releasedb.TextExpirer does on DynamoDB.
type TextExpiring interface {
	release.Store
	ExpireTexts(ctx context.Context, eventID string, at time.Time) error
}

// RunTextExpiry is the conformance suite of a source text's expiry as read
// back: none when written, the expiry once the release's texts were given
// one (ingest reads it to know the release ended: docs/design.md "Ingest:
// plan and job events"), by LoadKeys and by Load alike.
func RunTextExpiry(t *testing.T, newStore func(t *testing.T) TextExpiring) {
	t.Helper()
	ctx := context.Background()
	s := newStore(t)
	const eventID = "evt-texts"
	for _, r := range SampleRecords(eventID) {
		if err := s.Put(ctx, r, 0); err != nil {
			t.Fatal(err)
		}
	}
	source := func() (*release.SourceRecord, *release.SourceRecord) {
		t.Helper()
		one, err := s.LoadKeys(ctx, eventID, release.SKSourcePrefix+"job-1")
		if err != nil {
			t.Fatal(err)
		}
		all, err := s.Load(ctx, eventID)
		if err != nil {
			t.Fatal(err)
		}
		return one.Sources["job-1"], all.Sources["job-1"]
	}
	if one, all := source(); one == nil || all == nil || one.ExpiresAt != 0 || all.ExpiresAt != 0 {
		t.Fatalf("source before any expiry: %+v, %+v", one, all)
	}
	at := time.UnixMilli(1_764_460_800_000).Add(7 * 24 * time.Hour)
	if err := s.ExpireTexts(ctx, eventID, at); err != nil {
		t.Fatal(err)
	}
	one, all := source()
	if one == nil || all == nil || one.ExpiresAt != at.Unix() || all.ExpiresAt != at.Unix() {
		t.Fatalf("source after its expiry was set to %d: %+v, %+v", at.Unix(), one, all)
	}
	if one.Text != "Hallo «Welt» ünïcödé" || one.Version != 1 {
		t.Fatalf("source read back %+v", one)
	}
	// Issue 39 finding 14: every run of an ended release set its texts'
	// expiry again, a week after that run, so texts of a release run by
	// every sweep never expired. An expiry once set is kept.
	if err := s.ExpireTexts(ctx, eventID, at.Add(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if one, all := source(); one == nil || all == nil || one.ExpiresAt != at.Unix() || all.ExpiresAt != at.Unix() {
		t.Fatalf("a second expiry moved the first (%d): %+v, %+v", at.Unix(), one, all)
	}
}
