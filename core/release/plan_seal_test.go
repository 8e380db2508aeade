package release_test

import (
	"context"
	"testing"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

// TestChangedPlanRecordIsRefused: a plan record changed after ingest (a
// job dropped) must not pass readiness with fewer locales; every run
// re-checks the plan against what the signed event said.
func TestChangedPlanRecordIsRefused(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-drop", "de-DE", "fr-FR")
	b.ingestPlan(t, plan)
	b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{})
	// fr-FR is still being translated; drop it from the stored plan.
	cur := b.snap(t, "evt-drop").Plan
	changed := *cur
	changed.Jobs = []release.PlanJob{cur.Jobs[0]}
	changed.Version = cur.Version + 1
	if err := b.store.Put(b.ctx, &changed, cur.Version); err != nil {
		t.Fatal(err)
	}
	_, err := b.c.RunNextRelease(b.ctx, "evt-drop")
	wantCode(t, err, release.CodePlanSealInvalid)
	if core.IsRetryable(err) {
		t.Fatal("a changed plan must be refused for good")
	}
	if s := b.snap(t, "evt-drop"); s.Delivery != nil || len(s.Approvals) != 0 || b.resp.Calls() != 0 {
		t.Fatalf("changed plan was worked on: delivery %v, %d approvals, %d evidence calls", s.Delivery, len(s.Approvals), b.resp.Calls())
	}
	_, err = b.c.Deliver(b.ctx, "evt-drop")
	wantCode(t, err, release.CodePlanSealInvalid)
}

// TestPlanSealCoversEveryField: any change of a sealed field is refused,
// and the record Ingest wrote passes.
func TestPlanSealCoversEveryField(t *testing.T) {
	b := setup(t)
	b.ingestPlan(t, releasetest.NewPlan("evt-seal", "de-DE", "fr-FR"))
	orig := b.snap(t, "evt-seal").Plan
	if err := b.c.CheckPlan(context.Background(), orig); err != nil {
		t.Fatalf("ingested plan refused: %v", err)
	}
	for name, change := range map[string]func(p *release.PlanRecord){
		"site":    func(p *release.PlanRecord) { p.Event.SiteID = "site-other" },
		"plan id": func(p *release.PlanRecord) { p.PlanID = "plan-other" },
		"locale": func(p *release.PlanRecord) {
			p.Jobs = append([]release.PlanJob(nil), p.Jobs...)
			p.Jobs[1].TargetLocale = "it-IT"
		},
		"source": func(p *release.PlanRecord) {
			p.Jobs = append([]release.PlanJob(nil), p.Jobs...)
			p.Jobs[0].SourceSHA256 = p.Jobs[1].SourceSHA256
		},
		"payload":   func(p *release.PlanRecord) { p.PayloadSHA256 = p.Jobs[0].SourceSHA256 },
		"received":  func(p *release.PlanRecord) { p.ReceivedMS++ },
		"no seal":   func(p *release.PlanRecord) { p.Seal = "" },
		"bad hex":   func(p *release.PlanRecord) { p.Seal = "zz" },
		"jobs gone": func(p *release.PlanRecord) { p.Jobs = p.Jobs[:1] },
	} {
		p := *orig
		change(&p)
		if err := b.c.CheckPlan(context.Background(), &p); !core.HasCode(err, release.CodePlanSealInvalid) {
			t.Errorf("%s: %v, want %s", name, err, release.CodePlanSealInvalid)
		}
	}
}
