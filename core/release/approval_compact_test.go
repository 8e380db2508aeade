package release_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

// deliverAll runs the release to its delivery and returns the body the
// CMS received.
func deliverAll(t *testing.T, b *bundle, plan releasetest.PlanSpec, locales ...string) []byte {
	t.Helper()
	b.ingestPlan(t, plan)
	for _, l := range locales {
		b.ingestResult(t, plan, l, releasetest.ResultOptions{})
	}
	// One approval a second in both layouts (b.run would run a compact
	// release again at once, approving the next locale in the same
	// second); a compact release prepares its delivery on the run after
	// its last approval is settled, in the same second as the token
	// layout's last approving step.
	for range locales {
		b.clock.Advance(time.Second)
		o, err := b.c.RunNextRelease(b.ctx, plan.EventID)
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		b.settle(t, o)
	}
	if b.snap(t, plan.EventID).Delivery == nil {
		o, err := b.c.RunNextRelease(b.ctx, plan.EventID)
		if err != nil || o.Status != release.OutcomeDeliveryReady {
			t.Fatalf("run after the last approval: %+v %v", o, err)
		}
	}
	if d, err := b.c.Deliver(b.ctx, plan.EventID); err != nil || d.Status != release.OutcomeDelivered {
		t.Fatalf("deliver: %+v %v", d, err)
	}
	if len(b.cms.Deliveries) != 1 {
		t.Fatalf("%d deliveries", len(b.cms.Deliveries))
	}
	for _, body := range b.cms.Deliveries {
		return body
	}
	return nil
}

// openedApprovals opens the delivered bundle with the publication key and
// every approval token in it with the approval key, as a CMS does
// (release.OpenToken), and returns the approval payloads.
func openedApprovals(t *testing.T, fx releasetest.Fixture, body []byte) []contract.ApprovalPayload {
	t.Helper()
	approval, publication := fx.Authorities()
	var req contract.DeliveryRequest
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	raw, err := release.OpenToken(release.PublicationContext, publication.PublicKey(), req.Bundle)
	if err != nil {
		t.Fatal(err)
	}
	var bun contract.Bundle
	if err := json.Unmarshal(raw, &bun); err != nil {
		t.Fatal(err)
	}
	var out []contract.ApprovalPayload
	for _, l := range bun.Locales {
		p, err := release.OpenToken(release.ApprovalContext, approval.PublicKey(), l.Approval)
		if err != nil {
			t.Fatalf("%s: approval token does not verify: %v", l.TargetLocale, err)
		}
		var ap contract.ApprovalPayload
		if err := json.Unmarshal(p, &ap); err != nil || ap.ApprovalID != l.ApprovalID || ap.TargetLocale != l.TargetLocale {
			t.Fatalf("%s: approval payload %+v %v", l.TargetLocale, ap, err)
		}
		out = append(out, ap)
	}
	return out
}

// The delivery built from compact approvals is byte for byte the one
// built from token approvals (same inputs, same clock, same keys): the
// token rebuilt from the stored body and signature is the one signed, and
// the CMS verifies every approval in it with the approval key.
func TestCompactApprovalsDeliverTheSameBytes(t *testing.T) {
	locales := []string{"de-DE", "fr-FR", "it-IT"}
	bodies := map[bool][]byte{}
	for _, compact := range []bool{false, true} {
		b := setup(t)
		b.reconfigure(t, func(_ *release.Dependencies, cfg *release.Config) { cfg.CompactApprovals = compact })
		plan := releasetest.NewPlan("evt-same", locales...)
		bodies[compact] = deliverAll(t, b, plan, locales...)
		s := b.snap(t, "evt-same")
		if s.Plan.Compact != compact || len(s.Approvals) != len(locales) {
			t.Fatalf("compact=%v: plan %+v, %d approvals", compact, s.Plan.Compact, len(s.Approvals))
		}
		for _, a := range s.Approvals {
			if a.Compact() != compact || a.Token == "" {
				t.Fatalf("compact=%v: approval %s layout compact=%v", compact, a.JobID, a.Compact())
			}
		}
		if compact {
			// What the store holds: no token, the body once.
			for sk, raw := range b.store.Raw("evt-same") {
				if bytes.HasPrefix([]byte(sk), []byte(release.SKApprovalPrefix)) && bytes.Contains(raw, []byte(`"Token"`)) {
					t.Fatalf("%s stored with a token: %s", sk, raw)
				}
			}
		}
		if got := openedApprovals(t, b.fx, bodies[compact]); len(got) != len(locales) {
			t.Fatalf("%d approvals in the bundle", len(got))
		}
	}
	if !bytes.Equal(bodies[false], bodies[true]) {
		t.Fatalf("deliveries differ:\n token   %s\n compact %s", bodies[false], bodies[true])
	}
}

// Mixed fleet during the rollout: a compact plan's approval written in
// the token layout (by a coordinator of the previous version, which knows
// neither the plan attribute nor the layout) is read, used for the
// delivery and settled by this version; it keeps its layout, and the
// other locales' approvals are compact.
func TestCompactPlanUsesATokenLayoutApproval(t *testing.T) {
	b := setup(t)
	locales := []string{"de-DE", "fr-FR"}
	plan := releasetest.NewPlan("evt-mixed", locales...)
	b.ingestPlan(t, plan)
	for _, l := range locales {
		b.ingestResult(t, plan, l, releasetest.ResultOptions{})
	}
	first := b.run(t, "evt-mixed")
	s := b.snap(t, "evt-mixed")
	if !s.Plan.Compact {
		t.Fatal("plan not compact")
	}
	a := s.Approvals["job-"+first.TargetLocale]
	if !a.Compact() {
		t.Fatal("approval not compact")
	}
	// The previous version's write of the same approval: every field,
	// the token, no body or signature.
	old := *a
	old.Body, old.Sig = "", nil
	old.Version++
	if err := b.store.Put(b.ctx, &old, a.Version); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Second)
	if o := b.run(t, "evt-mixed"); o.Status != release.OutcomeDeliveryReady {
		t.Fatalf("second locale: %+v", o)
	}
	if d, err := b.c.Deliver(b.ctx, "evt-mixed"); err != nil || d.Status != release.OutcomeDelivered {
		t.Fatalf("deliver: %+v %v", d, err)
	}
	if err := b.c.SettleOutbox(b.ctx, "evt-mixed", old.JobID, old.ApprovalID); err != nil {
		t.Fatal(err)
	}
	s = b.snap(t, "evt-mixed")
	for _, l := range locales {
		got := s.Approvals["job-"+l]
		if want := l != first.TargetLocale; got.Compact() != want {
			t.Fatalf("%s: compact=%v, want %v", l, got.Compact(), want)
		}
	}
	if got := s.Approvals[old.JobID]; got.OutboxMS != 0 || got.Token != old.Token {
		t.Fatalf("token-layout approval after settling: %+v", got)
	}
	var body []byte
	for _, v := range b.cms.Deliveries {
		body = v
	}
	if got := openedApprovals(t, b.fx, body); len(got) != len(locales) {
		t.Fatalf("%d approvals delivered", len(got))
	}
}
