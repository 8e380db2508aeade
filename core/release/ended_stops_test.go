package release_test

import (
	"context"
	"slices"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

// Issue 39 findings 11–14: an ended or blocked release writes nothing new
// except what expires with it, and leaves the wake index; a settle that
// cannot write is an error.

// textPorts are the step driver's ports with the store's text expiry, as
// the coordinator function has them.
func (b *bundle) textPorts() release.Ports {
	return release.Ports{Publisher: b.published, Log: b.log, Texts: b.store}
}

// stepInput runs a job input's step through the step driver (the
// coordinator function's path) and returns its result and error.
func (b *bundle) stepInput(in release.Input) (release.StepResult, error) {
	return b.c.Step(b.ctx, release.StepRequest{Kind: contract.KindReleaseRun, EventID: in.EventID, Input: &in}, b.textPorts())
}

// sweepRun runs the release as the sweep's message does.
func (b *bundle) sweepRun(eventID string) (release.StepResult, error) {
	return b.c.Step(b.ctx, release.StepRequest{Kind: contract.KindReleaseRun, EventID: eventID}, b.textPorts())
}

// remaining lists the sort keys of the event's records that are still
// stored once DynamoDB's TTL deleted every expired one at now.
func remaining(t *testing.T, b *bundle, eventID string, now time.Time) []string {
	t.Helper()
	b.store.DeleteExpired(now, func(string, string) time.Duration { return 0 })
	s := b.snap(t, eventID)
	var out []string
	s.Each(func(r release.Record) {
		_, sk := r.Key()
		out = append(out, sk)
	})
	sort.Strings(out)
	return out
}

// countingProvider counts the evidence calls per job.
type countingProvider struct {
	next  release.EvidenceProvider
	calls map[string]*atomic.Int32
}

func (p countingProvider) Obtain(ctx context.Context, req *contract.EvidenceRequest) ([]byte, error) {
	if p.calls[req.JobID] == nil {
		p.calls[req.JobID] = &atomic.Int32{}
	}
	p.calls[req.JobID].Add(1)
	return p.next.Obtain(ctx, req)
}

// TestLateCompletionOfEndedRelease (finding 11): an operator acknowledged
// a failed job, which ended the release; a late completion of another
// locale stored its text with no expiry and left a wake entry (the
// evidence lease created at ingest), so every sweep ran the release again,
// for good, and 91 days later that text and record were still there. The
// late completion now leaves nothing that wakes, and everything of the
// ended release expires.
func TestLateCompletionOfEndedRelease(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-late", "de-DE", "fr-FR")
	b.ingestPlan(t, plan)
	if _, _, err := b.c.Ingest(b.ctx, contract.DetailJobCompleted, b.fx.Detail(plan.FailedPayload("fr-FR"))); err != nil {
		t.Fatal(err)
	}
	if _, err := release.Acknowledge(b.ctx, b.store, "evt-late", "job#job-fr-FR", opARN, "given up", core.Millis(b.clock.Now())); err != nil {
		t.Fatal(err)
	}
	// What `localeflow ack --release` does once the release ended.
	if err := b.store.ExpireTexts(b.ctx, "evt-late", b.clock.Now().Add(release.DefaultTextRetention)); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Hour)
	in := b.input(t, plan, "de-DE")
	res, err := b.stepInput(in)
	if err != nil || res.StepErr != nil {
		t.Fatalf("late completion's step: %+v, %v", res, err)
	}
	if s := b.snap(t, "evt-late"); len(s.Approvals) != 0 || len(s.Evidence) != 0 {
		t.Fatalf("the ended release approved a late locale or made it an evidence request: %+v, %+v", s.Approvals, s.Evidence)
	}
	if due := b.due(t); len(due) != 0 {
		t.Fatalf("the ended release still wakes after a late completion: %+v", due)
	}
	// The sweep would find nothing; a run anyway changes nothing.
	for i := 0; i < 3; i++ {
		if _, err := b.sweepRun("evt-late"); err != nil {
			t.Fatal(err)
		}
	}
	if left := remaining(t, b, "evt-late", b.clock.Now().Add(91*24*time.Hour)); len(left) != 0 {
		t.Fatalf("91 days after the end, still stored: %v", left)
	}
}

