package release_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/localeflow/localeflow/contract"
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

// ingestPaths are the two ways a job input is ingested: Ingest (its job
// record and result read first, no evidence request at ingest) and
// IngestInput (on a tallied plan, written first and read on conflict, the
// evidence request created before the job record: docs/design.md "Ingest:
// plan and job events"). The tests below hold on both.
var ingestPaths = []struct {
	name   string
	ingest func(b *bundle, detail []byte) (changed bool, err error)
}{
	{"Ingest", func(b *bundle, detail []byte) (bool, error) {
		_, changed, err := b.c.Ingest(b.ctx, contract.DetailJobCompleted, detail)
		return changed, err
	}},
	{"IngestInput", func(b *bundle, detail []byte) (bool, error) {
		in, err := b.c.IngestInput(b.ctx, contract.DetailJobCompleted, detail)
		return in.Changed, err
	}},
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
	for _, p := range ingestPaths {
		p := p
		t.Run(p.name, func(t *testing.T) {
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
				_, secondErr = p.ingest(b, second)
			}
			if _, err := p.ingest(b, first); err != nil {
				t.Fatalf("first ingest: %v", err)
			}
			<-store.bDone
			if secondErr == nil {
				// The second ingestion must lose: the job already succeeded.
				t.Fatal("second result accepted too")
			}
			// Redelivery of the refused event is refused for good.
			_, err := p.ingest(b, second)
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
		})
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

// staleReadStore answers the next LoadKeys from a copy of the store taken
// before: an ingestion that read the job and result keys before a racing
// ingestion wrote them.
type staleReadStore struct {
	*releasetest.MemStore
	stale *releasetest.MemStore
}

func (s *staleReadStore) LoadKeys(ctx context.Context, eventID string, sortKeys ...string) (release.Snapshot, error) {
	if s.stale != nil {
		st := s.stale
		s.stale = nil
		return st.LoadKeys(ctx, eventID, sortKeys...)
	}
	return s.MemStore.LoadKeys(ctx, eventID, sortKeys...)
}

// TestRacingResultsThatBothReadNothing: two different results of one job,
// both read before either wrote (no job, no result). The job and result
// are two conditional writes (issue 29), so the second result's write must
// lose on the result item itself (written once, never over another
// result); the job record then names the stored result.
func TestRacingResultsThatBothReadNothing(t *testing.T) {
	for _, p := range ingestPaths {
		p := p
		t.Run(p.name, func(t *testing.T) {
			b := setup(t)
			plan := releasetest.NewPlan("evt-race2", "de-DE")
			b.ingestPlan(t, plan)
			before := releasetest.NewMemStore()
			// What both ingestions read: the plan only.
			if err := before.Put(b.ctx, b.snap(t, "evt-race2").Plan, 0); err != nil {
				t.Fatal(err)
			}
			first := b.fx.Detail(plan.ResultPayload("de-DE", releasetest.ResultOptions{Candidate: "first translation"}))
			second := b.fx.Detail(plan.ResultPayload("de-DE", releasetest.ResultOptions{Candidate: "second translation"}))
			b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{Candidate: "first translation"})
			store := &staleReadStore{MemStore: b.store, stale: before}
			b.reconfigure(t, func(d *release.Dependencies, _ *release.Config) { d.Store = store })
			_, err := p.ingest(b, second)
			if err == nil {
				t.Fatal("second result accepted after a stale read")
			}
			_, err = p.ingest(b, second)
			wantCode(t, err, release.CodeJobConflict)
			s := b.snap(t, "evt-race2")
			job, res := s.Jobs["job-de-DE"], s.Results["job-de-DE"]
			if job == nil || res == nil || job.ResultSHA256 != res.ResultSHA256 || res.ResultSHA256 != resultSHA(t, b.fx.EventKey, first) {
				t.Fatalf("job record accepts %v, result record holds %v", job, res)
			}
			if o := b.run(t, "evt-race2"); o.ApprovalID == "" {
				t.Fatalf("run = %+v, want the accepted result approved", o)
			}
		})
	}
}

// failJobOnce fails the first job record write: an ingestion that stored
// its result and crashed before its job record.
type failJobOnce struct {
	*releasetest.MemStore
	failed bool
}

func (s *failJobOnce) Put(ctx context.Context, rec release.Record, prev int64) error {
	if _, ok := rec.(*release.JobRecord); ok && !s.failed {
		s.failed = true
		return errors.New("injected: crashed before the job record")
	}
	return s.MemStore.Put(ctx, rec, prev)
}

