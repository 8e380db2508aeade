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

func (b *bundle) owed(t *testing.T, eventID string) int {
	t.Helper()
	s, err := b.store.Load(context.Background(), eventID)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, a := range s.Approvals {
		if release.ApprovalOwed(a, s.Evidence[a.RequestID]) {
			n++
		}
	}
	return n
}

// TestApprovalStoredThenLeaseExpiredIsAnnounced: the approval is stored,
// but the evidence lease ran out meanwhile. The approval still counts: its
// release.approved event is published and settled (its evidence record
// finished), and the release goes on.
func TestApprovalStoredThenLeaseExpiredIsAnnounced(t *testing.T) {
	b := setupCoordinator(t, func(b *bundle, d *release.Dependencies, cfg *release.Config) {
		d.Evidence = clockAdvancingProvider{resp: b.resp, now: b.now, delay: cfg.EvidenceLease + time.Second}
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
	// The release goes on: fr-FR's input completes it.
	b.invoke(t, batch(envelopeMessage("m-fr", contract.DetailJobCompleted, fx.Detail(plan.ResultPayload("fr-FR", releasetest.ResultOptions{})))))
	if s, err = b.store.Load(context.Background(), "evt-late"); err != nil || s.Delivery == nil {
		t.Fatalf("no delivery after fr-FR: %v\n%s", err, b.logs.String())
	}
}

// TestOwedApprovalEventIsRepublishedAfterTheSweep: the approval is stored
// but its publish fails and the step message is lost for good. The
// approval's evidence record stays leased (owed). A run before the lease
// runs out (the sweep schedules one at once: the approval completed the
// release and wakes it) publishes nothing, as a step may still be running
// that publishes it; once the lease has run out the sweep schedules a run
// again, which publishes the owed event (same approval id) once and
// settles it, and then nothing more.
func TestOwedApprovalEventIsRepublishedAfterTheSweep(t *testing.T) {
	b := setupCoordinator(t, nil)
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
	// The message is never redelivered (it dead-letters).
	b.queue.take(t)
	if res := b.sweep(t); res.Scheduled != 1 {
		t.Fatalf("sweep scheduled %d within the evidence lease, want the completed release's run", res.Scheduled)
	}
	if resp := b.invoke(t, b.queue.take(t)); len(resp.BatchItemFailures) != 0 || b.bus.count(contract.DetailReleaseApproved) != 0 {
		t.Fatalf("the run within the lease: failures %v, %d events", failures(resp), b.bus.count(contract.DetailReleaseApproved))
	}
	b.queue.take(t)
	*b.now = b.now.Add(b.c.Config().EvidenceLease + time.Second)
	if res := b.sweep(t); res.Scheduled != 1 {
		t.Fatalf("sweep scheduled %d, want 1", res.Scheduled)
	}
	if resp := b.invoke(t, b.queue.take(t)); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("the swept run failed: %v", failures(resp))
	}
	s, _ := b.store.Load(context.Background(), "evt-owed")
	var d contract.ReleaseApproved
	if n := b.bus.details(t, contract.DetailReleaseApproved, &d); n != 1 || d.ApprovalID != s.Approvals["job-de-DE"].ApprovalID || d.TargetLocale != "de-DE" {
		t.Fatalf("%d events, last %+v", n, d)
	}
	if b.owed(t, "evt-owed") != 0 {
		t.Fatal("still owed after the swept run published it")
	}
	for range 3 {
		b.invoke(t, b.queue.take(t))
	}
	if n := b.bus.count(contract.DetailReleaseApproved); n != 1 {
		t.Fatalf("%d release.approved events after the release went on, want 1", n)
	}
}