// blockedRelease blocks a two-locale release on fr-FR's refused evidence
// (de-DE never completed) as the coordinator function does: the blocked
// step's texts get their expiry.
func blockedRelease(t *testing.T, eventID string) (*bundle, releasetest.PlanSpec, countingProvider) {
	t.Helper()
	b := setup(t)
	calls := countingProvider{calls: map[string]*atomic.Int32{}}
	b.reconfigure(t, func(d *release.Dependencies, _ *release.Config) {
		calls.next = refusingProvider{next: d.Evidence, jobID: "job-fr-FR"}
		d.Evidence = calls
	})
	plan := releasetest.NewPlan(eventID, "de-DE", "fr-FR")
	b.ingestPlan(t, plan)
	res, err := b.stepInput(b.input(t, plan, "fr-FR"))
	if err == nil {
		err = res.StepErr
	}
	if err == nil || b.snap(t, eventID).Blocked == nil {
		t.Fatalf("fr-FR's step: %+v, %v; want the release blocked", res, err)
	}
	return b, plan, calls
}

// TestLateLocaleOfBlockedRelease (finding 12): a late locale of a blocked
// release (tally on) ran its named step: it called the evidence provider,
// approved the locale on the blocked release and ended quietly, and the
// locale's text was kept for good. The blocked release does nothing for
// it: no provider call, no approval, nothing wakes, its text expires.
func TestLateLocaleOfBlockedRelease(t *testing.T) {
	b, plan, calls := blockedRelease(t, "evt-blate")
	b.clock.Advance(time.Hour)
	// The step meets the release's failure again (final).
	if _, err := b.stepInput(b.input(t, plan, "de-DE")); err != nil && (core.IsRetryable(err) || !core.HasCode(err, release.CodeAttemptsExhausted)) {
		t.Fatalf("late locale's step: %v, want none or %s", err, release.CodeAttemptsExhausted)
	}
	if n := calls.calls["job-de-DE"]; n != nil {
		t.Fatalf("the blocked release called the evidence provider %d times for a late locale", n.Load())
	}
	s := b.snap(t, "evt-blate")
	if len(s.Approvals) != 0 {
		t.Fatalf("the blocked release approved a late locale: %+v", s.Approvals)
	}
	if due := b.due(t); len(due) != 0 {
		t.Fatalf("the blocked release wakes after a late locale: %+v", due)
	}
	attention := needsAttention(t, b, "evt-blate")
	sort.Strings(attention)
	left := remaining(t, b, "evt-blate", b.clock.Now().Add(91*24*time.Hour))
	// Only what needs attention until acknowledged stays: the blocked
	// record and fr-FR's failed evidence.
	if len(left) != 2 || !slices.Equal(left, attention) {
		t.Fatalf("91 days after the block, still stored: %v; needing attention: %v", left, attention)
	}
}

// tamperedOwed stores de-DE's approval of a two-locale release (its event
// owed: its evidence lease running) and then alters the evidence record
// with change, which the store accepts.
func tamperedOwed(t *testing.T, eventID string, change func(*release.EvidenceRecord)) (*bundle, releasetest.PlanSpec) {
	t.Helper()
	b := setup(t)
	plan := releasetest.NewPlan(eventID, "de-DE", "fr-FR")
	b.ingestPlan(t, plan)
	de, err := b.c.RunInput(b.ctx, b.input(t, plan, "de-DE"))
	if err != nil || de.ApprovalID == "" {
		t.Fatalf("de-DE: %+v %v", de, err)
	}
	s := b.snap(t, eventID)
	ev := *s.Evidence[s.Approvals["job-de-DE"].RequestID]
	change(&ev)
	ev.Version++
	if err := b.store.Put(b.ctx, &ev, ev.Version-1); err != nil {
		t.Fatal(err)
	}
	return b, plan
}

