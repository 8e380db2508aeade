package release_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

// input ingests locale's result and returns what the step needs.
func (b *bundle) input(t *testing.T, p releasetest.PlanSpec, locale string) release.Input {
	t.Helper()
	in, err := b.c.IngestInput(b.ctx, contract.DetailJobCompleted, b.fx.Detail(p.ResultPayload(locale, releasetest.ResultOptions{})))
	if err != nil {
		t.Fatalf("ingest result %s: %v", locale, err)
	}
	return in
}

// runInput runs a job input's step as the coordinator function does
// (handlerStep: its approval settled, a completing step's completing
// read).
func (b *bundle) runInput(t *testing.T, in release.Input) release.Outcome {
	t.Helper()
	return b.handlerStep(t, in, map[string]int{})
}

// tallyHook runs before every tally write (a race injected in between the
// step's read of the tally and its write).
type tallyHook struct {
	*releasetest.MemStore
	before       func(*release.TallyRecord)
	loadStateErr error
}

func (s *tallyHook) Put(ctx context.Context, rec release.Record, prev int64) error {
	if t, ok := rec.(*release.TallyRecord); ok && s.before != nil {
		f := s.before
		s.before = nil
		f(t)
	}
	return s.MemStore.Put(ctx, rec, prev)
}

func (s *tallyHook) LoadState(ctx context.Context, eventID string) (release.Snapshot, error) {
	if err := s.loadStateErr; err != nil {
		s.loadStateErr = nil
		return release.Snapshot{}, err
	}
	return s.MemStore.LoadState(ctx, eventID)
}

var locales12 = []string{"ar-EG", "cs-CZ", "da-DK", "de-DE", "es-ES", "fi-FI", "fr-FR", "it-IT", "ja-JP", "ko-KR", "nl-NL", "pl-PL"}

// Issue 29: the job input of a tallied release approves its own locale
// reading that locale's records, every job record and the tally; the
// release's whole state is read twice (the tally's seeding at the first
// approval, the step whose tally write completes it), not once or more
// per locale. Before, every step read the whole state (12 locales: 12 or
// more state reads, each holding every locale's approval).
func TestNamedStepsReadTheirLocaleOnly(t *testing.T) {
	b := setup(t)
	rc := &readCounter{MemStore: b.store}
	b.reconfigure(t, func(d *release.Dependencies, _ *release.Config) { d.Store = rc })
	plan := releasetest.NewPlan("evt-named", locales12...)
	b.ingestPlan(t, plan)
	rc.reset()
	states := 0
	for i, l := range locales12 {
		in := b.input(t, plan, l)
		if in.JobID() != "job-"+l {
			t.Fatalf("%s: input names %q", l, in.JobID())
		}
		rc.reset()
		last := i == len(locales12)-1
		// The run's own reads, checked before the driver publishes and
		// settles its approval (Ports.Observe).
		observe := func(o release.Outcome, err error) {
			if err != nil {
				t.Fatalf("%s: %v", l, err)
			}
			states += rc.state
			switch {
			case last && (o.Status != release.OutcomeApproved || !o.Completes || !o.Tallied):
				t.Fatalf("%s: %+v", l, o)
			case !last && (o.Status != release.OutcomeApproved || o.TargetLocale != l || !o.Quiet || !o.Tallied):
				t.Fatalf("%s: %+v", l, o)
			}
			if rc.full != 0 || strings.Join(rc.prefixes[:1], " ") != "job#" {
				t.Fatalf("%s: %d full reads, prefixes %v", l, rc.full, rc.prefixes)
			}
			// The locale's source was read at ingest (the evidence request
			// is created there, before the job record).
			if strings.Join(rc.keys, " ") != "tally" {
				t.Fatalf("%s: keys %v", l, rc.keys)
			}
			// Published and settled next (the tally not read again: the
			// step tallied it); the last one's completing read prepares
			// the delivery.
			rc.reset()
		}
		if o := b.handlerStepObserved(t, in, map[string]int{}, observe); last && o.Status != release.OutcomeDeliveryReady {
			t.Fatalf("%s: completing read %+v", l, o)
		}
		states += rc.state
		if rc.full != 0 || (!last && rc.state != 0) {
			t.Fatalf("%s: settling read %d full, %d state", l, rc.full, rc.state)
		}
	}
	if states != 2 {
		t.Fatalf("%d state reads over the release, want 2 (seeding, completing)", states)
	}
	s := b.snap(t, "evt-named")
	if len(s.Approvals) != 12 || s.Delivery == nil || s.Tally == nil || len(s.Tally.Approved) != 12 {
		t.Fatalf("approvals %d, delivery %v, tally %+v", len(s.Approvals), s.Delivery, s.Tally)
	}
	for _, a := range s.Approvals {
		if a.AwaitingDelivery {
			t.Fatalf("approval left marked: %+v", a)
		}
	}
	if owed := owedOf(t, b, "evt-named"); len(owed) != 0 {
		t.Fatalf("owed left: %v", owed)
	}
	if o, err := b.c.Deliver(b.ctx, "evt-named"); err != nil || o.Status != release.OutcomeDelivered || b.cms.Sends != 1 {
		t.Fatalf("deliver: %+v %v", o, err)
	}
}

