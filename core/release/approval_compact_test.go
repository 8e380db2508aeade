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

// The delivery carries each approval's token byte for byte as it was
// signed: the token rebuilt from the stored body and signature is what
// the approval authority signs for that body (Ed25519 is deterministic),
// the store holds no token, and the CMS verifies every approval in the
// bundle with the approval key.
func TestApprovalsDeliverTheSignedBytes(t *testing.T) {
	locales := []string{"de-DE", "fr-FR", "it-IT"}
	b := setup(t)
	plan := releasetest.NewPlan("evt-same", locales...)
	body := deliverAll(t, b, plan, locales...)
	s := b.snap(t, "evt-same")
	if len(s.Approvals) != len(locales) {
		t.Fatalf("%d approvals", len(s.Approvals))
	}
	approval, _ := b.fx.Authorities()
	tokens := map[string]string{}
	for _, a := range s.Approvals {
		signed, err := approval.Sign([]byte(a.Body))
		if err != nil || a.Token != signed || a.Token != release.BuildToken([]byte(a.Body), a.Sig) {
			t.Fatalf("approval %s: token %q, signed %q (%v)", a.JobID, a.Token, signed, err)
		}
		tokens[a.ApprovalID] = a.Token
	}
	// What the store holds: no token, the body once.
	for sk, raw := range b.store.Raw("evt-same") {
		if bytes.HasPrefix([]byte(sk), []byte(release.SKApprovalPrefix)) && (bytes.Contains(raw, []byte(`"Token"`)) || bytes.Contains(raw, []byte(`"token"`))) {
			t.Fatalf("%s stored with a token: %s", sk, raw)
		}
	}
	if got := openedApprovals(t, b.fx, body); len(got) != len(locales) {
		t.Fatalf("%d approvals in the bundle", len(got))
	}
	var req contract.DeliveryRequest
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	_, publication := b.fx.Authorities()
	raw, err := release.OpenToken(release.PublicationContext, publication.PublicKey(), req.Bundle)
	if err != nil {
		t.Fatal(err)
	}
	var bun contract.Bundle
	if err := json.Unmarshal(raw, &bun); err != nil {
		t.Fatal(err)
	}
	for _, l := range bun.Locales {
		if tokens[l.ApprovalID] != l.Approval {
			t.Fatalf("%s: the bundle's approval is not the stored token", l.TargetLocale)
		}
	}
}
