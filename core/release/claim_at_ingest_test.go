package release_test

import (
	"testing"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

// uncovered lists the succeeded jobs of the release that hold no approval
// and have no wake entry: neither awaiting_claim on the job record nor an
// evidence record of the job in the wake index (docs/design.md "Release
// wake entries": a succeeded job is never stranded without one).
func uncovered(t *testing.T, b *bundle, eventID string) []string {
	t.Helper()
	s := b.snap(t, eventID)
	var out []string
	for id, j := range s.Jobs {
		if j.Status != release.JobSucceeded || s.Approvals[id] != nil {
			continue
		}
		if _, wakes, _, _ := release.Wake(j); wakes {
			continue
		}
		covered := false
		for _, e := range s.Evidence {
			if _, wakes, _, _ := release.Wake(e); wakes && e.JobID == id {
				covered = true
			}
		}
		if !covered {
			out = append(out, id)
		}
	}
	return out
}

// indexWake is the release's earliest entry in the wake index (every
// record release.Wake puts there), as the release sweep finds it.
func indexWake(t *testing.T, b *bundle, eventID string) (time.Time, bool) {
	t.Helper()
	s := b.snap(t, eventID)
	var recs []release.Record
	for _, r := range s.Jobs {
		recs = append(recs, r)
	}
	for _, r := range s.Evidence {
		recs = append(recs, r)
	}
	for _, r := range s.Approvals {
		recs = append(recs, r)
	}
	if s.Delivery != nil {
		recs = append(recs, s.Delivery)
	}
	var best int64
	found := false
	for _, r := range recs {
		if ms, wakes, _, _ := release.Wake(r); wakes && (!found || ms < best) {
			best, found = ms, true
		}
	}
	return time.UnixMilli(best).UTC(), found
}

// failOnce makes the store refuse the first write of a record of type T
// (a process that dies right before that write: nothing after it runs).
func failOnce[T release.Record](b *bundle) *int {
	n := new(int)
	b.store.FailPuts(func(rec release.Record) error {
		if _, ok := rec.(T); ok && *n == 0 {
			*n++
			return errDown
		}
		return nil
	})
	return n
}

func (b *bundle) ingestInput(p releasetest.PlanSpec, locale string) (release.Input, error) {
	return b.c.IngestInput(b.ctx, contract.DetailJobCompleted, b.fx.Detail(p.ResultPayload(locale, releasetest.ResultOptions{})))
}

// The job input of a tallied release creates its evidence request leased
// before the job record, which is written without awaiting_claim and never
// written again on the way to the delivery (issue 29).
func TestJobInputCreatesItsEvidenceBeforeTheJobRecord(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-ci", "de-DE")
	b.ingestPlan(t, plan)
	var order []string
	jobWrites := 0
	b.store.FailPuts(func(rec release.Record) error {
		switch rec.(type) {
		case *release.EvidenceRecord:
			order = append(order, "evidence")
		case *release.JobRecord:
			order = append(order, "job")
			jobWrites++
		case *release.ResultRecord:
			order = append(order, "result")
		}
		return nil
	})
	in := b.input(t, plan, "de-DE")
	if got := order; len(got) != 3 || got[0] != "result" || got[1] != "evidence" || got[2] != "job" {
		t.Fatalf("write order %v", got)
	}
	s := b.snap(t, "evt-ci")
	if j := s.Jobs["job-de-DE"]; j.AwaitingClaim {
		t.Fatalf("job record %+v", j)
	}
	if e := b.onlyEvidence(t, "evt-ci"); e.Status != release.StateLeased || e.Attempts != 1 {
		t.Fatalf("evidence %+v", e)
	}
	if o := b.runInput(t, in); o.Status != release.OutcomeDeliveryReady {
		t.Fatalf("%+v", o)
	}
	if jobWrites != 1 {
		t.Fatalf("job record written %d times", jobWrites)
	}
	if e := b.onlyEvidence(t, "evt-ci"); e.Status != release.StateSucceeded || e.Attempts != 1 {
		t.Fatalf("evidence %+v", e)
	}
}

// Each write of the job input, the process dying right before it or right
// after it: no succeeded job is ever left without a wake entry, and the
// returning message (or the wake) finishes the release.
func TestJobInputCrashPoints(t *testing.T) {
	// dies before the result write: nothing stored; the message returns.
	t.Run("before result", func(t *testing.T) {
		b := setup(t)
		plan := releasetest.NewPlan("evt-c1", "de-DE")
		b.ingestPlan(t, plan)
		failOnce[*release.ResultRecord](b)
		if _, err := b.ingestInput(plan, "de-DE"); err == nil {
			t.Fatal("ingest did not fail")
		}
		if s := b.snap(t, "evt-c1"); len(s.Jobs) != 0 || len(s.Evidence) != 0 {
			t.Fatalf("%+v", s)
		}
		if o := b.runInput(t, b.input(t, plan, "de-DE")); o.Status != release.OutcomeDeliveryReady {
			t.Fatalf("%+v", o)
		}
	})
	// dies before the evidence write (after the result): no succeeded job
	// record (nothing to wake for); the message returns and completes it.
	t.Run("before evidence", func(t *testing.T) {
		b := setup(t)
		plan := releasetest.NewPlan("evt-c2", "de-DE")
		b.ingestPlan(t, plan)
		// The death: no write from the evidence write on.
		b.store.FailPuts(func(rec release.Record) error {
			switch rec.(type) {
			case *release.EvidenceRecord, *release.JobRecord:
				return errDown
			}
			return nil
		})
		if _, err := b.ingestInput(plan, "de-DE"); err == nil {
			t.Fatal("ingest did not fail")
		}
		s := b.snap(t, "evt-c2")
		if len(s.Jobs) != 0 || len(s.Evidence) != 0 || s.Results["job-de-DE"] == nil {
			t.Fatalf("%+v", s)
		}
		b.store.FailPuts(nil)
		if o := b.runInput(t, b.input(t, plan, "de-DE")); o.Status != release.OutcomeDeliveryReady {
			t.Fatalf("%+v", o)
		}
	})
	// the evidence write fails (not a death): the job record keeps
	// awaiting_claim, and the step creates the request as before.
	t.Run("evidence write fails", func(t *testing.T) {
		b := setup(t)
		plan := releasetest.NewPlan("evt-c3", "de-DE")
		b.ingestPlan(t, plan)
		failOnce[*release.EvidenceRecord](b)
		in, err := b.ingestInput(plan, "de-DE")
		if err != nil {
			t.Fatal(err)
		}
		s := b.snap(t, "evt-c3")
		if j := s.Jobs["job-de-DE"]; j == nil || !j.AwaitingClaim || len(s.Evidence) != 0 {
			t.Fatalf("%+v", s)
		}
		if u := uncovered(t, b, "evt-c3"); len(u) != 0 {
			t.Fatalf("no wake entry: %v", u)
		}
		if o := b.runInput(t, in); o.Status != release.OutcomeDeliveryReady {
			t.Fatalf("%+v", o)
		}
		if j := b.snap(t, "evt-c3").Jobs["job-de-DE"]; j.AwaitingClaim {
			t.Fatalf("mark left: %+v", j)
		}
	})
	// dies after the evidence write, before the job record: the lease's
	// wake entry wakes the release; the returning message sees the
	// evidence record (created conditional on its absence: lost), writes
	// the job record with awaiting_claim and runs the full walk, which
	// waits out the dead process's lease and then approves.
	t.Run("after evidence", func(t *testing.T) {
		b := setup(t)
		plan := releasetest.NewPlan("evt-c4", "de-DE")
		b.ingestPlan(t, plan)
		failOnce[*release.JobRecord](b)
		if _, err := b.ingestInput(plan, "de-DE"); err == nil {
			t.Fatal("ingest did not fail")
		}
		e := b.onlyEvidence(t, "evt-c4")
		if _, wakes, _, _ := release.Wake(e); !wakes || e.Status != release.StateLeased {
			t.Fatalf("evidence %+v", e)
		}
		in, err := b.ingestInput(plan, "de-DE")
		if err != nil {
			t.Fatal(err)
		}
		if in.JobID() != "" {
			t.Fatalf("returning input named %q", in.JobID())
		}
		if j := b.snap(t, "evt-c4").Jobs["job-de-DE"]; !j.AwaitingClaim {
			t.Fatalf("job %+v", j)
		}
		if o := b.runInput(t, in); o.Status != release.OutcomeWaiting || o.WakeAt.IsZero() {
			t.Fatalf("%+v", o)
		}
		b.clock.Advance(10 * time.Minute)
		if o := b.run(t, "evt-c4"); o.Status != release.OutcomeDeliveryReady {
			t.Fatalf("%+v", o)
		}
		if j := b.snap(t, "evt-c4").Jobs["job-de-DE"]; j.AwaitingClaim {
			t.Fatalf("mark left: %+v", j)
		}
	})
	// dies after the job record, before the step: the job has no
	// awaiting_claim but its evidence lease wakes the release (this is the
	// wake coverage: it fails if the job record were written without the
	// mark and without the evidence record); the wake's run takes the
	// lease over once expired. The returning message is a duplicate: the
	// full walk, the same.
	t.Run("after job", func(t *testing.T) {
		b := setup(t)
		plan := releasetest.NewPlan("evt-c5", "de-DE", "fr-FR")
		b.ingestPlan(t, plan)
		for _, l := range []string{"de-DE", "fr-FR"} {
			if _, err := b.ingestInput(plan, l); err != nil {
				t.Fatal(err)
			}
		}
		if u := uncovered(t, b, "evt-c5"); len(u) != 0 {
			t.Fatalf("succeeded jobs without a wake entry: %v", u)
		}
		wake, ok := indexWake(t, b, "evt-c5")
		if !ok {
			t.Fatal("no wake entry")
		}
		b.clock.Advance(wake.Sub(b.clock.Now()) + time.Millisecond)
		if o := b.run(t, "evt-c5"); o.Status != release.OutcomeApproved {
			t.Fatalf("%+v", o)
		}
		if o := b.run(t, "evt-c5"); o.Status != release.OutcomeDeliveryReady {
			t.Fatalf("%+v", o)
		}
	})
}

// A job input half-ingested (dead after the evidence write) returns to an
// ingest that creates no evidence (the job record with awaiting_claim:
// Ingest, as an invocation short of time ingests) and runs the full walk;
// and those job records meet the named steps of job inputs ingested with
// their evidence. The release is delivered once.
func TestHalfIngestedInputReturnsToAnIngestWithoutEvidence(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-mf", "de-DE", "fr-FR", "it-IT")
	b.ingestPlan(t, plan)
	failOnce[*release.JobRecord](b)
	if _, err := b.ingestInput(plan, "de-DE"); err == nil {
		t.Fatal("ingest did not fail")
	}
	// The previous way, for the returning de-DE and for fr-FR.
	for _, l := range []string{"de-DE", "fr-FR"} {
		b.ingestResult(t, plan, l, releasetest.ResultOptions{})
	}
	s := b.snap(t, "evt-mf")
	if !s.Jobs["job-de-DE"].AwaitingClaim || !s.Jobs["job-fr-FR"].AwaitingClaim || len(s.Evidence) != 1 {
		t.Fatalf("%+v", s)
	}
	if u := uncovered(t, b, "evt-mf"); len(u) != 0 {
		t.Fatalf("no wake entry: %v", u)
	}
	// This code's named step for it-IT.
	if o := b.runInput(t, b.input(t, plan, "it-IT")); o.Status != release.OutcomeApproved || o.TargetLocale != "it-IT" {
		t.Fatalf("%+v", o)
	}
	delivered := false
	for i := 0; i < 10 && !delivered; i++ {
		wake, ok := indexWake(t, b, "evt-mf")
		if !ok {
			t.Fatalf("iteration %d: no wake entry", i)
		}
		if wake.After(b.clock.Now()) {
			b.clock.Advance(wake.Sub(b.clock.Now()) + time.Millisecond)
		}
		o := b.run(t, "evt-mf")
		if o.Status == release.OutcomeDeliveryReady {
			if _, err := b.c.Deliver(b.ctx, "evt-mf"); err != nil {
				t.Fatal(err)
			}
			delivered = true
		}
	}
	if !delivered || b.cms.Sends != 1 {
		t.Fatalf("delivered %v", delivered)
	}
	final := b.snap(t, "evt-mf")
	for id, j := range final.Jobs {
		if j.AwaitingClaim {
			t.Fatalf("%s: mark left", id)
		}
	}
	for _, e := range final.Evidence {
		// de-DE: the dead ingestion's lease taken over once expired.
		if want := map[string]int{"job-de-DE": 2}[e.JobID]; e.Status != release.StateSucceeded || (want != 0 && e.Attempts != want) {
			t.Fatalf("evidence %+v", e)
		}
	}
}
