package release_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

// readLog records the sort keys every LoadKeys read, and every Put tried
// (kind and outcome), for the write-first checks of ingest (issue 29).
type readLog struct {
	*releasetest.MemStore
	reads []string
	puts  []string
}

func (s *readLog) LoadKeys(ctx context.Context, eventID string, sortKeys ...string) (release.Snapshot, error) {
	for _, sk := range sortKeys {
		k, _, _ := strings.Cut(sk, "#")
		s.reads = append(s.reads, k)
	}
	return s.MemStore.LoadKeys(ctx, eventID, sortKeys...)
}

func (s *readLog) Put(ctx context.Context, rec release.Record, prev int64) error {
	_, sk := rec.Key()
	k, _, _ := strings.Cut(sk, "#")
	err := s.MemStore.Put(ctx, rec, prev)
	switch {
	case errors.Is(err, release.ErrConflict):
		k += ":refused"
	case err != nil:
		k += ":failed"
	}
	s.puts = append(s.puts, k)
	return err
}

func (s *readLog) reset() { s.reads, s.puts = nil, nil }

func logged(b *bundle, t *testing.T) *readLog {
	l := &readLog{MemStore: b.store}
	b.reconfigure(t, func(d *release.Dependencies, _ *release.Config) { d.Store = l })
	return l
}

func jobDetail(b *bundle, p releasetest.PlanSpec, locale, candidate string) []byte {
	return b.fx.Detail(p.ResultPayload(locale, releasetest.ResultOptions{Candidate: candidate}))
}

// The first input of a job reads only the plan (and, for the evidence
// request created at ingest, the locale's source): never its own job
// record and result, which do not exist yet and which AWS would bill a
// read unit each for finding nothing. A failed job reads only the plan.
func TestFreshJobInputReadsNeitherItsJobNorItsResult(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-wf", "de-DE", "fr-FR")
	b.ingestPlan(t, plan)
	l := logged(b, t)
	if _, err := b.c.IngestInput(b.ctx, contract.DetailJobCompleted, jobDetail(b, plan, "de-DE", "")); err != nil {
		t.Fatal(err)
	}
	if want := []string{"plan", "source"}; !reflect.DeepEqual(l.reads, want) {
		t.Fatalf("succeeded job input read %v, want %v", l.reads, want)
	}
	if want := []string{"result", "evidence", "job"}; !reflect.DeepEqual(l.puts, want) {
		t.Fatalf("succeeded job input wrote %v, want %v", l.puts, want)
	}
	l.reset()
	if _, err := b.c.IngestInput(b.ctx, contract.DetailJobCompleted, b.fx.Detail(plan.FailedPayload("fr-FR"))); err != nil {
		t.Fatal(err)
	}
	if want := []string{"plan"}; !reflect.DeepEqual(l.reads, want) {
		t.Fatalf("failed job input read %v, want %v", l.reads, want)
	}
	if want := []string{"job"}; !reflect.DeepEqual(l.puts, want) {
		t.Fatalf("failed job input wrote %v, want %v", l.puts, want)
	}
}

// A duplicate of an ingested input: its result write is refused (the
// result exists), it reads the job record and changes nothing.
func TestDuplicateJobInputAfterWriteFirst(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-dup", "de-DE", "fr-FR")
	b.ingestPlan(t, plan)
	in := b.input(t, plan, "de-DE")
	before := b.snap(t, "evt-dup")
	l := logged(b, t)
	again, err := b.c.IngestInput(b.ctx, contract.DetailJobCompleted, jobDetail(b, plan, "de-DE", ""))
	if err != nil || again.Changed || again.JobID() != "" {
		t.Fatalf("duplicate = %+v, %v; want unchanged, no named step", again, err)
	}
	if want := []string{"result:refused"}; !reflect.DeepEqual(l.puts, want) {
		t.Fatalf("duplicate wrote %v, want %v", l.puts, want)
	}
	// The job record decides (same payload): the result is not read.
	if want := []string{"plan", "source", "job"}; !reflect.DeepEqual(l.reads, want) {
		t.Fatalf("duplicate read %v, want %v", l.reads, want)
	}
	if after := b.snap(t, "evt-dup"); !reflect.DeepEqual(after, before) {
		t.Fatalf("duplicate changed the records:\n%+v\n%+v", before, after)
	}
	if o := b.runInput(t, in); o.Status != release.OutcomeApproved {
		t.Fatalf("%+v", o)
	}
}