// Two named steps race on the tally: each read it before the other wrote.
// The loser re-reads and adds its job; exactly one of them prepares the
// delivery (through its completing read, once both approvals are
// settled) and nothing is left waiting.
func TestNamedStepsRacingOnTheTally(t *testing.T) {
	b := setup(t)
	h := &tallyHook{MemStore: b.store}
	b.reconfigure(t, func(d *release.Dependencies, _ *release.Config) { d.Store = h })
	plan := releasetest.NewPlan("evt-race", "de-DE", "fr-FR")
	b.ingestPlan(t, plan)
	de, fr := b.input(t, plan, "de-DE"), b.input(t, plan, "fr-FR")
	var frOut release.Outcome
	h.before = func(*release.TallyRecord) {
		// de-DE's approval is stored, its tally write not yet made.
		frOut = b.runInput(t, fr)
	}
	deOut := b.runInput(t, de)
	// fr-FR seeded the tally with de-DE's stored approval and completed
	// it; its completing read held the delivery for de-DE's approval, owed
	// by a step still running. de-DE's tally write then lost the race,
	// re-read the complete tally and ran the completing read itself.
	if frOut.Status != release.OutcomeWaiting || frOut.WakeAt.IsZero() {
		t.Fatalf("fr-FR: %+v", frOut)
	}
	if deOut.Status != release.OutcomeDeliveryReady {
		t.Fatalf("de-DE: %+v", deOut)
	}
	s := b.snap(t, "evt-race")
	if s.Delivery == nil || len(s.Tally.Approved) != 2 || len(s.Approvals) != 2 {
		t.Fatalf("delivery %v tally %+v", s.Delivery, s.Tally)
	}
}

// A named step that dies after its approval is stored and before its
// tally write (here: every tally write fails) leaves the approval's event
// owed; settling it (the handler after the publish, the sweep, a
// redelivered message) adds it. When that completes the tally, the
// clearing write marks the approval AwaitingDelivery, which wakes the
// release: the sweep's run prepares the delivery. No release is stranded.
func TestUntalliedApprovalIsTalliedWhenSettled(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-crash", "de-DE", "fr-FR")
	b.ingestPlan(t, plan)
	b.runInput(t, b.input(t, plan, "de-DE"))
	b.store.FailPuts(func(rec release.Record) error {
		if _, ok := rec.(*release.TallyRecord); ok {
			return errors.New("the process died")
		}
		return nil
	})
	fr, err := b.c.RunInput(b.ctx, b.input(t, plan, "fr-FR"))
	if err == nil || fr.ApprovalID == "" || fr.Tallied || fr.Quiet {
		t.Fatalf("fr-FR: %+v %v", fr, err)
	}
	b.store.FailPuts(nil)
	s := b.snap(t, "evt-crash")
	if len(s.Tally.Approved) != 1 || s.Delivery != nil {
		t.Fatalf("tally %+v delivery %v", s.Tally, s.Delivery)
	}
	// The handler publishes the approval the failed step stored and
	// settles it with the tally.
	if err := b.c.SettleApproval(b.ctx, "evt-crash", fr.JobID, fr.ApprovalID, !fr.Tallied); err != nil {
		t.Fatal(err)
	}
	s = b.snap(t, "evt-crash")
	a := s.Approvals["job-fr-FR"]
	if len(s.Tally.Approved) != 2 || len(owedOf(t, b, "evt-crash")) != 0 || !a.AwaitingDelivery {
		t.Fatalf("tally %+v approval %+v", s.Tally, a)
	}
	page, err := b.store.Due(b.ctx, core.Millis(b.clock.Now()), "", 10)
	if err != nil || len(page.Items) != 1 || page.Items[0].EventID != "evt-crash" {
		t.Fatalf("due: %+v %v", page, err)
	}
	if o := b.run(t, "evt-crash"); o.Status != release.OutcomeDeliveryReady {
		t.Fatalf("sweep's run: %+v", o)
	}
	if a := b.snap(t, "evt-crash").Approvals["job-fr-FR"]; a.AwaitingDelivery {
		t.Fatal("wake left")
	}
}

