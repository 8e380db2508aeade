package release_test

import (
	"testing"

	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

// TestDeliveredReleaseLeavesTheWakeIndex: a job is stored marked
// awaiting_claim (it wakes the release until its evidence request
// exists) and the approval that completed the plan awaiting_delivery
// (until the delivery exists); each mark's clearing write is best effort.
// When it fails and the delivery then succeeds, a later run of the
// delivered release clears it: otherwise the record stays in the wake
// index for good (every sweep runs the release again) and, waking, never
// gets its expiry. Found by the simulator's retention check (default
// block seeds 21 and 49: each clearing write met an injected failure);
// both cases failed before the fix (an ended release returned before
// settling any mark).
func TestDeliveredReleaseLeavesTheWakeIndex(t *testing.T) {
	for _, tc := range []struct {
		name string
		// clearing reports whether rec is the write that clears the mark.
		clearing func(rec release.Record) bool
	}{
		{"approval awaiting delivery", func(rec release.Record) bool {
			a, ok := rec.(*release.ApprovalRecord)
			return ok && !a.AwaitingDelivery && a.Version > 1
		}},
		{"job awaiting claim", func(rec release.Record) bool {
			j, ok := rec.(*release.JobRecord)
			return ok && !j.AwaitingClaim && j.Version > 1
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t)
			plan := releasetest.NewPlan("evt-ad", "de-DE")
			b.ingestPlan(t, plan)
			b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{})
			failed := 0
			b.store.FailPuts(func(rec release.Record) error {
				if tc.clearing(rec) {
					failed++
					return errDown
				}
				return nil
			})
			if o := b.run(t, "evt-ad"); o.Status != release.OutcomeDeliveryReady {
				t.Fatalf("approving run: %+v", o)
			}
			if failed == 0 {
				t.Fatal("no clearing write was tried: the test does not reach the mark")
			}
			if d, err := b.c.Deliver(b.ctx, "evt-ad"); err != nil || d.Status != release.OutcomeDelivered {
				t.Fatalf("deliver: %+v %v", d, err)
			}
			b.store.FailPuts(nil)
			if o := b.run(t, "evt-ad"); o.Status != release.OutcomeDelivered {
				t.Fatalf("after delivery: %+v", o)
			}
			snap := b.snap(t, "evt-ad")
			snap.Each(func(rec release.Record) {
				_, sk := rec.Key()
				if _, wakes, _, _ := release.Wake(rec); wakes {
					t.Errorf("%s of a delivered release still wakes it: %+v", sk, rec)
				}
			})
			for _, sk := range []string{release.SKApprovalPrefix + "job-de-DE", release.SKJobPrefix + "job-de-DE"} {
				if _, ok, err := b.store.ExpiresAt(b.ctx, "evt-ad", sk); err != nil || !ok {
					t.Errorf("%s of a delivered release has no expiry (ok %v, err %v)", sk, ok, err)
				}
			}
		})
	}
}
