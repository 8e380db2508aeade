package release_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

func BenchmarkParseSignedJobEvent(b *testing.B) {
	fx := releasetest.NewFixture()
	plan := releasetest.NewPlan("evt-b", "de-DE")
	detail := fx.Detail(plan.ResultPayload("de-DE", releasetest.ResultOptions{}))
	b.SetBytes(int64(len(detail)))
	for b.Loop() {
		if _, err := release.ParseSignedEvent(fx.EventKey, contract.DetailJobCompleted, detail); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidateEvidenceResponse(b *testing.B) {
	req := request("evt-b")
	req.IndependentReviewRequired = true
	body := response(b, req, func(m map[string]any) { m["independent_model_review"] = review("rv") })
	for b.Loop() {
		if _, err := release.ValidateEvidenceResponse(req, body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReleaseOfTenLocales measures a whole release on the in-memory
// store: ingest a plan and ten results, approve every locale (evidence,
// receipt verification, signing), prepare and deliver.
func BenchmarkReleaseOfTenLocales(b *testing.B) {
	fx := releasetest.NewFixture()
	approval, publication := fx.Authorities()
	locales := make([]string, 10)
	for i := range locales {
		locales[i] = fmt.Sprintf("l%02d-XX", i)
	}
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		now := time.Now()
		clk := clockAt(now)
		c, err := release.NewCoordinator(release.Dependencies{
			Store: releasetest.NewMemStore(), EventKey: fx.EventKey,
			Evidence: releasetest.Provider{Responder: &releasetest.Responder{Fixture: fx, Clock: clk}}, CMS: &releasetest.CMS{},
			Verifiers: fx.Verifiers(), Approval: approval, Publication: publication,
		}, clk, slog.New(slog.DiscardHandler), release.DefaultConfig("rev-1", "w"))
		if err != nil {
			b.Fatal(err)
		}
		plan := releasetest.NewPlan(fmt.Sprintf("evt-%d", i), locales...)
		if _, _, err := c.Ingest(ctx, contract.DetailPlanAccepted, fx.Detail(plan.PlanPayload())); err != nil {
			b.Fatal(err)
		}
		for _, l := range locales {
			if _, _, err := c.Ingest(ctx, contract.DetailJobCompleted, fx.Detail(plan.ResultPayload(l, releasetest.ResultOptions{}))); err != nil {
				b.Fatal(err)
			}
		}
		for range locales {
			if _, err := c.RunNextRelease(ctx, plan.EventID); err != nil {
				b.Fatal(err)
			}
		}
		if o, err := c.Deliver(ctx, plan.EventID); err != nil || o.Status != release.OutcomeDelivered {
			b.Fatal(o, err)
		}
	}
}

type clockAt time.Time

func (c clockAt) Now() time.Time { return time.Time(c) }
