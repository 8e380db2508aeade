package release_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

// racingStore interleaves two ingestions of one job the way concurrent
// Lambda invocations can: ingestion B starts right after A stored a result
// record, and B's job record write waits until A wrote its job record.
type racingStore struct {
	*releasetest.MemStore
	shaA, shaB   string
	startB       func()
	started      bool
	bWroteResult chan struct{}
	bDone        chan struct{}
	aWroteJob    chan struct{}
}

func (s *racingStore) before(recs []release.Record) {
	for _, r := range recs {
		if j, ok := r.(*release.JobRecord); ok && j.ResultSHA256 == s.shaB {
			<-s.aWroteJob
		}
	}
}

func (s *racingStore) after(recs []release.Record) {
	startB := false
	for _, r := range recs {
		switch r := r.(type) {
		case *release.JobRecord:
			if r.ResultSHA256 == s.shaA {
				close(s.aWroteJob)
			}
		case *release.ResultRecord:
			if r.ResultSHA256 == s.shaB {
				close(s.bWroteResult)
			}
			if r.ResultSHA256 == s.shaA && !s.started {
				s.started, startB = true, true
			}
		}
	}
	if startB {
		go s.startB()
		select {
		case <-s.bWroteResult:
		case <-s.bDone:
		}
	}
}

func (s *racingStore) Put(ctx context.Context, rec release.Record, prev int64) error {
	s.before([]release.Record{rec})
	if err := s.MemStore.Put(ctx, rec, prev); err != nil {
		return err
	}
	s.after([]release.Record{rec})
	return nil
}

func (s *racingStore) PutAll(ctx context.Context, writes ...release.Write) error {
	recs := make([]release.Record, len(writes))
	for i, w := range writes {
		recs[i] = w.Rec
	}
	s.before(recs)
	if err := s.MemStore.PutAll(ctx, writes...); err != nil {
		return err
	}
	s.after(recs)
	return nil
}

// resultSHA is the result hash a job.completed detail carries.
func resultSHA(t *testing.T, key, detail []byte) string {
	t.Helper()
	ev, err := release.ParseSignedEvent(key, "localeflow.job.completed", detail)
	if err != nil {
		t.Fatal(err)
	}
	return core.SHA256Hex(ev.Job.ResultJSON)
}

// TestRefusedResultIsNeverTheStoredOne: two different, validly signed
// results for one job interleave. The one the job record refuses
// (coordinator.job.conflict) must not be the result that is reviewed: the
// stored result is the accepted one, and the evidence request binds it.
func TestRefusedResultIsNeverTheStoredOne(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-race", "de-DE")
	b.ingestPlan(t, plan)
	first := b.fx.Detail(plan.ResultPayload("de-DE", releasetest.ResultOptions{Candidate: "first translation"}))
	second := b.fx.Detail(plan.ResultPayload("de-DE", releasetest.ResultOptions{Candidate: "second translation"}))
	store := &racingStore{
		MemStore: b.store, shaA: resultSHA(t, b.fx.EventKey, first), shaB: resultSHA(t, b.fx.EventKey, second),
		bWroteResult: make(chan struct{}), bDone: make(chan struct{}), aWroteJob: make(chan struct{}),
	}
	b.reconfigure(t, func(d *release.Dependencies, _ *release.Config) { d.Store = store })
	var secondErr error
	store.startB = func() {
		defer close(store.bDone)
		_, _, secondErr = b.c.Ingest(b.ctx, "localeflow.job.completed", second)
	}
	if _, _, err := b.c.Ingest(b.ctx, "localeflow.job.completed", first); err != nil {
		t.Fatalf("first ingest: %v", err)
	}
	<-store.bDone
	if secondErr == nil {
		// The second ingestion must lose: the job already succeeded.
		t.Fatal("second result accepted too")
	}
	// Redelivery of the refused event is refused for good.
	_, _, err := b.c.Ingest(b.ctx, "localeflow.job.completed", second)
	wantCode(t, err, release.CodeJobConflict)
	s := b.snap(t, "evt-race")
	job, res := s.Jobs["job-de-DE"], s.Results["job-de-DE"]
	if job == nil || res == nil || job.ResultSHA256 != res.ResultSHA256 {
		t.Fatalf("job record accepts %v, result record holds %v", job, res)
	}
	var r release.Result
	if err := json.Unmarshal([]byte(res.ResultJSON), &r); err != nil || r.Candidate != "first translation" {
		t.Fatalf("stored candidate %q (%v), want the accepted first one", r.Candidate, err)
	}
}

// TestResultDifferentFromJobRecordIsRefused: a result record whose hash is
// not the one the job record accepted is refused before any review.
func TestResultDifferentFromJobRecordIsRefused(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-mm", "de-DE")
	b.ingestPlan(t, plan)
	b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{Candidate: "accepted"})
	// A second, complete and self-consistent result record replaces the
	// accepted one behind the job record's back.
	other := setup(t)
	other.ingestPlan(t, plan)
	other.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{Candidate: "refused"})
	swapped := *other.snap(t, "evt-mm").Results["job-de-DE"]
	cur := b.snap(t, "evt-mm").Results["job-de-DE"]
	swapped.Version = cur.Version + 1
	if err := b.store.Put(b.ctx, &swapped, cur.Version); err != nil {
		t.Fatal(err)
	}
	_, err := b.c.RunNextRelease(b.ctx, "evt-mm")
	wantCode(t, err, release.CodeResultJobMismatch)
	if core.IsRetryable(err) {
		t.Fatal("a mismatched result must be refused for good")
	}
	if n := b.resp.Calls(); n != 0 {
		t.Fatalf("evidence provider called %d times for a refused result", n)
	}
}