// A different result for a job that succeeded: coordinator.job.conflict,
// the stored result and job record unchanged.
func TestDifferentResultAfterWriteFirstIsAConflict(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-diff", "de-DE")
	b.ingestPlan(t, plan)
	if _, err := b.c.IngestInput(b.ctx, contract.DetailJobCompleted, jobDetail(b, plan, "de-DE", "first translation")); err != nil {
		t.Fatal(err)
	}
	before := b.snap(t, "evt-diff")
	_, err := b.c.IngestInput(b.ctx, contract.DetailJobCompleted, jobDetail(b, plan, "de-DE", "second translation"))
	wantCode(t, err, release.CodeJobConflict)
	if core.IsRetryable(err) {
		t.Fatal("a conflicting result must be refused for good")
	}
	if after := b.snap(t, "evt-diff"); !reflect.DeepEqual(after, before) {
		t.Fatalf("conflict changed the records:\n%+v\n%+v", before, after)
	}
}

// A job that failed and then succeeded: the failed event is written first
// (job record v1); the succeeded one creates its result (v1) and its
// evidence request, then finds the job record (refused), reads it and
// writes v2 without awaiting_claim — the versions the read-first code
// wrote. The release is approved.
func TestFailedThenSucceededJobInput(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-fs", "de-DE")
	b.ingestPlan(t, plan)
	if _, err := b.c.IngestInput(b.ctx, contract.DetailJobCompleted, b.fx.Detail(plan.FailedPayload("de-DE"))); err != nil {
		t.Fatal(err)
	}
	if j := b.snap(t, "evt-fs").Jobs["job-de-DE"]; j == nil || j.Status != release.JobFailed || j.Version != 1 {
		t.Fatalf("failed job %+v", j)
	}
	l := logged(b, t)
	in, err := b.c.IngestInput(b.ctx, contract.DetailJobCompleted, jobDetail(b, plan, "de-DE", ""))
	if err != nil || !in.Changed || in.JobID() != "job-de-DE" {
		t.Fatalf("succeeded after failed = %+v, %v", in, err)
	}
	if want := []string{"result", "evidence", "job:refused", "job"}; !reflect.DeepEqual(l.puts, want) {
		t.Fatalf("wrote %v, want %v", l.puts, want)
	}
	s := b.snap(t, "evt-fs")
	j, r := s.Jobs["job-de-DE"], s.Results["job-de-DE"]
	if j.Status != release.JobSucceeded || j.Version != 2 || j.AwaitingClaim || r.Version != 1 || j.ResultSHA256 != r.ResultSHA256 {
		t.Fatalf("job %+v result v%d", j, r.Version)
	}
	if o := b.handlerStep(t, in, map[string]int{}); o.Status != release.OutcomeDeliveryReady {
		t.Fatalf("%+v", o)
	}
	// A failed event again (the job's earlier event, redelivered late):
	// refused, the succeeded job stands.
	_, err = b.c.IngestInput(b.ctx, contract.DetailJobCompleted, b.fx.Detail(plan.FailedPayload("de-DE")))
	wantCode(t, err, release.CodeJobConflict)
}

// The process dies after the result write, before the job record: the
// redelivered input finds its result (refused create), reads, writes the
// same result again and completes; the release is delivered.
func TestCrashAfterResultThenRedelivery(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-cr", "de-DE")
	b.ingestPlan(t, plan)
	b.store.FailPuts(func(rec release.Record) error {
		switch rec.(type) {
		case *release.EvidenceRecord, *release.JobRecord:
			return errDown
		}
		return nil
	})
	if _, err := b.ingestInput(plan, "de-DE"); err == nil || !core.IsRetryable(err) {
		t.Fatalf("ingest = %v, want a retryable failure", err)
	}
	b.store.FailPuts(nil)
	l := logged(b, t)
	in, err := b.ingestInput(plan, "de-DE")
	if err != nil || !in.Changed || in.JobID() != "job-de-DE" {
		t.Fatalf("redelivery = %+v, %v", in, err)
	}
	if want := []string{"result:refused", "result", "evidence", "job"}; !reflect.DeepEqual(l.puts, want) {
		t.Fatalf("redelivery wrote %v, want %v", l.puts, want)
	}
	if o := b.handlerStep(t, in, map[string]int{}); o.Status != release.OutcomeDeliveryReady {
		t.Fatalf("%+v", o)
	}
}

