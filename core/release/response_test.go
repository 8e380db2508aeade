package release_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

func response(t testing.TB, req *contract.EvidenceRequest, mutate func(m map[string]any)) []byte {
	t.Helper()
	fx := releasetest.NewFixture()
	m := map[string]any{
		"schema": contract.EvidenceResponseSchema, "request_id": req.RequestID, "result_sha256": req.ResultSHA256,
		"quality_receipt":      fx.Receipt(release.KindQuality, req.RequestID, req.ResultSHA256, t0, time.Hour),
		"human_review_receipt": nil, "independent_model_review": nil,
	}
	if mutate != nil {
		mutate(m)
	}
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func review(id string) map[string]any {
	return map[string]any{
		"schema":   contract.IndependentModelReviewSchema,
		"provider": map[string]any{"id": id, "model_id": "rv", "model_version": "1"},
		"receipt":  "v1.x.y",
	}
}

func TestValidateEvidenceResponse(t *testing.T) {
	plain := request("evt-1")
	human := request("evt-1")
	human.HumanReviewRequired = true
	indep := request("evt-1")
	indep.IndependentReviewRequired = true
	tests := []struct {
		name   string
		req    *contract.EvidenceRequest
		mutate func(m map[string]any)
		raw    string
		code   string
	}{
		{"plain ok", plain, nil, "", ""},
		{"not an object", plain, nil, `[]`, release.CodeEvidenceResponseInvalid},
		{"extra key", plain, func(m map[string]any) { m["x"] = 1 }, "", release.CodeEvidenceResponseInvalid},
		{"missing key", plain, func(m map[string]any) { delete(m, "human_review_receipt") }, "", release.CodeEvidenceResponseInvalid},
		{"wrong schema", plain, func(m map[string]any) { m["schema"] = "v0" }, "", release.CodeEvidenceBindingMismatch},
		{"other request", plain, func(m map[string]any) { m["request_id"] = "blun-l10n-evidence-x" }, "", release.CodeEvidenceBindingMismatch},
		{"other result", plain, func(m map[string]any) { m["result_sha256"] = strings.Repeat("0", 64) }, "", release.CodeEvidenceBindingMismatch},
		{"request id not string", plain, func(m map[string]any) { m["request_id"] = 5 }, "", release.CodeEvidenceBindingMismatch},
		{"quality receipt null", plain, func(m map[string]any) { m["quality_receipt"] = nil }, "", release.CodeQualityReceiptInvalid},
		{"quality receipt padded", plain, func(m map[string]any) { m["quality_receipt"] = " v1.a.b" }, "", release.CodeQualityReceiptInvalid},
		{"quality receipt info separator", plain, func(m map[string]any) { m["quality_receipt"] = "v1.a.b\x1f" }, "", release.CodeQualityReceiptInvalid},
		{"quality receipt NUL", plain, func(m map[string]any) { m["quality_receipt"] = "v1.a\x00b" }, "", release.CodeQualityReceiptInvalid},
		{"quality receipt not NFC", plain, func(m map[string]any) { m["quality_receipt"] = "v1.e\u0301" }, "", release.CodeQualityReceiptInvalid},
		{"quality receipt 16384 chars", plain, func(m map[string]any) { m["quality_receipt"] = strings.Repeat("é", 16384) }, "", ""},
		{"quality receipt 16385 chars", plain, func(m map[string]any) { m["quality_receipt"] = strings.Repeat("a", 16385) }, "", release.CodeQualityReceiptInvalid},
		{"unexpected human receipt", plain, func(m map[string]any) { m["human_review_receipt"] = "v1.h.r" }, "", release.CodeEscalationUnexpected},
		{"unexpected model review", plain, func(m map[string]any) { m["independent_model_review"] = review("rv") }, "", release.CodeEscalationUnexpected},
		{"human ok", human, func(m map[string]any) { m["human_review_receipt"] = "v1.h.r" }, "", ""},
		{"human required, model review", human, func(m map[string]any) {
			m["human_review_receipt"] = "v1.h.r"
			m["independent_model_review"] = review("rv")
		}, "", release.CodeIndependentLegalForbidden},
		{"human required, none", human, nil, "", release.CodeHumanReceiptRequired},
		{"human required, not string", human, func(m map[string]any) { m["human_review_receipt"] = false }, "", release.CodeHumanReceiptRequired},
		{"escalation none", indep, nil, "", release.CodeEscalationRequired},
		{"escalation both", indep, func(m map[string]any) {
			m["human_review_receipt"] = "v1.h.r"
			m["independent_model_review"] = review("rv")
		}, "", release.CodeEscalationRequired},
		{"escalation human", indep, func(m map[string]any) { m["human_review_receipt"] = "v1.h.r" }, "", ""},
		{"escalation human bad", indep, func(m map[string]any) { m["human_review_receipt"] = "" }, "", release.CodeHumanReceiptRequired},
		{"escalation model", indep, func(m map[string]any) { m["independent_model_review"] = review("rv") }, "", ""},
		{"model review not object", indep, func(m map[string]any) { m["independent_model_review"] = "x" }, "", release.CodeIndependentInvalid},
		{"model review extra key", indep, func(m map[string]any) { r := review("rv"); r["x"] = 1; m["independent_model_review"] = r }, "", release.CodeIndependentInvalid},
		{"model review schema", indep, func(m map[string]any) { r := review("rv"); r["schema"] = "v0"; m["independent_model_review"] = r }, "", release.CodeIndependentInvalid},
		{"reviewer extra key", indep, func(m map[string]any) {
			r := review("rv")
			r["provider"] = map[string]any{"id": "rv", "model_id": "a", "model_version": "1", "x": "y"}
			m["independent_model_review"] = r
		}, "", release.CodeIndependentProvider},
		{"reviewer bad token", indep, func(m map[string]any) { m["independent_model_review"] = review("r v") }, "", release.CodeIndependentProvider},
		{"reviewer is translator", indep, func(m map[string]any) { m["independent_model_review"] = review("mt") }, "", release.CodeIndependentNotIndependent},
		{"review receipt missing", indep, func(m map[string]any) { r := review("rv"); r["receipt"] = nil; m["independent_model_review"] = r }, "", release.CodeIndependentReceipt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := []byte(tt.raw)
			if tt.raw == "" {
				raw = response(t, tt.req, tt.mutate)
			}
			ev, err := release.ValidateEvidenceResponse(tt.req, raw)
			if tt.code == "" {
				if err != nil {
					t.Fatalf("unexpected %v", err)
				}
				if ev.QualityReceipt == "" {
					t.Fatal("no quality receipt")
				}
				return
			}
			wantCode(t, err, tt.code)
		})
	}
}