// TestResultWithoutJobRecord: an ingestion wrote the result and crashed
// before the job record. The release does not see the job as succeeded
// (nothing reviewed, no block); another, different result is refused
// without replacing the stored one; the crashed input's redelivery writes
// its job record and the release is approved with that result.
func TestResultWithoutJobRecord(t *testing.T) {
	for _, p := range ingestPaths {
		p := p
		t.Run(p.name, func(t *testing.T) {
			b := setup(t)
			plan := releasetest.NewPlan("evt-orphan", "de-DE")
			b.ingestPlan(t, plan)
			first := b.fx.Detail(plan.ResultPayload("de-DE", releasetest.ResultOptions{Candidate: "first translation"}))
			second := b.fx.Detail(plan.ResultPayload("de-DE", releasetest.ResultOptions{Candidate: "second translation"}))
			store := &failJobOnce{MemStore: b.store}
			b.reconfigure(t, func(d *release.Dependencies, _ *release.Config) { d.Store = store })
			if _, err := p.ingest(b, first); err == nil || !core.IsRetryable(err) {
				t.Fatalf("ingest with the job write failing = %v, want a retryable error", err)
			}
			if o := b.run(t, "evt-orphan"); o.Status != release.OutcomeWaiting {
				t.Fatalf("run with a result but no job record = %+v, want waiting", o)
			}
			_, err := p.ingest(b, second)
			wantCode(t, err, release.CodeJobConflict)
			if s := b.snap(t, "evt-orphan"); s.Results["job-de-DE"].ResultSHA256 != resultSHA(t, b.fx.EventKey, first) {
				t.Fatal("a different result replaced the stored one")
			}
			if changed, err := p.ingest(b, first); err != nil || !changed {
				t.Fatalf("redelivery = %v, %v; want the job record written", changed, err)
			}
			s := b.snap(t, "evt-orphan")
			if job, res := s.Jobs["job-de-DE"], s.Results["job-de-DE"]; job == nil || res == nil || job.ResultSHA256 != res.ResultSHA256 {
				t.Fatalf("job record accepts %v, result record holds %v", job, res)
			}
			// IngestInput: the crashed ingestion's evidence lease (created
			// before its job record) is waited out, then taken over.
			b.clock.Advance(10 * time.Minute)
			if o := b.run(t, "evt-orphan"); o.ApprovalID == "" {
				t.Fatalf("run = %+v, want approved", o)
			}
		})
	}
}

// otherIngestBetween runs, once, at this coordinator's job record write,
// another coordinator's whole ingest of another result of the same job
// (on the store behind the hook): two inputs of one job racing.
type otherIngestBetween struct {
	*releasetest.MemStore
	other func()
	done  bool
}

func (s *otherIngestBetween) Put(ctx context.Context, rec release.Record, prev int64) error {
	if _, ok := rec.(*release.JobRecord); ok && !s.done {
		s.done = true
		s.other()
	}
	return s.MemStore.Put(ctx, rec, prev)
}

// TestAnotherResultBetweenTheTwoWrites: another coordinator ingests
// another result of the job between this coordinator's result write and
// its job record write (two inputs of one job racing). The other finds a
// result of another hash not yet accepted by a job record and is refused
// (coordinator.job.conflict), never replacing it; this coordinator's job
// record then accepts its own result, the one stored.
func TestAnotherResultBetweenTheTwoWrites(t *testing.T) {
	for _, p := range ingestPaths {
		p := p
		t.Run(p.name, func(t *testing.T) {
			b := setup(t)
			plan := releasetest.NewPlan("evt-race", "de-DE")
			b.ingestPlan(t, plan)
			other, err := release.NewCoordinator(b.deps, b.clock, b.log, b.cfg)
			if err != nil {
				t.Fatal(err)
			}
			theirs := b.fx.Detail(plan.ResultPayload("de-DE", releasetest.ResultOptions{Candidate: "the other result"}))
			var otherErr error
			store := &otherIngestBetween{MemStore: b.store, other: func() {
				_, _, otherErr = other.Ingest(b.ctx, contract.DetailJobCompleted, theirs)
			}}
			b.reconfigure(t, func(d *release.Dependencies, _ *release.Config) { d.Store = store })
			mine := b.fx.Detail(plan.ResultPayload("de-DE", releasetest.ResultOptions{Candidate: "this coordinator's result"}))
			if _, err := p.ingest(b, mine); err != nil {
				t.Fatal(err)
			}
			if !store.done {
				t.Fatal("the other ingest did not run between the writes")
			}
			wantCode(t, otherErr, release.CodeJobConflict)
			s := b.snap(t, "evt-race")
			if job, res := s.Jobs["job-de-DE"], s.Results["job-de-DE"]; job == nil || res == nil || job.ResultSHA256 != res.ResultSHA256 || res.ResultSHA256 != resultSHA(t, b.fx.EventKey, mine) {
				t.Fatalf("job record accepts %v, result record holds %v", job, res)
			}
		})
	}
}
