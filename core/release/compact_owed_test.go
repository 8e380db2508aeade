package release_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

// Issue 29, docs/design.md "Owed events of compact approvals": an
// approval carries no outbox marker; it is owed while its evidence record
// is not succeeded, and settling its published event finishes that
// record.

// owedOf reports, per job id, whether the stored approval is owed
// (release.ApprovalOwed) and how its evidence record stands.
func owedOf(t *testing.T, b *bundle, eventID string) map[string]release.State {
	t.Helper()
	s := b.snap(t, eventID)
	out := map[string]release.State{}
	for id, a := range s.Approvals {
		if release.ApprovalOwed(a, s.Evidence[a.RequestID]) {
			out[id] = s.Evidence[a.RequestID].Status
		}
	}
	return out
}

// approvalWrites counts the approval writes the store is asked for.
func approvalWrites(t *testing.T, b *bundle) *int {
	t.Helper()
	n := new(int)
	b.store.FailPuts(func(rec release.Record) error {
		if _, ok := rec.(*release.ApprovalRecord); ok {
			*n++
		}
		return nil
	})
	return n
}

// handlerStep runs a job input as the coordinator function does
// (release.Coordinator.Step): its approval and the owed ones it reports
// published (counted in announced) and settled, a completing step's
// completing read.
func (b *bundle) handlerStep(t *testing.T, in release.Input, announced map[string]int) release.Outcome {
	t.Helper()
	return b.handlerStepObserved(t, in, announced, nil)
}

// handlerStepObserved is handlerStep with observe called right after the
// run (Ports.Observe), before anything is published or settled.
func (b *bundle) handlerStepObserved(t *testing.T, in release.Input, announced map[string]int, observe func(release.Outcome, error)) release.Outcome {
	t.Helper()
	pub := &releasetest.Published{}
	p := release.Ports{Publisher: pub, Log: b.log}
	if observe != nil {
		p.Observe = func(_ context.Context, _ string, o release.Outcome, err error) { observe(o, err) }
	}
	res, err := b.c.Step(b.ctx, release.StepRequest{Kind: contract.KindReleaseRun, EventID: in.EventID, Input: &in}, p)
	if err == nil {
		err = res.StepErr
	}
	if err != nil {
		t.Fatalf("run input %s: %v", in.JobID(), err)
	}
	for id, n := range pub.Approvals() {
		announced[id] += n
	}
	return res.Outcome
}

// settleAnnounced settles o's approvals (settle), counting each in
// announced as published.
func (b *bundle) settleAnnounced(t *testing.T, o release.Outcome, announced map[string]int) {
	t.Helper()
	for _, a := range o.Approvals() {
		announced[a.Event.ApprovalID]++
	}
	b.settle(t, o)
}

// A compact release end to end (named steps): no approval is written with
// outbox_ms, every approval is announced once, every evidence record ends
// succeeded, and each approval is written once (the approval's second
// write, the marker's clear, is gone) except the one that completed the
// plan (its awaiting_delivery mark is cleared when the delivery is
// prepared, as in the token layout).
func TestCompactReleaseEndToEnd(t *testing.T) {
	b := setup(t)
	writes := approvalWrites(t, b)
	plan := releasetest.NewPlan("evt-cmp", "de-DE", "fr-FR", "ja-JP")
	b.ingestPlan(t, plan)
	announced := map[string]int{}
	var last release.Outcome
	for _, l := range []string{"fr-FR", "de-DE", "ja-JP"} {
		last = b.handlerStep(t, b.input(t, plan, l), announced)
	}
	if last.Status != release.OutcomeDeliveryReady || !last.Changed {
		t.Fatalf("last step: %+v", last)
	}
	s := b.snap(t, "evt-cmp")
	if s.Delivery == nil {
		t.Fatal("no delivery")
	}
	for id, a := range s.Approvals {
		if announced[a.ApprovalID] != 1 {
			t.Errorf("approval of %s announced %d times, want 1", id, announced[a.ApprovalID])
		}
		if a.AwaitingDelivery {
			t.Errorf("approval of %s still awaits the delivery", id)
		}
	}
	for id, e := range s.Evidence {
		if e.Status != release.StateSucceeded {
			t.Errorf("evidence %s is %s, want succeeded", id, e.Status)
		}
	}
	if len(s.Approvals) != 3 || *writes != 4 {
		t.Errorf("%d approvals, %d approval writes; want 3 and 4 (one each, plus the completing one's mark cleared)", len(s.Approvals), *writes)
	}
}