type mutatingProvider struct{ body []byte }

func (p mutatingProvider) Obtain(_ context.Context, req *contract.EvidenceRequest) ([]byte, error) {
	req.ReviewConfidence["level"] = "low"
	return p.body, nil
}

type errProvider struct{ err error }

func (p errProvider) Obtain(context.Context, *contract.EvidenceRequest) ([]byte, error) {
	return nil, p.err
}

func TestObtainEvidenceErrors(t *testing.T) {
	req := request("evt-1")
	_, err := release.ObtainEvidence(context.Background(), mutatingProvider{body: response(t, req, nil)}, req)
	wantCode(t, err, release.CodeEvidenceRequestMutated)
	tests := []struct {
		err       error
		code      string
		retryable bool
	}{
		{core.Retry("http_503"), "evidence.http_503", true},
		{core.Fail("evidence.policy_refused"), "evidence.policy_refused", false},
		{errors.New("boom"), "evidence.unavailable", true},
	}
	for _, tt := range tests {
		_, err := release.ObtainEvidence(context.Background(), errProvider{tt.err}, request("evt-1"))
		wantCode(t, err, tt.code)
		if core.IsRetryable(err) != tt.retryable {
			t.Fatalf("%s retryable=%v", tt.code, core.IsRetryable(err))
		}
	}
	_, err = release.ObtainEvidence(context.Background(), nil, req)
	wantCode(t, err, "evidence.provider.invalid")
}

