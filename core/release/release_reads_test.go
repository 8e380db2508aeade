package release_test

import (
	"context"
	"strings"
	"testing"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

// readCounter counts the reads a coordinator makes, by kind, on the memory
// store: full collection reads (Load), state reads (LoadState) and the
// records read by key (LoadKeys).
type readCounter struct {
	*releasetest.MemStore
	full, state int
	keys        []string
	prefixes    []string
}

func (s *readCounter) Load(ctx context.Context, eventID string) (release.Snapshot, error) {
	s.full++
	return s.MemStore.Load(ctx, eventID)
}

func (s *readCounter) LoadState(ctx context.Context, eventID string) (release.Snapshot, error) {
	s.state++
	return s.MemStore.LoadState(ctx, eventID)
}

func (s *readCounter) LoadKeys(ctx context.Context, eventID string, sortKeys ...string) (release.Snapshot, error) {
	s.keys = append(s.keys, sortKeys...)
	return s.MemStore.LoadKeys(ctx, eventID, sortKeys...)
}

func (s *readCounter) LoadPrefix(ctx context.Context, eventID, prefix string) (release.Snapshot, error) {
	s.prefixes = append(s.prefixes, prefix)
	return s.MemStore.LoadPrefix(ctx, eventID, prefix)
}

func (s *readCounter) reset() { s.full, s.state, s.keys, s.prefixes = 0, 0, nil, nil }

// A step reads the release's state and the texts of the one locale it
// approves, not every text of the release; a job input reads its plan, its
// own job record and result; clearing an owed approval event reads that
// approval only. Before (issue 29) every one of them read the whole item
// collection: each step's reads grew with the release, quadratic over it.
func TestStepsReadOnlyWhatTheyUse(t *testing.T) {
	b := setup(t)
	rc := &readCounter{MemStore: b.store}
	b.reconfigure(t, func(d *release.Dependencies, _ *release.Config) { d.Store = rc })
	plan := releasetest.NewPlan("evt-reads", "de-DE", "fr-FR", "it-IT")
	b.ingestPlan(t, plan)
	for _, l := range []string{"de-DE", "fr-FR"} {
		b.ingestResult(t, plan, l, releasetest.ResultOptions{})
	}
	rc.reset()
	b.ingestResult(t, plan, "it-IT", releasetest.ResultOptions{})
	if rc.full != 0 || rc.state != 0 || strings.Join(rc.keys, " ") != "plan job#job-it-IT result#job-it-IT" {
		t.Fatalf("job input read: %d full, %d state reads, keys %v", rc.full, rc.state, rc.keys)
	}
	rc.reset()
	o, err := b.c.RunNextRelease(b.ctx, "evt-reads")
	if err != nil || o.Status != release.OutcomeApproved || o.TargetLocale != "de-DE" || !o.Tallied {
		t.Fatalf("first run: %+v %v", o, err)
	}
	// The walk's approval joins the tally (read by key; created from the
	// walk's state read).
	if rc.full != 0 || rc.state != 1 || strings.Join(rc.keys, " ") != "source#job-de-DE result#job-de-DE tally" {
		t.Fatalf("approving step read: %d full, %d state reads, keys %v", rc.full, rc.state, rc.keys)
	}
	rc.reset()
	// Settling its published event (tallied by the step) reads that
	// approval and its evidence record only.
	req := b.snap(t, "evt-reads").Approvals["job-de-DE"].RequestID
	rc.reset()
	if err := b.c.SettleApproval(b.ctx, "evt-reads", "job-de-DE", o.ApprovalID, !o.Tallied); err != nil {
		t.Fatal(err)
	}
	if rc.full != 0 || rc.state != 0 || strings.Join(rc.keys, " ") != "approval#job-de-DE evidence#"+req {
		t.Fatalf("settling read: %d full, %d state reads, keys %v", rc.full, rc.state, rc.keys)
	}
	if owed := owedOf(t, b, "evt-reads"); len(owed) != 0 {
		t.Fatalf("still owed: %v", owed)
	}
	b.run(t, "evt-reads")
	rc.reset()
	// The step that completes the plan reads every text once: the results
	// for the bundle, the sources to check them.
	if o := b.run(t, "evt-reads"); o.Status != release.OutcomeDeliveryReady {
		t.Fatalf("last run: %+v", o)
	}
	if rc.full != 0 || rc.state != 1 || strings.Join(rc.prefixes, " ") != "result# source#" {
		t.Fatalf("preparing step read: %d full, %d state reads, keys %v, prefixes %v", rc.full, rc.state, rc.keys, rc.prefixes)
	}
	rc.reset()
	// Sending rebuilds the bundle from the results (no source).
	if _, err := b.c.Deliver(b.ctx, "evt-reads"); err != nil {
		t.Fatal(err)
	}
	if rc.full != 0 || rc.state != 1 || strings.Join(rc.prefixes, " ") != "result#" || len(rc.keys) != 0 {
		t.Fatalf("delivering step read: %d full, %d state reads, keys %v, prefixes %v", rc.full, rc.state, rc.keys, rc.prefixes)
	}
	rc.reset()
	// A delivered release ends on its state: no text is read again.
	if o, err := b.c.Deliver(b.ctx, "evt-reads"); err != nil || o.Status != release.OutcomeDelivered {
		t.Fatalf("deliver again: %+v %v", o, err)
	}
	if o := b.run(t, "evt-reads"); o.Status != release.OutcomeDelivered {
		t.Fatalf("run after delivery: %+v", o)
	}
	if rc.full != 0 || len(rc.keys) != 0 || len(rc.prefixes) != 0 {
		t.Fatalf("after delivery read: %d full, keys %v, prefixes %v", rc.full, rc.keys, rc.prefixes)
	}
}

// A new evidence request is created leased, its first attempt claimed, in
// one write (before: a pending record, then its claim, two writes and a
// wake index entry moved twice).
func TestNewEvidenceRequestIsCreatedLeased(t *testing.T) {
	b := setup(t)
	var evidence []release.EvidenceRecord
	b.store.FailPuts(func(rec release.Record) error {
		if e, ok := rec.(*release.EvidenceRecord); ok {
			evidence = append(evidence, *e)
		}
		return nil
	})
	plan := releasetest.NewPlan("evt-lease", "de-DE")
	b.ingestPlan(t, plan)
	b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{})
	if o := b.run(t, "evt-lease"); o.Status != release.OutcomeDeliveryReady {
		t.Fatalf("%+v", o)
	}
	if len(evidence) != 2 || evidence[0].Status != release.StateLeased || evidence[0].Version != 1 ||
		evidence[0].Attempts != 1 || evidence[0].LeaseOwner != "worker-1" || evidence[0].LeaseToken == "" ||
		evidence[0].LeaseExpiresMS != core.Millis(t0.Add(release.DefaultEvidenceLease)) ||
		evidence[1].Status != release.StateSucceeded || evidence[1].Version != 2 {
		t.Fatalf("evidence writes: %+v", evidence)
	}
}
