package release_test

import (
	"testing"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/signing"
)

// TestIngestV2Events: v2 signatures (event type and timestamp signed) are
// accepted at the coordinator's time, refused when older than the window
// or replayed under another detail-type; v1 stays accepted until RefuseV1.
// Before, a v2 detail was refused as invalid and an event of any age was
// accepted.
func TestIngestV2Events(t *testing.T) {
	plan := releasetest.NewPlan("evt-v2", "de-DE")
	v2 := func(b *bundle, dt string, payload []byte, at time.Time) []byte {
		d, err := signing.EventDetailV2(b.fx.EventKey, dt, at, payload)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	t.Run("accepted now", func(t *testing.T) {
		b := setup(t)
		if _, _, err := b.c.Ingest(b.ctx, contract.DetailPlanAccepted, v2(b, contract.DetailPlanAccepted, plan.PlanPayload(), t0)); err != nil {
			t.Fatal(err)
		}
		job := plan.ResultPayload("de-DE", releasetest.ResultOptions{})
		if _, _, err := b.c.Ingest(b.ctx, contract.DetailJobCompleted, v2(b, contract.DetailJobCompleted, job, t0.Add(-time.Hour))); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("older than the window", func(t *testing.T) {
		b := setup(t)
		old := v2(b, contract.DetailPlanAccepted, plan.PlanPayload(), t0.Add(-signing.DefaultEventMaxAge-time.Minute))
		_, _, err := b.c.Ingest(b.ctx, contract.DetailPlanAccepted, old)
		if !core.HasCode(err, release.CodeEventStale) || core.IsRetryable(err) {
			t.Fatalf("stale event: %v", err)
		}
		b.reconfigure(t, func(d *release.Dependencies, _ *release.Config) {
			d.Events.MaxAge = signing.DefaultEventMaxAge + time.Hour
		})
		if _, _, err := b.c.Ingest(b.ctx, contract.DetailPlanAccepted, old); err != nil {
			t.Fatalf("within a longer configured window: %v", err)
		}
	})
	t.Run("replayed under another detail-type", func(t *testing.T) {
		b := setup(t)
		d := v2(b, contract.DetailJobCompleted, plan.PlanPayload(), t0)
		if _, _, err := b.c.Ingest(b.ctx, contract.DetailPlanAccepted, d); !core.HasCode(err, release.CodeEventSignatureInvalid) {
			t.Fatalf("replayed detail-type: %v", err)
		}
	})
	t.Run("v1 until refused", func(t *testing.T) {
		b := setup(t)
		d := b.fx.Detail(plan.PlanPayload())
		b.reconfigure(t, func(deps *release.Dependencies, _ *release.Config) { deps.Events.RefuseV1 = true })
		if _, _, err := b.c.Ingest(b.ctx, contract.DetailPlanAccepted, d); !core.HasCode(err, release.CodeEventSignatureInvalid) {
			t.Fatalf("v1 after migration: %v", err)
		}
		b.reconfigure(t, func(deps *release.Dependencies, _ *release.Config) { deps.Events.RefuseV1 = false })
		if _, _, err := b.c.Ingest(b.ctx, contract.DetailPlanAccepted, d); err != nil {
			t.Fatalf("v1 during migration: %v", err)
		}
	})
	t.Run("previous key during rotation", func(t *testing.T) {
		b := setup(t)
		d := b.fx.Detail(plan.PlanPayload())
		b.reconfigure(t, func(d *release.Dependencies, _ *release.Config) { d.Events.PreviousKeys = [][]byte{d.EventKey} })
		b.reconfigure(t, func(d *release.Dependencies, _ *release.Config) { d.EventKey = []byte("the-new-event-key-0123456789") })
		if _, _, err := b.c.Ingest(b.ctx, contract.DetailPlanAccepted, d); err != nil {
			t.Fatalf("event signed with the previous key: %v", err)
		}
		b.reconfigure(t, func(d *release.Dependencies, _ *release.Config) { d.Events.PreviousKeys = nil })
		if _, _, err := b.c.Ingest(b.ctx, contract.DetailPlanAccepted, b.fx.Detail(releasetest.NewPlan("evt-v2b", "de-DE").PlanPayload())); !core.HasCode(err, release.CodeEventSignatureInvalid) {
			t.Fatalf("old key accepted after the grace: %v", err)
		}
	})
}