// The full walk of a compact release: its approving step does not finish
// the evidence lease and does not prepare the delivery; once the approval
// is settled the next run prepares it.
func TestCompactWalkPreparesTheDeliveryAfterTheSettle(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-cw", "de-DE")
	b.ingestPlan(t, plan)
	b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{})
	o, err := b.c.RunNextRelease(b.ctx, "evt-cw")
	if err != nil || o.Status != release.OutcomeApproved || o.Quiet {
		t.Fatalf("walk: %+v %v", o, err)
	}
	if owed := owedOf(t, b, "evt-cw"); owed["job-de-DE"] != release.StateLeased {
		t.Fatalf("owed %v, want de-DE owed with its lease", owed)
	}
	// Not settled yet: a run finds it owed with its lease running (its
	// step may still publish it): not reported, the delivery held until
	// the lease's expiry.
	held, err := b.c.RunNextRelease(b.ctx, "evt-cw")
	if err != nil || !held.Held || len(held.Owed) != 0 || held.WakeAt.IsZero() || b.snap(t, "evt-cw").Delivery != nil {
		t.Fatalf("run while owed: %+v %v", held, err)
	}
	b.settle(t, o)
	if next := b.run(t, "evt-cw"); next.Status != release.OutcomeDeliveryReady {
		t.Fatalf("after the settle: %+v", next)
	}
}

// Crash points of a named step (docs/design.md "Owed events of compact
// approvals"): the step dies after its approval write (the tally write
// fails: nothing after it runs), after its tally write, or after the
// publish (nothing settled). The lease's expiry wakes the release; the
// run after it reports the approval (Outcome.Owed), never marks its
// evidence succeeded, and holds the delivery until it is settled;
// settling adds it to the tally.
func TestCompactCrashPoints(t *testing.T) {
	for _, tc := range []struct {
		name        string
		failTally   bool
		wantTallied bool
	}{
		{name: "after the approval write", failTally: true},
		{name: "after the tally write or the publish", wantTallied: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t)
			plan := releasetest.NewPlan("evt-cc", "de-DE", "fr-FR")
			b.ingestPlan(t, plan)
			announced := map[string]int{}
			b.handlerStep(t, b.input(t, plan, "de-DE"), announced)
			if tc.failTally {
				failOnce[*release.TallyRecord](b)
			}
			fr, err := b.c.RunInput(b.ctx, b.input(t, plan, "fr-FR"))
			if fr.ApprovalID == "" || (err != nil) != tc.failTally {
				t.Fatalf("fr-FR: %+v %v", fr, err)
			}
			// The process dies here: the approval is neither published
			// nor settled.
			s := b.snap(t, "evt-cc")
			_, tallied := slices.BinarySearch(s.Tally.Approved, "job-fr-FR")
			if tallied != tc.wantTallied {
				t.Fatalf("tally %v, approval %+v", s.Tally.Approved, s.Approvals["job-fr-FR"])
			}
			lease := s.Evidence[s.Approvals["job-fr-FR"].RequestID]
			if owedOf(t, b, "evt-cc")["job-fr-FR"] != release.StateLeased {
				t.Fatal("the stored approval is not owed")
			}
			// Its evidence record's wake entry wakes the release once the
			// lease expired.
			if at, ok := indexWake(t, b, "evt-cc"); !ok || at.After(time.UnixMilli(lease.LeaseExpiresMS)) {
				t.Fatalf("wake %v %v, want by the lease's expiry", at, ok)
			}
			b.clock.Advance(b.cfg.EvidenceLease + time.Second)
			o, err := b.c.RunNextRelease(b.ctx, "evt-cc")
			if err != nil || !o.Held || len(o.Owed) != 1 || o.Owed[0].ApprovalID != fr.ApprovalID {
				t.Fatalf("run after the lease: %+v %v", o, err)
			}
			if owedOf(t, b, "evt-cc")["job-fr-FR"] == "" || b.snap(t, "evt-cc").Delivery != nil {
				t.Fatal("the walk finished an owed approval's evidence or prepared the delivery")
			}
			b.settleAnnounced(t, o, announced)
			s = b.snap(t, "evt-cc")
			if len(owedOf(t, b, "evt-cc")) != 0 || len(s.Tally.Approved) != 2 {
				t.Fatalf("after the settle: owed %v, tally %v", owedOf(t, b, "evt-cc"), s.Tally.Approved)
			}
			if next := b.run(t, "evt-cc"); next.Status != release.OutcomeDeliveryReady {
				t.Fatalf("after the settle: %+v", next)
			}
			if announced[fr.ApprovalID] != 1 {
				t.Fatalf("fr-FR announced %d times", announced[fr.ApprovalID])
			}
		})
	}
}

