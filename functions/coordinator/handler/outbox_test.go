package handler_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/functions/coordinator/handler"
)

// clockAdvancingProvider answers after the clock moved on by delay: the evidence
// lease can run out while the approval is being made.
type clockAdvancingProvider struct {
	resp  *releasetest.Responder
	now   *time.Time
	delay time.Duration
}

func (p clockAdvancingProvider) Obtain(_ context.Context, req *contract.EvidenceRequest) ([]byte, error) {
	*p.now = p.now.Add(p.delay)
	return p.resp.Respond(req)
}

func (b *bundle) sweep(t *testing.T) handler.SweepResult {
	t.Helper()
	out, err := lambda.NewHandler(b.h.Handle).Invoke(context.Background(), readTestdata(t, "scheduled.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res handler.SweepResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

// tokenLayout configures the coordinator with the token approval layout
// (Config.CompactApprovals off): the tests of the outbox marker.
func tokenLayout(_ *bundle, _ *release.Dependencies, cfg *release.Config) {
	cfg.CompactApprovals = false
}

func (b *bundle) owed(t *testing.T, eventID string) int {
	t.Helper()
	s, err := b.store.Load(context.Background(), eventID)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, a := range s.Approvals {
		if a.OutboxMS != 0 {
			n++
		}
	}
	return n
}

// TestApprovalStoredThenLeaseExpiredIsAnnounced: the approval is stored,
// but the evidence lease ran out meanwhile, so the step ends with the
// final evidence.lease_expired. The approval still counts: its
// release.approved event is published and the release goes on.
func TestApprovalStoredThenLeaseExpiredIsAnnounced(t *testing.T) {
	b := setupCoordinator(t, func(b *bundle, d *release.Dependencies, cfg *release.Config) {
		d.Evidence = clockAdvancingProvider{resp: b.resp, now: b.now, delay: cfg.EvidenceLease + time.Second}
		cfg.CompactApprovals = false
	})
	plan := releasetest.NewPlan("evt-late", "de-DE", "fr-FR")
	fx := releasetest.NewFixture()
	b.invoke(t, batch(envelopeMessage("m-plan", contract.DetailPlanAccepted, fx.Detail(plan.PlanPayload()))))
	resp := b.invoke(t, batch(envelopeMessage("m-de", contract.DetailJobCompleted, fx.Detail(plan.ResultPayload("de-DE", releasetest.ResultOptions{})))))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", failures(resp))
	}
	s, err := b.store.Load(context.Background(), "evt-late")
	if err != nil || s.Approvals["job-de-DE"] == nil {
		t.Fatalf("approval not stored: %v", err)
	}
	var d contract.ReleaseApproved
	if n := b.bus.details(t, contract.DetailReleaseApproved, &d); n != 1 || d.ApprovalID != s.Approvals["job-de-DE"].ApprovalID {
		t.Fatalf("%d release.approved events (%+v) for a stored approval, want 1", n, d)
	}
	if n := b.owed(t, "evt-late"); n != 0 {
		t.Fatalf("%d approvals still owed after the publish", n)
	}
	// The release goes on: the next step is scheduled, not dropped.
	if q := b.queue.take(t); len(q.Records) != 1 {
		t.Fatalf("%d steps scheduled after the stored approval, want 1", len(q.Records))
	}
}

// TestOwedApprovalEventIsRepublishedBySweep: the approval is stored but
// its publish fails and the step message is lost for good; the sweep
// publishes the owed event (same approval id) once, and then no more.
func TestOwedApprovalEventIsRepublishedBySweep(t *testing.T) {
	b := setupCoordinator(t, tokenLayout)
	plan, job := oneLocale("evt-owed")
	b.invoke(t, batch(plan))
	b.bus.fail = map[string]int{contract.DetailReleaseApproved: 1}
	resp := b.invoke(t, batch(job))
	if len(resp.BatchItemFailures) != 1 {
		t.Fatalf("failures %v, want the job message", failures(resp))
	}
	if b.bus.count(contract.DetailReleaseApproved) != 0 || b.owed(t, "evt-owed") != 1 {
		t.Fatal("the failed publish is not owed")
	}
	// The message is never redelivered (it dead-letters); a sweep within
	// the grace leaves the event to a step that may still be running.
	b.queue.take(t)
	if res := b.sweep(t); res.Republished != 0 {
		t.Fatalf("sweep republished %d within the grace", res.Republished)
	}
	*b.now = b.now.Add(handler.OutboxGrace + time.Second)
	if res := b.sweep(t); res.Republished != 1 {
		t.Fatalf("sweep republished %d, want 1", res.Republished)
	}
	s, _ := b.store.Load(context.Background(), "evt-owed")
	var d contract.ReleaseApproved
	if n := b.bus.details(t, contract.DetailReleaseApproved, &d); n != 1 || d.ApprovalID != s.Approvals["job-de-DE"].ApprovalID || d.TargetLocale != "de-DE" {
		t.Fatalf("%d events, last %+v", n, d)
	}
	if b.owed(t, "evt-owed") != 0 {
		t.Fatal("still owed after the sweep published it")
	}
	if res := b.sweep(t); res.Republished != 0 {
		t.Fatalf("second sweep republished %d", res.Republished)
	}
}
