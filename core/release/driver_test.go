package release_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

// The orderings release.Coordinator.Step owns (docs/design.md "Release
// steps"): an approval's event is published before its settle,
// delivery.ready only once every owed approval is published and settled,
// and a blocked release's owed approval events are still published.

// step runs one message of kind through the driver with the ports given.
func (b *bundle) step(t *testing.T, kind, eventID string, p release.Ports) (release.StepResult, error) {
	t.Helper()
	if p.Log == nil {
		p.Log = b.log
	}
	return b.c.Step(b.ctx, release.StepRequest{Kind: kind, EventID: eventID}, p)
}

type texts struct{ calls []string }

func (x *texts) ExpireTexts(_ context.Context, eventID string, _ time.Time) error {
	x.calls = append(x.calls, eventID)
	return nil
}

// A step dies after storing fr-FR's approval (not published). The run
// after its lease publishes the owed approval while it is still owed (the
// settle follows the publish) and settles it; the run it schedules at
// once publishes delivery.ready after it, with nothing owed left; the
// delivery step publishes delivery.delivered and starts the texts'
// retention.
func TestStepOrdersPublishSettleAndDelivery(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-ord", "de-DE", "fr-FR")
	b.ingestPlan(t, plan)
	b.handlerStep(t, b.input(t, plan, "de-DE"), map[string]int{})
	fr, err := b.c.RunInput(b.ctx, b.input(t, plan, "fr-FR"))
	if err != nil || fr.ApprovalID == "" {
		t.Fatalf("fr-FR: %+v %v", fr, err)
	}
	b.clock.Advance(b.cfg.EvidenceLease + time.Second)
	pub := &releasetest.Published{Fail: func(e releasetest.PublishedEvent) error {
		owed := owedOf(t, b, "evt-ord")
		switch e.DetailType {
		case contract.DetailReleaseApproved:
			if owed[e.Approved.JobID] == "" {
				t.Errorf("%s published after its settle", e.Approved.JobID)
			}
		case contract.DetailDeliveryReady:
			if len(owed) != 0 {
				t.Errorf("delivery.ready published with %v owed", owed)
			}
		}
		return nil
	}}
	x := &texts{}
	p := release.Ports{Publisher: pub, Texts: x}
	res, err := b.step(t, contract.KindReleaseRun, "evt-ord", p)
	if err != nil || !res.Outcome.Held || res.Next.Kind != contract.KindReleaseRun || res.Next.At.After(b.clock.Now()) {
		t.Fatalf("run after the lease: %+v %v", res, err)
	}
	if owed := owedOf(t, b, "evt-ord"); len(owed) != 0 {
		t.Fatalf("owed after the step: %v", owed)
	}
	if res, err = b.step(t, res.Next.Kind, "evt-ord", p); err != nil || res.Next.Kind != contract.KindReleaseDeliver {
		t.Fatalf("run: %+v %v", res, err)
	}
	if res, err = b.step(t, res.Next.Kind, "evt-ord", p); err != nil || res.Outcome.Status != release.OutcomeDelivered || res.Next.Kind != "" {
		t.Fatalf("deliver: %+v %v", res, err)
	}
	var got []string
	for _, e := range pub.Events {
		got = append(got, e.DetailType+" "+e.Approved.JobID)
	}
	want := []string{contract.DetailReleaseApproved + " job-fr-FR", contract.DetailDeliveryReady + " ", contract.DetailDeliveryDelivered + " "}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("published %q, want %q", got, want)
	}
	if len(x.calls) != 1 {
		t.Fatalf("texts expired %d times, want once on delivered", len(x.calls))
	}
}

// A publish that fails settles nothing: the approval stays owed and the
// step's error is returned (the message is redelivered).
func TestStepFailedPublishSettlesNothing(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-pf", "de-DE", "fr-FR")
	b.ingestPlan(t, plan)
	in := b.input(t, plan, "de-DE")
	down := errors.New("bus down")
	pub := &releasetest.Published{Fail: func(releasetest.PublishedEvent) error { return down }}
	res, err := b.c.Step(b.ctx, release.StepRequest{Kind: contract.KindReleaseRun, EventID: "evt-pf", Input: &in}, release.Ports{Publisher: pub})
	if !errors.Is(err, down) || res.Next.Kind != "" {
		t.Fatalf("step: %+v %v, want the publish error", res, err)
	}
	if owedOf(t, b, "evt-pf")["job-de-DE"] == "" {
		t.Fatal("the approval was settled without its event published")
	}
}

// A release blocked for good with an owed approval (its step died before
// publishing): the blocking step still publishes and settles it, and the
// texts start their retention.
func TestStepBlockedReleasePublishesItsOwedApprovals(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-bo", "de-DE", "fr-FR")
	b.ingestPlan(t, plan)
	de, err := b.c.RunInput(b.ctx, b.input(t, plan, "de-DE"))
	if err != nil || de.ApprovalID == "" {
		t.Fatalf("de-DE: %+v %v", de, err)
	}
	b.reconfigure(t, func(d *release.Dependencies, _ *release.Config) {
		d.Evidence = refusingProvider{next: d.Evidence, jobID: "job-fr-FR"}
	})
	b.ingestResult(t, plan, "fr-FR", releasetest.ResultOptions{})
	b.clock.Advance(b.cfg.EvidenceLease + time.Second)
	pub := &releasetest.Published{}
	x := &texts{}
	res, err := b.step(t, contract.KindReleaseRun, "evt-bo", release.Ports{Publisher: pub, Texts: x})
	if err == nil || core.IsRetryable(err) || b.snap(t, "evt-bo").Blocked == nil {
		t.Fatalf("step: %+v %v, want the blocking error", res, err)
	}
	if n := pub.Approvals()[de.ApprovalID]; n != 1 {
		t.Fatalf("de-DE's approval published %d times", n)
	}
	if owed := owedOf(t, b, "evt-bo"); len(owed) != 0 {
		t.Fatalf("owed after the blocking step: %v", owed)
	}
	if len(x.calls) != 1 {
		t.Fatalf("texts expired %d times, want once on blocked", len(x.calls))
	}
}
