package handler_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

// Issue 29, docs/design.md "Owed events of compact approvals": the step
// whose tally write completes a compact release's tally publishes and
// settles its approval, then runs the completing read; an approval owed
// by a step that died (its lease expired) is published and settled there,
// and the delivery is prepared after every release.approved.
func TestCompactCompletingStepPublishesOwedApprovalsFirst(t *testing.T) {
	b := setup(t)
	fx := releasetest.NewFixture()
	plan := releasetest.NewPlan("evt-cmp-h", "de-DE", "fr-FR")
	b.invoke(t, batch(envelopeMessage("m-plan", contract.DetailPlanAccepted, fx.Detail(plan.PlanPayload()))))
	b.queue.take(t)
	// de-DE's step stores its approval and tally, then its process dies:
	// nothing published, nothing settled.
	in, err := b.c.IngestInput(context.Background(), contract.DetailJobCompleted, fx.Detail(plan.ResultPayload("de-DE", releasetest.ResultOptions{})))
	if err != nil {
		t.Fatal(err)
	}
	de, err := b.c.RunInput(context.Background(), in)
	if err != nil || de.ApprovalID == "" {
		t.Fatalf("de-DE: %+v %v", de, err)
	}
	*b.now = b.now.Add(b.c.Config().EvidenceLease + time.Second)
	if resp := b.invoke(t, batch(envelopeMessage("m-fr", contract.DetailJobCompleted, fx.Detail(plan.ResultPayload("fr-FR", releasetest.ResultOptions{}))))); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v\n%s", failures(resp), b.logs.String())
	}
	var order []string
	approved := map[string]int{}
	for _, p := range b.bus.out {
		order = append(order, p.DetailType)
		if p.DetailType == contract.DetailReleaseApproved {
			var d contract.ReleaseApproved
			if err := json.Unmarshal(p.Detail, &d); err != nil {
				t.Fatal(err)
			}
			approved[d.TargetLocale]++
		}
	}
	want := []string{contract.DetailReleaseApproved, contract.DetailReleaseApproved, contract.DetailDeliveryReady}
	if len(order) != len(want) || order[0] != want[0] || order[1] != want[1] || order[2] != want[2] || approved["de-DE"] != 1 || approved["fr-FR"] != 1 {
		t.Fatalf("events %v (approved %v), want both approvals once, then delivery.ready", order, approved)
	}
	s, err := b.store.Load(context.Background(), "evt-cmp-h")
	if err != nil {
		t.Fatal(err)
	}
	for id, a := range s.Approvals {
		if release.ApprovalOwed(a, s.Evidence[a.RequestID]) {
			t.Errorf("approval of %s still owed (evidence %s)", id, s.Evidence[a.RequestID].Status)
		}
	}
	if s.Delivery == nil {
		t.Fatal("no delivery")
	}
}

// A step that blocks a compact release publishes and settles the owed
// approvals of the stored state: the blocked release's event is not lost
// (docs/design.md "Owed events of compact approvals", ended and blocked
// releases).
func TestCompactBlockedReleasePublishesItsOwedApproval(t *testing.T) {
	b := setupCoordinator(t, func(_ *bundle, _ *release.Dependencies, cfg *release.Config) { cfg.EvidenceMaxAttempts = 1 })
	fx := releasetest.NewFixture()
	plan := releasetest.NewPlan("evt-cmp-b", "de-DE", "fr-FR")
	b.invoke(t, batch(envelopeMessage("m-plan", contract.DetailPlanAccepted, fx.Detail(plan.PlanPayload()))))
	// de-DE's step stores its approval, then its process dies.
	in, err := b.c.IngestInput(context.Background(), contract.DetailJobCompleted, fx.Detail(plan.ResultPayload("de-DE", releasetest.ResultOptions{})))
	if err != nil {
		t.Fatal(err)
	}
	de, err := b.c.RunInput(context.Background(), in)
	if err != nil || de.ApprovalID == "" {
		t.Fatalf("de-DE: %+v %v", de, err)
	}
	// fr-FR's only evidence attempt fails: the release blocks.
	b.resp.FailFirst = b.resp.Calls() + 1
	b.invoke(t, batch(envelopeMessage("m-fr", contract.DetailJobCompleted, fx.Detail(plan.ResultPayload("fr-FR", releasetest.ResultOptions{})))))
	s, err := b.store.Load(context.Background(), "evt-cmp-b")
	if err != nil {
		t.Fatal(err)
	}
	if s.Blocked == nil {
		t.Fatalf("not blocked\n%s", b.logs.String())
	}
	var d contract.ReleaseApproved
	if n := b.bus.details(t, contract.DetailReleaseApproved, &d); n != 1 || d.ApprovalID != de.ApprovalID {
		t.Fatalf("%d release.approved (%+v), want de-DE's once", n, d)
	}
	a := s.Approvals["job-de-DE"]
	if release.ApprovalOwed(a, s.Evidence[a.RequestID]) {
		t.Fatal("de-DE still owed after the blocking step")
	}
}