// A late duplicate of a delivered release's input, after the release's
// texts expired (the result deleted by its TTL, the source expiring or
// gone): it must not store the result text again (a text with no expiry
// would stay for good) nor create an evidence request; it changes
// nothing. The result create would succeed here (no result item), so
// ingest must know the release ended before writing: the source's text
// expiry tells it.
func TestLateDuplicateAfterTextsExpiredWritesNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		// gone: the source is deleted too (else only the result).
		gone bool
	}{{"result deleted, source expiring", false}, {"result and source deleted", true}} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t)
			plan := releasetest.NewPlan("evt-late", "de-DE")
			b.ingestPlan(t, plan)
			if o := b.handlerStep(t, b.input(t, plan, "de-DE"), map[string]int{}); o.Status != release.OutcomeDeliveryReady {
				t.Fatalf("%+v", o)
			}
			if d, err := b.c.Deliver(b.ctx, "evt-late"); err != nil || d.Status != release.OutcomeDelivered {
				t.Fatalf("deliver = %+v, %v", d, err)
			}
			if err := b.store.ExpireTexts(b.ctx, "evt-late", b.clock.Now().Add(7*24*time.Hour)); err != nil {
				t.Fatal(err)
			}
			b.clock.Advance(8 * 24 * time.Hour)
			deleted := b.store.DeleteExpired(b.clock.Now(), func(_, sk string) time.Duration {
				if strings.HasPrefix(sk, release.SKSourcePrefix) && !tc.gone {
					return 48 * time.Hour // DynamoDB deletes it later
				}
				return 0
			})
			if want := map[bool]int{false: 1, true: 2}[tc.gone]; len(deleted) != want {
				t.Fatalf("deleted %v", deleted)
			}
			before := b.snap(t, "evt-late")
			_, puts := b.store.Counts()
			in, err := b.ingestInput(plan, "de-DE")
			if err != nil || in.Changed {
				t.Fatalf("late duplicate = %+v, %v; want unchanged", in, err)
			}
			if _, after := b.store.Counts(); after != puts {
				t.Fatalf("late duplicate wrote %d records", after-puts)
			}
			if s := b.snap(t, "evt-late"); !reflect.DeepEqual(s, before) || s.Results["job-de-DE"] != nil {
				t.Fatalf("records changed:\n%+v\n%+v", before, s)
			}
			if o := b.run(t, "evt-late"); o.Status != release.OutcomeDelivered {
				t.Fatalf("after the late duplicate: %+v", o)
			}
		})
	}
}

// secondCopy runs, once, a whole second ingestion right before the first
// evidence record write: two copies of one input at once.
type secondCopy struct {
	*releasetest.MemStore
	run  func()
	done bool
}

func (s *secondCopy) Put(ctx context.Context, rec release.Record, prev int64) error {
	if _, ok := rec.(*release.EvidenceRecord); ok && !s.done {
		s.done = true
		s.run()
	}
	return s.MemStore.Put(ctx, rec, prev)
}

// Two copies of one input written first at once: the second finds the
// result the first created, reads, and goes on as from a read; the first
// then finds the evidence request and the job record the second wrote
// (both refused), reads the job record: a duplicate, nothing more. One job
// record, naming the stored result, covered by the evidence lease; the
// second copy's named step approves.
func TestRacingCopiesOfOneInputWrittenFirst(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-copies", "de-DE")
	b.ingestPlan(t, plan)
	detail := jobDetail(b, plan, "de-DE", "")
	var second release.Input
	var secondErr error
	store := &secondCopy{MemStore: b.store}
	store.run = func() {
		second, secondErr = b.c.IngestInput(b.ctx, contract.DetailJobCompleted, detail)
	}
	b.reconfigure(t, func(d *release.Dependencies, _ *release.Config) { d.Store = store })
	first, err := b.c.IngestInput(b.ctx, contract.DetailJobCompleted, detail)
	if err != nil || first.Changed || first.JobID() != "" {
		t.Fatalf("first copy = %+v, %v; want unchanged (the second wrote the job record)", first, err)
	}
	if secondErr != nil || !second.Changed || second.JobID() != "job-de-DE" {
		t.Fatalf("second copy = %+v, %v", second, secondErr)
	}
	s := b.snap(t, "evt-copies")
	j, r := s.Jobs["job-de-DE"], s.Results["job-de-DE"]
	if j == nil || r == nil || j.ResultSHA256 != r.ResultSHA256 || j.Version != 1 || j.AwaitingClaim {
		t.Fatalf("job %+v result %+v", j, r)
	}
	if u := uncovered(t, b, "evt-copies"); len(u) != 0 {
		t.Fatalf("no wake entry: %v", u)
	}
	if o := b.handlerStep(t, second, map[string]int{}); o.Status != release.OutcomeDeliveryReady {
		t.Fatalf("%+v", o)
	}
}
