package release_test

import (
	"testing"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

// FuzzParseSignedEvent: the parser never panics, only answers with stable
// codes, and accepts nothing that is not signed with the key.
func FuzzParseSignedEvent(f *testing.F) {
	fx := releasetest.NewFixture()
	plan := releasetest.NewPlan("evt-f", "de-DE")
	f.Add(true, fx.Detail(plan.PlanPayload()))
	f.Add(false, fx.Detail(plan.ResultPayload("de-DE", releasetest.ResultOptions{})))
	f.Add(false, fx.Detail(plan.FailedPayload("de-DE")))
	f.Add(true, []byte(`{"payload":"{}","signature":"v1=00"}`))
	f.Fuzz(func(t *testing.T, isPlan bool, detail []byte) {
		dt := contract.DetailJobCompleted
		if isPlan {
			dt = contract.DetailPlanAccepted
		}
		ev, err := release.ParseSignedEvent(fx.EventKey, dt, detail)
		if err != nil {
			if !core.ValidErrorCode(core.CodeOf(err)) {
				t.Fatalf("error without a stable code: %v", err)
			}
			return
		}
		if ev.Plan == nil && ev.Job == nil {
			t.Fatal("accepted event without content")
		}
		// Anything accepted must also be rejected under another key.
		if _, err := release.ParseSignedEvent([]byte("another key"), dt, detail); !core.HasCode(err, release.CodeEventSignatureInvalid) {
			t.Fatalf("accepted under a wrong key: %v", err)
		}
	})
}

// FuzzValidateEvidenceResponse: no panic, stable codes, and an accepted
// response is bound to the request.
func FuzzValidateEvidenceResponse(f *testing.F) {
	req := request("evt-1")
	f.Add(response(f, req, nil), false, false)
	f.Add(response(f, req, func(m map[string]any) { m["independent_model_review"] = review("rv") }), false, true)
	f.Add(response(f, req, func(m map[string]any) { m["human_review_receipt"] = "v1.h.r" }), true, false)
	f.Add([]byte(`{"schema":1}`), false, false)
	f.Fuzz(func(t *testing.T, body []byte, human, independent bool) {
		r := *req
		r.HumanReviewRequired, r.IndependentReviewRequired = human, independent
		ev, err := release.ValidateEvidenceResponse(&r, body)
		if err != nil {
			if !core.ValidErrorCode(core.CodeOf(err)) {
				t.Fatalf("error without a stable code: %v", err)
			}
			return
		}
		if ev.QualityReceipt == "" {
			t.Fatal("accepted without quality receipt")
		}
		if human && ev.IndependentReview != nil {
			t.Fatal("independent review accepted where human review is required")
		}
		if ev.IndependentReview != nil && ev.IndependentReview.Provider.ID == r.Provider.ID {
			t.Fatal("non-independent reviewer accepted")
		}
	})
}