// The step whose tally write completes the tally stores its approval
// marked AwaitingDelivery; when the completing read after its settling
// fails (here: its state read), the release still wakes by that mark and
// the sweep's run prepares the delivery.
func TestCompletingStepThatFailsLeavesAWake(t *testing.T) {
	b := setup(t)
	h := &tallyHook{MemStore: b.store}
	b.reconfigure(t, func(d *release.Dependencies, _ *release.Config) { d.Store = h })
	plan := releasetest.NewPlan("evt-wake", "de-DE", "fr-FR")
	b.ingestPlan(t, plan)
	b.runInput(t, b.input(t, plan, "de-DE"))
	fr, err := b.c.RunInput(b.ctx, b.input(t, plan, "fr-FR"))
	if err != nil || !fr.Completes {
		t.Fatalf("fr-FR: %+v %v", fr, err)
	}
	b.settle(t, fr)
	h.loadStateErr = errors.New("read failed")
	if _, err := b.c.CompleteRelease(b.ctx, "evt-wake"); err == nil {
		t.Fatal("completing read did not fail")
	}
	h.loadStateErr = nil
	if a := b.snap(t, "evt-wake").Approvals["job-fr-FR"]; !a.AwaitingDelivery {
		t.Fatalf("approval %+v", a)
	}
	page, err := b.store.Due(b.ctx, core.Millis(b.clock.Now()), "", 10)
	if err != nil || len(page.Items) != 1 || page.Items[0].EventID != "evt-wake" {
		t.Fatalf("due: %+v %v", page, err)
	}
	if o := b.run(t, "evt-wake"); o.Status != release.OutcomeDeliveryReady {
		t.Fatalf("run: %+v", o)
	}
}

// A release whose first approvals were stored with no tally (their steps
// died before writing it, or a full walk's tally write failed) is seeded
// from the approvals stored when its first tally is written: every locale
// is approved once and the release is delivered once.
func TestApprovalsStoredWithoutATallySeedIt(t *testing.T) {
	b := setup(t)
	// A tallied plan whose first approvals were stored with no tally
	// (their steps died before writing it, or a full walk's tally write
	// failed): the next named step seeds the tally from what is stored.
	plan := releasetest.NewPlan("evt-seed", "de-DE", "fr-FR", "it-IT")
	b.ingestPlan(t, plan)
	b.store.FailPuts(func(rec release.Record) error {
		if _, ok := rec.(*release.TallyRecord); ok {
			return errors.New("no tally")
		}
		return nil
	})
	for _, l := range []string{"de-DE", "fr-FR"} {
		if o, err := b.c.RunInput(b.ctx, b.input(t, plan, l)); o.ApprovalID == "" || err == nil {
			t.Fatalf("%s: %+v %v", l, o, err)
		}
	}
	b.store.FailPuts(nil)
	// Their events published and settled (no tally yet: nothing to add
	// them to).
	for _, l := range []string{"de-DE", "fr-FR"} {
		a := b.snap(t, "evt-seed").Approvals["job-"+l]
		if err := b.c.SettleApproval(b.ctx, "evt-seed", a.JobID, a.ApprovalID, true); err != nil {
			t.Fatal(err)
		}
	}
	b.clock.Advance(time.Second)
	if o := b.runInput(t, b.input(t, plan, "it-IT")); o.Status != release.OutcomeDeliveryReady {
		t.Fatalf("it-IT (seeds de-DE and fr-FR): %+v", o)
	}
	s := b.snap(t, "evt-seed")
	if len(s.Tally.Approved) != 3 || len(s.Approvals) != 3 {
		t.Fatalf("tally %+v", s.Tally)
	}
}

// A tampered tally (a job id not in the plan) is never trusted: the named
// step falls back to the full walk, which does not use it.
func TestTamperedTallyFallsBackToTheFullWalk(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-tamper", "de-DE", "fr-FR")
	b.ingestPlan(t, plan)
	s := b.snap(t, "evt-tamper")
	bad := release.TallyRecord{EventID: "evt-tamper", PlanID: s.Plan.PlanID, Jobs: 2, Approved: []string{"job-de-DE", "job-xx-XX"}, Version: 1}
	if err := b.store.Put(b.ctx, &bad, 0); err != nil {
		t.Fatal(err)
	}
	if o := b.runInput(t, b.input(t, plan, "fr-FR")); o.Status != release.OutcomeApproved || o.Quiet {
		t.Fatalf("fr-FR: %+v", o)
	}
	// The full walk's approval: the function runs the release again,
	// which prepares the delivery.
	if o := b.runInput(t, b.input(t, plan, "de-DE")); o.Status != release.OutcomeApproved || o.Quiet {
		t.Fatalf("de-DE: %+v", o)
	}
	if o := b.run(t, "evt-tamper"); o.Status != release.OutcomeDeliveryReady {
		t.Fatalf("run after de-DE: %+v", o)
	}
}