func TestReceiptVerifier(t *testing.T) {
	fx := releasetest.NewFixture()
	v := fx.Verifiers().Quality
	req := request("evt-1")
	good := fx.Receipt(release.KindQuality, req.RequestID, req.ResultSHA256, t0, time.Hour)
	other := releasetest.Fixture{Issuer: fx.Issuer, IssuerKey: releasetest.NewFixture().IssuerKey}
	other.IssuerKey = append([]byte(nil), fx.IssuerKey...)
	other.IssuerKey[0] ^= 1 // a different seed, same issuer name
	unknown := fx
	unknown.Issuer = "somebody"
	// The quality issuer signing a human-review payload: known, valid
	// signature, but not the kind this verifier checks.
	qualityOnly := releasetest.Fixture{Issuer: fx.Issuer, IssuerKey: fx.IssuerKey}
	tests := []struct {
		name    string
		receipt string
		now     time.Time
		code    string
	}{
		{"valid", good, t0.Add(time.Minute), ""},
		{"malformed", "v1.%%%.x", t0, release.CodeReceiptMalformed},
		{"payload not receipt", "v1.e30.AAAA", t0, release.CodeReceiptMalformed},
		{"unknown issuer", unknown.Receipt(release.KindQuality, req.RequestID, req.ResultSHA256, t0, time.Hour), t0, release.CodeReceiptIssuerUnknown},
		{"wrong key", other.Receipt(release.KindQuality, req.RequestID, req.ResultSHA256, t0, time.Hour), t0, release.CodeReceiptSignature},
		{"wrong kind", qualityOnly.Receipt(release.KindHumanReview, req.RequestID, req.ResultSHA256, t0, time.Hour), t0, release.CodeReceiptKindMismatch},
		{"other kind's issuer", fx.Receipt(release.KindHumanReview, req.RequestID, req.ResultSHA256, t0, time.Hour), t0, release.CodeReceiptIssuerUntrusted},
		{"other request", fx.Receipt(release.KindQuality, "blun-l10n-evidence-x", req.ResultSHA256, t0, time.Hour), t0, release.CodeReceiptBindingMismatch},
		{"other result", fx.Receipt(release.KindQuality, req.RequestID, strings.Repeat("0", 64), t0, time.Hour), t0, release.CodeReceiptBindingMismatch},
		{"expired", good, t0.Add(time.Hour), release.CodeReceiptExpired},
		{"from the future", good, t0.Add(-time.Hour), release.CodeReceiptNotYetValid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := v.Verify(tt.receipt, req.RequestID, req.ResultSHA256, tt.now)
			if tt.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantCode(t, err, tt.code)
		})
	}
}

func TestBadReceiptBlocksApproval(t *testing.T) {
	b := setup(t)
	b.reconfigure(t, func(d *release.Dependencies, _ *release.Config) {
		d.Verifiers.Quality = release.ReceiptVerifier{Kind: release.KindQuality}
	}) // trusts no issuer
	plan := releasetest.NewPlan("evt-br", "de-DE")
	b.ingestPlan(t, plan)
	b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{})
	err := b.runFail(t, "evt-br", "release.receipt.issuer_unknown")
	if core.IsRetryable(err) {
		t.Fatal("untrusted receipt must not be retryable")
	}
	if rec := b.onlyEvidence(t, "evt-br"); rec.Status != release.StateFailed {
		t.Fatalf("%+v", rec)
	}
}

// TestNoTextInEvidenceStateOrLogs runs a full release and checks that no
// source or target text reaches the content-free records or the logs.
func TestNoTextInEvidenceStateOrLogs(t *testing.T) {
	b := setup(t)
	b.resp.FailFirst = 1
	plan := releasetest.NewPlan("evt-cf", "de-DE", "fr-FR")
	b.ingestPlan(t, plan)
	for _, l := range []string{"fr-FR", "de-DE"} {
		b.ingestResult(t, plan, l, releasetest.ResultOptions{IndependentReviewRequired: l == "de-DE"})
	}
	for i := 0; i < 8; i++ {
		_, _ = releasetest.Drive(b.ctx, b.c, release.StepRequest{EventID: "evt-cf"}, releasetest.Options{Ports: b.ports()})
		b.clock.Advance(time.Minute)
	}
	if _, err := b.c.Deliver(b.ctx, "evt-cf"); err != nil {
		t.Fatal(err)
	}
	secrets := []string{"SECRET-SOURCE", "SECRET-TARGET", "Welcome to our shop"}
	raw := b.store.Raw("evt-cf")
	textItems := 0
	for sk, item := range raw {
		hasText := false
		for _, s := range secrets {
			if bytes.Contains(item, []byte(s)) {
				hasText = true
			}
		}
		textOK := strings.HasPrefix(sk, release.SKSourcePrefix) || strings.HasPrefix(sk, release.SKResultPrefix)
		if hasText && !textOK {
			t.Errorf("record %s holds text", sk)
		}
		if hasText {
			textItems++
		}
	}
	if textItems != 4 {
		t.Fatalf("%d text records, want 4 (2 sources + 2 results)", textItems)
	}
	for _, s := range secrets {
		if bytes.Contains(b.logs.Bytes(), []byte(s)) {
			t.Errorf("log holds text %q", s)
		}
	}
	if !bytes.Contains(b.logs.Bytes(), []byte(`"evidence failed"`)) || !bytes.Contains(b.logs.Bytes(), []byte(`"delivered"`)) {
		t.Fatalf("expected log lines missing:\n%s", b.logs.String())
	}
}
