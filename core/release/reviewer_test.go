package release_test

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

// TestIndependentReviewerIsBoundByTheReceipt: the reviewer id used to be
// an unsigned claim of the evidence response, so the not_independent check
// compared two values the provider chose. The reviewer is now signed into
// the independent review receipt and checked against the translator and
// the response's claim.
func TestIndependentReviewerIsBoundByTheReceipt(t *testing.T) {
	tests := []struct {
		name, signed, code string
	}{
		{"receipt names the translator", "mt-alpha", release.CodeIndependentNotIndependent},
		{"receipt names another reviewer than the response", "review-gamma", release.CodeIndependentProvider},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := setup(t)
			b.resp.Review = releasetest.ReviewIndependent
			b.resp.SignedReviewer = tt.signed
			plan := releasetest.NewPlan("evt-rv", "de-DE")
			b.ingestPlan(t, plan)
			b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{ProviderID: "mt-alpha", IndependentReviewRequired: true})
			err := b.runFail(t, "evt-rv", tt.code)
			if core.IsRetryable(err) {
				t.Fatal("a reviewer mismatch must not be retried")
			}
			if s := b.snap(t, "evt-rv"); len(s.Approvals) != 0 {
				t.Fatalf("approved: %+v", s.Approvals)
			}
			if rec := b.onlyEvidence(t, "evt-rv"); rec.Status != release.StateFailed {
				t.Fatalf("evidence %+v", rec)
			}
		})
	}
	t.Run("receipt names the claimed reviewer", func(t *testing.T) {
		b := setup(t)
		b.resp.Review = releasetest.ReviewIndependent
		plan := releasetest.NewPlan("evt-rv", "de-DE")
		b.ingestPlan(t, plan)
		b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{ProviderID: "mt-alpha", IndependentReviewRequired: true})
		if o := b.run(t, "evt-rv"); o.ApprovalID == "" {
			t.Fatalf("outcome %+v, want an approval", o)
		}
	})
}

// TestReceiptReviewerField: reviewer_id is required in independent model
// review receipts and refused in the other kinds, whose payload is the
// original six fields.
func TestReceiptReviewerField(t *testing.T) {
	fx := releasetest.NewFixture()
	v := fx.Verifiers()
	req := request("evt-1")
	payload := func(kind, reviewer string) contract.ReceiptPayload {
		return contract.ReceiptPayload{
			Kind: kind, RequestID: req.RequestID, ResultSHA256: req.ResultSHA256,
			IssuedAtMS: core.Millis(t0), ExpiresAtMS: core.Millis(t0.Add(time.Hour)), ReviewerID: reviewer,
		}
	}
	tests := []struct {
		name     string
		verifier release.Verifier
		receipt  string
		code     string
	}{
		{"independent with reviewer", v.IndependentReview, fx.SignReceipt(payload(release.KindIndependentModelReview, "review-beta")), ""},
		{"independent without reviewer", v.IndependentReview, fx.SignReceipt(payload(release.KindIndependentModelReview, "")), release.CodeReceiptMalformed},
		{"independent with a bad reviewer", v.IndependentReview, fx.SignReceipt(payload(release.KindIndependentModelReview, "a b")), release.CodeReceiptMalformed},
		{"quality with reviewer", v.Quality, fx.SignReceipt(payload(release.KindQuality, "review-beta")), release.CodeReceiptMalformed},
		{"human review with reviewer", v.HumanReview, fx.SignReceipt(payload(release.KindHumanReview, "review-beta")), release.CodeReceiptMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := tt.verifier.Verify(tt.receipt, req.RequestID, req.ResultSHA256, t0)
			if tt.code != "" {
				wantCode(t, err, tt.code)
				return
			}
			if err != nil || p.ReviewerID != "review-beta" {
				t.Fatalf("payload %+v, err %v", p, err)
			}
		})
	}
}

// TestReceiptContractVector: the contract's quality receipt vector still
// verifies with the receipt verifier (the reviewer field is for
// independent review receipts only).
func TestReceiptContractVector(t *testing.T) {
	raw, err := os.ReadFile("testdata/signatures.json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Receipt struct {
			Issuer    string `json:"issuer"`
			PublicHex string `json:"ed25519_public_hex"`
			Payload   string `json:"payload"`
			Receipt   string `json:"receipt"`
		} `json:"receipt"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	var p contract.ReceiptPayload
	if err := json.Unmarshal([]byte(v.Receipt.Payload), &p); err != nil {
		t.Fatal(err)
	}
	pub, _ := hex.DecodeString(v.Receipt.PublicHex)
	verifier := release.ReceiptVerifier{Kind: p.Kind, Issuers: map[string]ed25519.PublicKey{v.Receipt.Issuer: pub}}
	got, err := verifier.Verify(v.Receipt.Receipt, p.RequestID, p.ResultSHA256, time.UnixMilli(p.IssuedAtMS).Add(time.Hour))
	if err != nil || got != p || got.ReviewerID != "" || !strings.HasPrefix(v.Receipt.Receipt, "v1.") {
		t.Fatalf("vector receipt: %+v, %v", got, err)
	}
}
