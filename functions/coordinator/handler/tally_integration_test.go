package handler_test

import (
	"testing"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

// TestIntegrationMixedFleetTally runs a coordinator with
// LOCALEFLOW_RELEASE_TALLY off and one with it on side by side on the same
// table and queue (the flip of the setting, docs/design.md "Release
// reads": deploys), on DynamoDB Local: a release whose plan the first
// ingested (not tallied) and one whose plan the second ingested
// (tallied), their job inputs handled by either, are each delivered once
// with every locale approved once; only the tallied one has a tally, and
// it holds every job.
func TestIntegrationMixedFleetTally(t *testing.T) {
	s := newStack(t, &releasetest.Responder{})
	off := s.newHandler(t, func(c *release.Config) { c.Tally = false })
	on := s.h
	locales := []string{"de-DE", "fr-FR", "it-IT", "ja-JP"}
	untallied := releasetest.NewPlan("evt-mixed-off", locales...)
	tallied := releasetest.NewPlan("evt-mixed-on", locales...)

	s.h = off
	s.publish(t, contract.DetailPlanAccepted, untallied.PlanPayload())
	s.drain(t, 30*time.Second, func() bool { return true })
	s.h = on
	s.publish(t, contract.DetailPlanAccepted, tallied.PlanPayload())
	s.drain(t, 30*time.Second, func() bool { return true })

	s.alt = off
	for _, l := range locales {
		s.publish(t, contract.DetailJobCompleted, untallied.ResultPayload(l, releasetest.ResultOptions{}))
		s.publish(t, contract.DetailJobCompleted, tallied.ResultPayload(l, releasetest.ResultOptions{}))
	}
	s.drain(t, 120*time.Second, func() bool { return s.bus.count(contract.DetailDeliveryDelivered) == 2 })

	for _, c := range []struct {
		eventID string
		tallied bool
	}{{"evt-mixed-off", false}, {"evt-mixed-on", true}} {
		snap := s.snapshot(t, c.eventID)
		if snap.Plan.Tallied != c.tallied || len(snap.Approvals) != len(locales) || snap.Delivery == nil ||
			snap.Delivery.Status != release.StateSucceeded || snap.Delivery.Attempts != 1 {
			t.Fatalf("%s: plan tallied %v, approvals %d, delivery %+v", c.eventID, snap.Plan.Tallied, len(snap.Approvals), snap.Delivery)
		}
		if c.tallied != (snap.Tally != nil) || (snap.Tally != nil && len(snap.Tally.Approved) != len(locales)) {
			t.Fatalf("%s: tally %+v", c.eventID, snap.Tally)
		}
		for _, a := range snap.Approvals {
			if a.OutboxMS != 0 || a.AwaitingDelivery {
				t.Fatalf("%s: approval left marked: %+v", c.eventID, a)
			}
		}
	}
	calls, rejected, duplicates, _ := s.cms.Stats()
	if calls != 2 || rejected != 0 || duplicates != 0 || s.bus.count(contract.DetailReleaseApproved) != 2*len(locales) {
		t.Fatalf("cms calls %d rejected %d duplicates %d, events %v", calls, rejected, duplicates, s.bus.types)
	}
}