// The settle's evidence write fails (death between the settle's writes):
// the approval stays owed, its tally addition stays; the next settle
// finishes it.
func TestCompactSettleBetweenItsWrites(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-cs", "de-DE", "fr-FR")
	b.ingestPlan(t, plan)
	failOnce[*release.TallyRecord](b)
	de, err := b.c.RunInput(b.ctx, b.input(t, plan, "de-DE"))
	if de.ApprovalID == "" || err == nil {
		t.Fatalf("de-DE: %+v %v", de, err)
	}
	// The seeding tally write failed: seed one through fr-FR's step.
	fr := b.runInput(t, b.input(t, plan, "fr-FR"))
	b.settle(t, fr)
	failOnce[*release.EvidenceRecord](b)
	if err := b.c.SettleApproval(b.ctx, "evt-cs", "job-de-DE", de.ApprovalID, true); err == nil {
		t.Fatal("settle with its evidence write refused: no error")
	}
	if owedOf(t, b, "evt-cs")["job-de-DE"] == "" {
		t.Fatal("not owed after a failed settle")
	}
	if err := b.c.SettleApproval(b.ctx, "evt-cs", "job-de-DE", de.ApprovalID, true); err != nil {
		t.Fatal(err)
	}
	if len(owedOf(t, b, "evt-cs")) != 0 {
		t.Fatal("still owed")
	}
	// A settle of an approval no longer owed writes nothing.
	_, before := b.store.Counts()
	if err := b.c.SettleApproval(b.ctx, "evt-cs", "job-de-DE", de.ApprovalID, true); err != nil {
		t.Fatal(err)
	}
	if _, after := b.store.Counts(); after != before {
		t.Fatalf("%d writes settling a settled approval", after-before)
	}
}

// Blocking a compact release does not park the evidence record of an owed
// approval: it keeps waking the release, whose runs report it until it
// is settled.
func TestCompactOwedEvidenceIsNotParkedByBlock(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-cb", "de-DE", "fr-FR")
	b.ingestPlan(t, plan)
	de, err := b.c.RunInput(b.ctx, b.input(t, plan, "de-DE"))
	if err != nil || de.ApprovalID == "" {
		t.Fatalf("de-DE: %+v %v", de, err)
	}
	// fr-FR's evidence is refused for good: the release blocks.
	b.reconfigure(t, func(d *release.Dependencies, _ *release.Config) {
		d.Evidence = refusingProvider{next: d.Evidence, jobID: "job-fr-FR"}
	})
	b.ingestResult(t, plan, "fr-FR", releasetest.ResultOptions{})
	b.clock.Advance(b.cfg.EvidenceLease + time.Second)
	o, err := b.c.RunNextRelease(b.ctx, "evt-cb")
	if err == nil {
		t.Fatalf("run: %+v, want a blocking error", o)
	}
	s := b.snap(t, "evt-cb")
	if s.Blocked == nil {
		t.Fatalf("not blocked: %v", err)
	}
	ev := s.Evidence[s.Approvals["job-de-DE"].RequestID]
	if ev.Parked || owedOf(t, b, "evt-cb")["job-de-DE"] == "" {
		t.Fatalf("owed approval's evidence parked %v", ev.Parked)
	}
	if _, ok := indexWake(t, b, "evt-cb"); !ok {
		t.Fatal("the blocked release with an owed approval does not wake")
	}
	if len(o.Owed) != 1 || o.Owed[0].ApprovalID != de.ApprovalID {
		t.Fatalf("the blocking run reports %+v, want de-DE's approval", o.Owed)
	}
	b.settle(t, o)
	if _, ok := indexWake(t, b, "evt-cb"); ok {
		t.Fatal("still wakes after the settle")
	}
}

// An ended release (an acknowledged failed job) with an owed compact
// approval: the run that its evidence lease's wake schedules reports the
// approval (its event is still published), and once it is settled the
// release no longer wakes.
func TestCompactEndedReleaseReportsItsOwedApproval(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-ce", "de-DE", "fr-FR")
	b.ingestPlan(t, plan)
	de, err := b.c.RunInput(b.ctx, b.input(t, plan, "de-DE"))
	if err != nil || de.ApprovalID == "" {
		t.Fatalf("de-DE: %+v %v", de, err)
	}
	if _, _, err := b.c.Ingest(b.ctx, contract.DetailJobCompleted, b.fx.Detail(plan.FailedPayload("fr-FR"))); err != nil {
		t.Fatal(err)
	}
	if _, err := release.Acknowledge(b.ctx, b.store, "evt-ce", "job#job-fr-FR", opARN, "given up", core.Millis(b.clock.Now())); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(b.cfg.EvidenceLease + time.Second)
	if _, ok := indexWake(t, b, "evt-ce"); !ok {
		t.Fatal("the owed approval's evidence does not wake the ended release")
	}
	o, err := b.c.RunNextRelease(b.ctx, "evt-ce")
	if err != nil || len(o.Owed) != 1 || o.Owed[0].ApprovalID != de.ApprovalID || o.EventID != "evt-ce" {
		t.Fatalf("run of the ended release: %+v %v", o, err)
	}
	b.settle(t, o)
	if _, ok := indexWake(t, b, "evt-ce"); ok {
		t.Fatal("the ended release still wakes after the settle")
	}
}
