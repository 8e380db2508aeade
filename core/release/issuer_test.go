package release_test

import (
	"crypto/ed25519"
	"encoding/json"
	"testing"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/signing"
)

// TestQualityIssuerRefusedAsHumanReview: each receipt kind trusts its own
// issuers. With one shared issuer set the evidence provider's quality key
// could mint a human-review receipt and approve legal content without a
// human.
func TestQualityIssuerRefusedAsHumanReview(t *testing.T) {
	fx := releasetest.NewFixture()
	v := fx.Verifiers()
	req := request("evt-1")
	qualityKey := releasetest.Fixture{Issuer: fx.Issuer, IssuerKey: fx.IssuerKey}
	sign := func(f releasetest.Fixture, issuer, kind string) string {
		raw, _ := json.Marshal(contract.ReceiptPayload{
			Kind: kind, Issuer: issuer, RequestID: req.RequestID, ResultSHA256: req.ResultSHA256,
			IssuedAtMS: core.Millis(t0), ExpiresAtMS: core.Millis(t0.Add(time.Hour)),
		})
		_, key := f.IssuerFor(release.KindQuality)
		return signing.SignReceipt(key, raw)
	}
	tests := []struct {
		name     string
		verifier release.Verifier
		receipt  string
		code     string
	}{
		{"quality issuer names itself", v.HumanReview, sign(qualityKey, fx.Issuer, release.KindHumanReview), release.CodeReceiptIssuerUntrusted},
		{"quality key names the human issuer", v.HumanReview, sign(qualityKey, fx.HumanIssuer, release.KindHumanReview), release.CodeReceiptSignature},
		{"quality issuer as independent review", v.IndependentReview, qualityKey.IndependentReceipt("review-beta", req.RequestID, req.ResultSHA256, t0, time.Hour), release.CodeReceiptIssuerUntrusted},
		{"human issuer as quality", v.Quality, fx.Receipt(release.KindHumanReview, req.RequestID, req.ResultSHA256, t0, time.Hour), release.CodeReceiptIssuerUntrusted},
		{"unknown issuer", v.HumanReview, sign(qualityKey, "somebody", release.KindHumanReview), release.CodeReceiptIssuerUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.verifier.Verify(tt.receipt, req.RequestID, req.ResultSHA256, t0)
			wantCode(t, err, tt.code)
		})
	}
	if _, err := v.HumanReview.Verify(fx.Receipt(release.KindHumanReview, req.RequestID, req.ResultSHA256, t0, time.Hour), req.RequestID, req.ResultSHA256, t0); err != nil {
		t.Fatalf("human issuer's own receipt: %v", err)
	}
}

// TestLegalContentNeedsHumanIssuer runs the approval step for content that
// requires human review, with a provider whose human-review receipts are
// signed by its quality key: the locale is not approved.
func TestLegalContentNeedsHumanIssuer(t *testing.T) {
	b := setup(t)
	forged := b.fx
	forged.HumanIssuer, forged.HumanIssuerKey = b.fx.Issuer, b.fx.IssuerKey
	b.resp.Fixture = forged
	plan := releasetest.NewPlan("evt-legal", "de-DE")
	b.ingestPlan(t, plan)
	b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{HumanReviewRequired: true})
	err := b.runFail(t, "evt-legal", "release.receipt.issuer_untrusted")
	if core.IsRetryable(err) {
		t.Fatal("a receipt from an untrusted issuer must not be retried")
	}
	if s := b.snap(t, "evt-legal"); len(s.Approvals) != 0 {
		t.Fatalf("approved without a human-review issuer: %+v", s.Approvals)
	}
	// The same content with the human-review issuer's receipt is approved.
	b2 := setup(t)
	b2.ingestPlan(t, plan)
	b2.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{HumanReviewRequired: true})
	if o := b2.run(t, "evt-legal"); o.ApprovalID == "" {
		t.Fatalf("outcome %+v, want an approval", o)
	}
}

func TestTrustedIssuersValidate(t *testing.T) {
	fx := releasetest.NewFixture()
	good := fx.TrustedIssuers()
	if err := good.Validate(); err != nil {
		t.Fatalf("fixture issuers: %v", err)
	}
	pub := func(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }
	shared := fx.TrustedIssuers()
	shared.HumanReview = map[string]ed25519.PublicKey{"desk": pub(fx.IssuerKey)}
	missing := fx.TrustedIssuers()
	missing.IndependentReview = nil
	short := fx.TrustedIssuers()
	short.Quality = map[string]ed25519.PublicKey{"qa": ed25519.PublicKey("short")}
	for name, tt := range map[string]struct {
		t    release.TrustedIssuers
		code string
	}{
		"quality key trusted for human review": {shared, release.CodeIssuersKeyShared},
		"no independent review issuers":        {missing, release.CodeIssuersMissing},
		"malformed key":                        {short, release.CodeIssuersKeyInvalid},
	} {
		t.Run(name, func(t *testing.T) { wantCode(t, tt.t.Validate(), tt.code) })
	}
}
