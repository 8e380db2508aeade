package handler_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/functions/coordinator/handler"
)

// drain runs queued steps until the queue is empty (at most rounds).
func (b *bundle) drain(t *testing.T, rounds int) {
	t.Helper()
	for i := 0; i < rounds; i++ {
		q := b.queue.take(t)
		if len(q.Records) == 0 {
			return
		}
		b.invoke(t, q)
	}
}

// TestSucceededJobWithLostStepIsSwept: a succeeded job is stored but the
// step that should follow never runs (its message dead-lettered). Nothing
// is leased yet, so only the job's own wake entry lets the sweep find the
// release.
func TestSucceededJobWithLostStepIsSwept(t *testing.T) {
	b := setup(t)
	plan, _ := oneLocale("evt-lost-step")
	b.invoke(t, batch(plan))
	fx := releasetest.NewFixture()
	p := releasetest.NewPlan("evt-lost-step", "de-DE")
	if _, _, err := b.c.Ingest(context.Background(), contract.DetailJobCompleted, fx.Detail(p.ResultPayload("de-DE", releasetest.ResultOptions{}))); err != nil {
		t.Fatal(err)
	}
	b.queue.take(t)
	if res := b.sweep(t); res.Scheduled != 1 {
		t.Fatalf("sweep scheduled %d steps for a succeeded, never claimed job; want 1", res.Scheduled)
	}
	b.drain(t, 10)
	if b.bus.count(contract.DetailDeliveryDelivered) != 1 {
		t.Fatalf("release not delivered after the sweep: %v", b.bus.out)
	}
	if res := b.sweep(t); res.Due != 0 {
		t.Fatalf("a delivered release still wakes: %+v", res)
	}
}

// TestCompletedApprovalWithoutDeliveryIsSwept: the last approval is
// stored, preparing the delivery fails and the step message is lost. The
// approval that completed the plan keeps the release in the sweep until
// the delivery is prepared.
func TestCompletedApprovalWithoutDeliveryIsSwept(t *testing.T) {
	b := setup(t)
	plan, job := oneLocale("evt-no-dlv")
	b.invoke(t, batch(plan))
	b.store.FailPuts(func(rec release.Record) error {
		if _, ok := rec.(*release.DeliveryRecord); ok {
			return errBusDown
		}
		return nil
	})
	b.invoke(t, batch(job))
	s, err := b.store.Load(context.Background(), "evt-no-dlv")
	if err != nil || s.Approvals["job-de-DE"] == nil || s.Delivery != nil {
		t.Fatalf("want a stored approval and no delivery: %v", err)
	}
	b.store.FailPuts(nil)
	b.queue.take(t) // the step message is lost
	if res := b.sweep(t); res.Scheduled != 1 {
		t.Fatalf("sweep scheduled %d steps for an approved plan without delivery; want 1", res.Scheduled)
	}
	b.drain(t, 10)
	if b.bus.count(contract.DetailDeliveryDelivered) != 1 {
		t.Fatalf("release not delivered after the sweep: %v", b.bus.out)
	}
	if res := b.sweep(t); res.Due != 0 {
		t.Fatalf("a delivered release still wakes: %+v", res)
	}
}

// TestSweepReachesWorkPastOnePage: more records are due than one index
// read returns (handler.SweepLimit); the sweep pages on with the cursor
// and schedules every one of them, not only the earliest.
func TestSweepReachesWorkPastOnePage(t *testing.T) {
	b := setup(t)
	n := handler.SweepLimit + 7
	for i := 0; i < n; i++ {
		e := releasetest.SampleEvidence(fmt.Sprintf("evt-many-%04d", i), "req-1")
		e.NextAttemptMS = core.Millis(*b.now) - int64(n-i) // the last is due latest
		if err := b.store.Put(context.Background(), e, 0); err != nil {
			t.Fatal(err)
		}
	}
	res := b.sweep(t)
	if res.Due != n || res.Scheduled != n {
		t.Fatalf("sweep saw %d and scheduled %d of %d due records", res.Due, res.Scheduled, n)
	}
	q := b.queue.take(t)
	if len(q.Records) != n || !strings.Contains(q.Records[n-1].Body, fmt.Sprintf("evt-many-%04d", n-1)) {
		t.Fatalf("%d steps scheduled; the latest due release is missing", len(q.Records))
	}
}