// TestOwedApprovalWhoseEvidenceFailsItsChecks (finding 13): an owed
// compact approval whose evidence record fails the record checks (here:
// it names another result) was settled by writing nothing and returning
// nil; the step counted it settled and ran the release again at once:
// over 40 queue rounds the release never stopped, was never blocked, and
// published release.approved 42 times. The settle is an error, and the
// release is blocked and stops.
func TestOwedApprovalWhoseEvidenceFailsItsChecks(t *testing.T) {
	b, _ := tamperedOwed(t, "evt-tev", func(ev *release.EvidenceRecord) { ev.ResultSHA256 = core.SHA256Hex([]byte("another result")) })
	b.clock.Advance(b.cfg.EvidenceLease + time.Second)
	pub := &releasetest.Published{}
	ports := release.Ports{Publisher: pub, Log: b.log, Texts: b.store}
	rounds := 0
	for ; rounds < 40; rounds++ {
		res, err := b.c.Step(b.ctx, release.StepRequest{Kind: contract.KindReleaseRun, EventID: "evt-tev"}, ports)
		if err == nil {
			err = res.StepErr
		}
		if err != nil && core.IsRetryable(err) {
			t.Fatalf("round %d: %v", rounds, err)
		}
		if err != nil || res.Next.Kind == "" {
			break
		}
		b.clock.Advance(time.Second)
	}
	if rounds >= 3 {
		t.Fatalf("the release ran %d rounds", rounds)
	}
	if n := len(pub.Approvals()); n > 1 {
		t.Fatalf("release.approved published for %d approvals", n)
	}
	for _, n := range pub.Approvals() {
		if n > 1 {
			t.Fatalf("release.approved published %d times", n)
		}
	}
	if b.snap(t, "evt-tev").Blocked == nil {
		t.Fatal("the release was not blocked")
	}
	if due := b.due(t); len(due) != 0 {
		t.Fatalf("the blocked release still wakes: %+v", due)
	}
}

// TestSettleThatCannotWriteIsAnError (finding 13): SettleApproval of an
// owed approval whose evidence record fails the record checks reports
// evidence.state.invalid (final) instead of success.
func TestSettleThatCannotWriteIsAnError(t *testing.T) {
	b, _ := tamperedOwed(t, "evt-tset", func(ev *release.EvidenceRecord) { ev.PlanID = "plan-other" })
	s := b.snap(t, "evt-tset")
	a := s.Approvals["job-de-DE"]
	err := b.c.SettleApproval(b.ctx, "evt-tset", "job-de-DE", a.ApprovalID, true)
	if !core.HasCode(err, release.CodeEvidenceStateInvalid) || core.IsRetryable(err) {
		t.Fatalf("SettleApproval = %v, want %s (final)", err, release.CodeEvidenceStateInvalid)
	}
}

// TestBlockedReleaseWithUnverifiableOwedApproval (finding 14): a blocked
// compact release with an owed approval that does not verify (its
// signature altered) kept that approval's evidence in the wake index:
// every sweep ran it again and pushed its texts' expiry a week later, so
// they never expired. The block parks it, and a text expiry set once is
// never moved later.
func TestBlockedReleaseWithUnverifiableOwedApproval(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-bun", "de-DE", "fr-FR")
	b.ingestPlan(t, plan)
	de, err := b.c.RunInput(b.ctx, b.input(t, plan, "de-DE"))
	if err != nil || de.ApprovalID == "" {
		t.Fatalf("de-DE: %+v %v", de, err)
	}
	s := b.snap(t, "evt-bun")
	a := *s.Approvals["job-de-DE"]
	a.Sig = append([]byte(nil), a.Sig...)
	a.Sig[0] ^= 0xff
	a.Token = release.BuildToken([]byte(a.Body), a.Sig)
	a.Version++
	if err := b.store.Put(b.ctx, &a, a.Version-1); err != nil {
		t.Fatal(err)
	}
	b.reconfigure(t, func(d *release.Dependencies, _ *release.Config) {
		d.Evidence = refusingProvider{next: d.Evidence, jobID: "job-fr-FR"}
	})
	b.clock.Advance(b.cfg.EvidenceLease + time.Second)
	if _, err := b.stepInput(b.input(t, plan, "fr-FR")); err == nil && b.snap(t, "evt-bun").Blocked == nil {
		t.Fatal("fr-FR's step did not block the release")
	}
	if b.snap(t, "evt-bun").Blocked == nil {
		t.Fatal("not blocked")
	}
	first := b.store.TextExpiry("evt-bun")
	if len(first) == 0 {
		t.Fatal("the blocked release's texts have no expiry")
	}
	for i := 0; i < 3; i++ {
		b.clock.Advance(5 * time.Minute)
		if due := b.due(t); len(due) != 0 {
			t.Fatalf("sweep %d: the blocked release still wakes: %+v", i, due)
		}
		// A stray run (a redrive, a late duplicate) all the same.
		if _, err := b.sweepRun("evt-bun"); err != nil && core.IsRetryable(err) {
			t.Fatal(err)
		}
	}
	for sk, at := range b.store.TextExpiry("evt-bun") {
		if at != first[sk] {
			t.Fatalf("%s's expiry moved from %d to %d", sk, first[sk], at)
		}
	}
}
