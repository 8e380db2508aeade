package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

// oneLocale returns the plan message and the job message of a one-locale
// event: its job completes the release (its approval, then, once that is
// published and settled, the delivery, in one invocation).
func oneLocale(eventID string) (plan, job events.SQSMessage) {
	fx := releasetest.NewFixture()
	p := releasetest.NewPlan(eventID, "de-DE")
	return envelopeMessage("m-plan", contract.DetailPlanAccepted, fx.Detail(p.PlanPayload())),
		envelopeMessage("m-job", contract.DetailJobCompleted, fx.Detail(p.ResultPayload("de-DE", releasetest.ResultOptions{})))
}

// received is m as SQS hands it over for the n-th time.
func received(m events.SQSMessage, n int) events.SQSMessage {
	m.Attributes = map[string]string{"ApproximateReceiveCount": strconv.Itoa(n)}
	return m
}

func batch(ms ...events.SQSMessage) events.SQSEvent { return events.SQSEvent{Records: ms} }

func failures(resp events.SQSEventResponse) []string {
	out := []string{}
	for _, f := range resp.BatchItemFailures {
		out = append(out, f.ItemIdentifier)
	}
	return out
}

// details returns the published details of detailType.
func (b *fakeBus) details(t *testing.T, detailType string, v any) int {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, p := range b.out {
		if p.DetailType != detailType {
			continue
		}
		n++
		if err := json.Unmarshal(p.Detail, v); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

func TestFailedPublishIsRepublishedOnRedelivery(t *testing.T) {
	const eventID = "evt-r-1"
	b := setupCoordinator(t, nil)
	plan, job := oneLocale(eventID)
	if resp := b.invoke(t, batch(plan)); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("plan: %+v", resp)
	}

	// First delivery: the approval is stored, its publish fails, the
	// message is reported for redelivery; the delivery waits for the
	// approval's event (it stays owed).
	b.bus.fail = map[string]int{contract.DetailReleaseApproved: 1}
	if got := failures(b.invoke(t, batch(received(job, 1)))); len(got) != 1 || got[0] != "m-job" {
		t.Fatalf("failures %v, want [m-job]\n%s", got, b.logs.String())
	}
	snap, err := b.store.Load(context.Background(), eventID)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Approvals) != 1 || snap.Delivery != nil || b.owed(t, eventID) != 1 {
		t.Fatalf("state before the publish: approvals %d, delivery %+v, owed %d", len(snap.Approvals), snap.Delivery, b.owed(t, eventID))
	}
	if len(b.bus.out) != 0 || len(b.queue.sent) != 0 {
		t.Fatalf("failed step published %+v, scheduled %v", b.bus.out, b.queue.sent)
	}
	var approval *release.ApprovalRecord
	for _, a := range snap.Approvals {
		approval = a
	}

	// Redelivery: the stored state's owed event is published and
	// settled, the step prepares the delivery, publishes delivery.ready
	// and schedules the delivery.
	if got := failures(b.invoke(t, batch(received(job, 2)))); len(got) != 0 {
		t.Fatalf("redelivery failed %v\n%s", got, b.logs.String())
	}
	if snap, err = b.store.Load(context.Background(), eventID); err != nil || snap.Delivery == nil || snap.Delivery.Status != release.StatePending {
		t.Fatalf("delivery after the redelivery: %+v %v", snap.Delivery, err)
	}
	var ra contract.ReleaseApproved
	if n := b.bus.details(t, contract.DetailReleaseApproved, &ra); n != 1 {
		t.Fatalf("approved published %d times", n)
	}
	want := contract.ReleaseApproved{Schema: contract.SchemaReleaseApproved, EventID: eventID, PlanID: "plan-" + eventID, JobID: approval.JobID, TargetLocale: "de-DE", ApprovalID: approval.ApprovalID}
	if ra != want {
		t.Fatalf("approved detail %+v, want %+v", ra, want)
	}
	var ready contract.Delivery
	if n := b.bus.details(t, contract.DetailDeliveryReady, &ready); n != 1 {
		t.Fatalf("ready published %d times", n)
	}
	if want := (contract.Delivery{Schema: contract.SchemaDelivery, EventID: eventID, PlanID: "plan-" + eventID, DeliveryID: snap.Delivery.DeliveryID, Status: release.OutcomeDeliveryReady}); ready != want {
		t.Fatalf("ready detail %+v, want %+v", ready, want)
	}
	deliver := b.queue.take(t)
	if len(deliver.Records) != 1 {
		t.Fatalf("redelivery scheduled %d steps", len(deliver.Records))
	}

	// The delivery is sent, its publish fails; the redelivered step
	// message publishes delivered without sending again.
	b.bus.fail = map[string]int{contract.DetailDeliveryDelivered: 1}
	if got := failures(b.invoke(t, deliver)); len(got) != 1 {
		t.Fatalf("failures %v, want the delivery step", got)
	}
	if b.cms.Sends != 1 || b.bus.count(contract.DetailDeliveryDelivered) != 0 {
		t.Fatalf("sends %d, delivered %d", b.cms.Sends, b.bus.count(contract.DetailDeliveryDelivered))
	}
	if got := failures(b.invoke(t, batch(received(deliver.Records[0], 2)))); len(got) != 0 {
		t.Fatalf("redelivery failed %v\n%s", got, b.logs.String())
	}
	var delivered contract.Delivery
	if n := b.bus.details(t, contract.DetailDeliveryDelivered, &delivered); n != 1 || b.cms.Sends != 1 {
		t.Fatalf("delivered published %d times, %d sends", n, b.cms.Sends)
	}
	if want := (contract.Delivery{Schema: contract.SchemaDelivery, EventID: eventID, PlanID: "plan-" + eventID, DeliveryID: snap.Delivery.DeliveryID, Status: release.OutcomeDelivered}); delivered != want {
		t.Fatalf("delivered detail %+v, want %+v", delivered, want)
	}
	// Once delivered, a redelivery re-publishes the current state only:
	// no second ready.
	if b.bus.count(contract.DetailDeliveryReady) != 1 {
		t.Fatalf("ready published %d times", b.bus.count(contract.DetailDeliveryReady))
	}
	for _, p := range b.bus.out {
		if bytes.Contains(p.Detail, []byte("SECRET")) {
			t.Fatalf("event detail holds text: %s", p.Detail)
		}
	}
}

func TestPlainDuplicatePublishesNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		count int
		want  int // events published by the second handling
	}{
		{"receive count 1", 1, 0},
		{"receive count 2", 2, 2}, // approved + ready
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t)
			plan, job := oneLocale("evt-r-2")
			b.invoke(t, batch(plan))
			b.bus.fail = map[string]int{contract.DetailReleaseApproved: 1}
			if got := failures(b.invoke(t, batch(received(job, 1)))); len(got) != 1 {
				t.Fatalf("failures %v", got)
			}
			if got := failures(b.invoke(t, batch(received(job, tc.count)))); len(got) != 0 {
				t.Fatalf("failures %v\n%s", got, b.logs.String())
			}
			if len(b.bus.out) != tc.want {
				t.Fatalf("published %+v, want %d events", b.bus.out, tc.want)
			}
		})
	}
}

func TestRedeliveryWithoutPlanOrBus(t *testing.T) {
	t.Run("no plan yet", func(t *testing.T) {
		b := setup(t)
		_, job := oneLocale("evt-r-3")
		if got := failures(b.invoke(t, batch(received(job, 3)))); len(got) != 0 {
			t.Fatalf("failures %v", got)
		}
		if len(b.bus.out) != 0 {
			t.Fatalf("published %+v", b.bus.out)
		}
	})
	t.Run("bus still down", func(t *testing.T) {
		b := setup(t)
		plan, job := oneLocale("evt-r-4")
		b.invoke(t, batch(plan))
		b.bus.fail = map[string]int{contract.DetailReleaseApproved: 2}
		b.invoke(t, batch(received(job, 1)))
		if got := failures(b.invoke(t, batch(received(job, 2)))); len(got) != 1 {
			t.Fatalf("failed republish acknowledged: %v", got)
		}
		if got := failures(b.invoke(t, batch(received(job, 3)))); len(got) != 0 || b.bus.count(contract.DetailReleaseApproved) != 1 {
			t.Fatalf("failures %v, approved %d", got, b.bus.count(contract.DetailReleaseApproved))
		}
	})
}