// The named step reads neither the job's approval nor its evidence record
// (a fresh completion has neither); both are written conditional on their
// absence, so one that exists after all (here: an approval stored by
// another step) is a lost race, retryable, and is never overwritten.
func TestNamedStepNeverOverwritesAnApproval(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-exists", "de-DE", "fr-FR")
	b.ingestPlan(t, plan)
	in := b.input(t, plan, "de-DE")
	other := releasetest.SampleCompactApproval("evt-exists", "job-de-DE", core.Millis(b.clock.Now()))
	if err := b.store.Put(b.ctx, other, 0); err != nil {
		t.Fatal(err)
	}
	o, err := b.c.RunInput(b.ctx, in)
	if !core.HasCode(err, "release.approval.conflict") || !core.IsRetryable(err) || o.ApprovalID != "" {
		t.Fatalf("%+v %v", o, err)
	}
	if a := b.snap(t, "evt-exists").Approvals["job-de-DE"]; a.ApprovalID != other.ApprovalID || a.Version != 1 {
		t.Fatalf("approval overwritten: %+v", a)
	}
}

// The tally expires with the release's other records (record retention
// from its last write): without it, every tallied release left one item
// behind for good.
func TestTallyHasTheRecordRetention(t *testing.T) {
	tally := &release.TallyRecord{EventID: "evt-1", PlanID: "plan-1", Jobs: 1, Approved: []string{"job-1"}, UpdatedMS: 1_000_000, Version: 1}
	at, ok := release.ExpiresAt(tally, time.Hour)
	if !ok || at != (1_000_000+time.Hour.Milliseconds())/1000 {
		t.Fatalf("expires at %d, %v", at, ok)
	}
}

// Found by the simulation (seed 255, in the token layout): a named step
// stored its approval and failed to finish its evidence lease; the last
// locale's step then prepared the delivery, after which no run walks the
// jobs again, so the first locale's evidence stayed leased for good
// (health: expired leases). Now the evidence lease is what keeps the
// approval's event owed: while its settling fails the delivery is held,
// and once the lease has run out a run reports it owed, the handler
// publishes and settles it, and only then is the delivery prepared; no
// evidence is left leased.
func TestCompletingStepFinishesEveryApprovedEvidence(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-leased", "de-DE", "fr-FR")
	b.ingestPlan(t, plan)
	de, err := b.c.RunInput(b.ctx, b.input(t, plan, "de-DE"))
	if err != nil || de.ApprovalID == "" {
		t.Fatalf("de-DE: %+v %v", de, err)
	}
	b.store.FailPuts(func(rec release.Record) error {
		if e, ok := rec.(*release.EvidenceRecord); ok && e.Status == release.StateSucceeded {
			return errors.New("the finishing write failed")
		}
		return nil
	})
	if err := b.c.SettleApproval(b.ctx, "evt-leased", de.JobID, de.ApprovalID, !de.Tallied); err == nil {
		t.Fatal("settling did not fail")
	}
	b.store.FailPuts(nil)
	if e := b.onlyEvidence(t, "evt-leased"); e.Status != release.StateLeased {
		t.Fatalf("evidence %+v", e)
	}
	if o := b.runInput(t, b.input(t, plan, "fr-FR")); o.Status == release.OutcomeDeliveryReady || b.snap(t, "evt-leased").Delivery != nil {
		t.Fatalf("fr-FR prepared the delivery while de-DE is owed: %+v", o)
	}
	b.clock.Advance(release.DefaultEvidenceLease + time.Second)
	// The run reports de-DE owed (settled by the handler) and holds the
	// delivery; the handler runs the release again, which prepares it.
	if o := b.run(t, "evt-leased"); !o.Held || len(o.Owed) != 1 || o.Owed[0].ApprovalID != de.ApprovalID {
		t.Fatalf("run after the lease: %+v", o)
	}
	if o := b.run(t, "evt-leased"); o.Status != release.OutcomeDeliveryReady {
		t.Fatalf("run after the settling: %+v", o)
	}
	for _, e := range b.snap(t, "evt-leased").Evidence {
		if e.Status != release.StateSucceeded {
			t.Fatalf("evidence left %s: %+v", e.Status, e)
		}
	}
}
