package fault

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/dev/proof/harness"
	"github.com/localeflow/localeflow/dev/proof/invariant"
)

type releaseEnv struct {
	stack *harness.Stack
	clock *harness.Clock
	srv   *harness.ReleaseServers
	c     *harness.Coordinator
	plans []releasetest.PlanSpec
}

func newReleaseEnv(t *testing.T, seed uint64, events int, locales ...string) *releaseEnv {
	t.Helper()
	e := &releaseEnv{stack: harness.NewStack(t, seed), clock: harness.NewClock(40)}
	e.srv = harness.NewReleaseServers(t, e.clock)
	e.c = e.stack.NewCoordinator(t, e.srv, e.clock, "coordinator-a", nil)
	e.c.ESM.SweepEvery = time.Second
	for i := range events {
		e.plans = append(e.plans, releasetest.NewPlan(fmt.Sprintf("evt-rel-%d-%03d", seed, i), locales...))
	}
	return e
}

// crashWith builds the first coordinator again with its dependencies
// changed by change (a client that crashes it).
func (e *releaseEnv) crashWith(t *testing.T, change func(*release.Dependencies)) {
	t.Helper()
	e.c = e.stack.NewCoordinator(t, e.srv, e.clock, "coordinator-a", nil, change)
	e.c.ESM.SweepEvery = time.Second
}

func (e *releaseEnv) texts() []string {
	var out []string
	for _, p := range e.plans {
		out = append(out, harness.ReleaseTexts(p)...)
	}
	return out
}

func (e *releaseEnv) publish(t *testing.T) {
	t.Helper()
	for _, p := range e.plans {
		if err := e.stack.PublishRelease(context.Background(), e.srv.Fixture, p); err != nil {
			t.Fatal(err)
		}
	}
}

func (e *releaseEnv) allDelivered(ctx context.Context, plans []releasetest.PlanSpec) func() bool {
	return func() bool {
		for _, p := range plans {
			if !e.stack.Delivered(ctx, p.EventID) {
				return false
			}
		}
		return true
	}
}

// wantDeliveredOnce checks that the CMS accepted exactly one delivery for
// each plan, and that its record says so.
func (e *releaseEnv) wantDeliveredOnce(t *testing.T, plans []releasetest.PlanSpec) {
	t.Helper()
	delivered := e.srv.Delivered()
	for _, p := range plans {
		snap, err := e.c.Coordinator.Store().Load(context.Background(), p.EventID)
		if err != nil {
			t.Fatal(err)
		}
		ids := delivered[p.EventID]
		if len(ids) != 1 || snap.Delivery == nil || snap.Delivery.DeliveryID != ids[0] || snap.Delivery.Status != release.StateSucceeded {
			t.Errorf("%s: CMS deliveries %v, record %+v", p.EventID, ids, snap.Delivery)
		}
		if len(snap.Approvals) != len(p.Jobs) {
			t.Errorf("%s: %d approvals for %d jobs", p.EventID, len(snap.Approvals), len(p.Jobs))
		}
	}
}

func (e *releaseEnv) check(t *testing.T) invariant.Report {
	t.Helper()
	return e.stack.Check(t, invariant.Options{Texts: e.texts(), Delivered: e.srv.Delivered(), ApprovalKey: e.srv.ApprovalKey()})
}

// TestReleaseCrashBetweenApprovalAndDelivery: a coordinator approves every
// locale and prepares the delivery, then dies before sending it (its queue
// message is gone). The scheduled sweep finds the pending delivery through
// the wake index and another coordinator delivers it, exactly once.
func TestReleaseCrashBetweenApprovalAndDelivery(t *testing.T) {
	e := newReleaseEnv(t, 11, 2, "de-DE", "fr-FR")
	ctx := context.Background()
	for _, p := range e.plans {
		if _, _, err := e.c.Coordinator.Ingest(ctx, "localeflow.plan.accepted", e.srv.Fixture.Detail(p.PlanPayload())); err != nil {
			t.Fatal(err)
		}
		for _, j := range p.Jobs {
			if _, _, err := e.c.Coordinator.Ingest(ctx, "localeflow.job.completed", e.srv.Fixture.Detail(p.ResultPayload(j.TargetLocale, releasetest.ResultOptions{}))); err != nil {
				t.Fatal(err)
			}
		}
		ready := false
		for step := 0; step < 10 && !ready; step++ {
			out, err := harness.Step(ctx, e.c.Coordinator, p.EventID)
			if err != nil {
				t.Fatal(err)
			}
			ready = out.Status == release.OutcomeDeliveryReady
		}
		if !ready {
			t.Fatalf("%s: delivery never prepared", p.EventID)
		}
		// Crash: Deliver is never called, nothing is enqueued.
	}
	if calls, _, _, _ := e.srv.CMS.Stats(); calls != 0 {
		t.Fatalf("CMS called %d times before recovery", calls)
	}
	second := e.stack.NewCoordinator(t, e.srv, e.clock, "coordinator-b", nil)
	second.ESM.SweepEvery = 500 * time.Millisecond
	if err := second.ESM.Run(ctx, 60*time.Second, e.allDelivered(ctx, e.plans)); err != nil {
		t.Fatal(err)
	}
	e.wantDeliveredOnce(t, e.plans)
	e.check(t)
}

// TestReleaseDeliveryAnswerLost: the CMS applies a delivery but its answer
// never arrives (504 from the proxy after the CMS accepted). The retry
// carries the same delivery id; the CMS dedupes it; the record ends
// succeeded and the CMS holds one delivery.
func TestReleaseDeliveryAnswerLost(t *testing.T) {
	e := newReleaseEnv(t, 12, 1, "de-DE", "it-IT")
	e.srv.CMSProxy.Script(harness.AnswerLost, harness.Hang)
	e.publish(t)
	ctx := context.Background()
	if err := e.c.ESM.Run(ctx, 90*time.Second, e.allDelivered(ctx, e.plans)); err != nil {
		t.Fatal(err)
	}
	calls, rejected, duplicates, _ := e.srv.CMS.Stats()
	if duplicates < 1 || rejected != 0 {
		t.Fatalf("CMS calls %d rejected %d duplicates %d, want the lost delivery repeated", calls, rejected, duplicates)
	}
	e.wantDeliveredOnce(t, e.plans)
	e.check(t)
}

// TestReleaseEvidenceFaults: the evidence provider hangs past the client
// timeout and answers 503; the CMS answers 503 and then a 201 whose body
// is not JSON. The coordinator retries within its attempt budgets and every
// release is delivered once.
func TestReleaseEvidenceFaults(t *testing.T) {
	e := newReleaseEnv(t, 13, 2, "de-DE", "fr-FR")
	e.srv.EvidenceProxy.Script(harness.Hang, harness.Status503, harness.Status503)
	e.srv.CMSProxy.Script(harness.Status503, harness.Malformed)
	e.publish(t)
	ctx := context.Background()
	if err := e.c.ESM.Run(ctx, 120*time.Second, e.allDelivered(ctx, e.plans)); err != nil {
		t.Fatal(err)
	}
	if e.srv.EvidenceProxy.Seen(harness.Hang) != 1 || e.srv.EvidenceProxy.Seen(harness.Status503) != 2 || e.srv.CMSProxy.Seen(harness.Malformed) != 1 {
		t.Fatal("the injected faults were not all applied")
	}
	e.wantDeliveredOnce(t, e.plans)
	e.check(t)
}

// evidenceFailed waits until an evidence record of the first plan failed
// and returns the snapshot.
func (e *releaseEnv) evidenceFailed(t *testing.T) release.Snapshot {
	t.Helper()
	ctx := context.Background()
	failed := func() bool {
		snap, err := e.c.Coordinator.Store().Load(ctx, e.plans[0].EventID)
		if err != nil {
			return false
		}
		for _, ev := range snap.Evidence {
			if ev.Status == release.StateFailed {
				return true
			}
		}
		return false
	}
	if err := e.c.ESM.Run(ctx, 120*time.Second, failed); err != nil {
		t.Fatal(err)
	}
	snap, err := e.c.Coordinator.Store().Load(ctx, e.plans[0].EventID)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Approvals) != 0 || snap.Delivery != nil {
		t.Fatalf("approved %d, delivery %+v after failed evidence", len(snap.Approvals), snap.Delivery)
	}
	if calls, _, _, _ := e.srv.CMS.Stats(); calls != 0 {
		t.Fatalf("CMS called %d times", calls)
	}
	return snap
}

// TestReleaseEvidenceExhausted: the provider fails every attempt: the
// evidence record ends failed at its attempt limit (attention, no wake),
// nothing is approved and nothing is delivered.
func TestReleaseEvidenceExhausted(t *testing.T) {
	e := newReleaseEnv(t, 14, 1, "de-DE")
	e.srv.Responder.FailFirst = 1000
	e.publish(t)
	for _, ev := range e.evidenceFailed(t).Evidence {
		if ev.Attempts != ev.MaxAttempts || ev.LastErrorCode == "" {
			t.Fatalf("evidence %+v", ev.Lease)
		}
	}
	e.check(t)
}

// TestReleaseEvidenceMalformed: the provider answers 200 with a body that
// is not JSON: a contract violation, failed at once (not retried), nothing
// approved or delivered.
func TestReleaseEvidenceMalformed(t *testing.T) {
	e := newReleaseEnv(t, 16, 1, "de-DE")
	e.srv.EvidenceProxy.Script(harness.Malformed)
	e.publish(t)
	for _, ev := range e.evidenceFailed(t).Evidence {
		if ev.Attempts != 1 || ev.LastErrorCode != release.CodeEvidenceResponseInvalid {
			t.Fatalf("evidence %+v, want failed after 1 attempt with %s", ev.Lease, release.CodeEvidenceResponseInvalid)
		}
	}
	e.check(t)
}

// TestReleaseDuplicatesReorderingAndThrottling: inputs are published twice,
// messages are duplicated, held back and reordered, two coordinators run
// at once, and a fraction of DynamoDB calls is throttled or fails with
// 5xx (before or after applying). Every release is delivered exactly once.
func TestReleaseDuplicatesReorderingAndThrottling(t *testing.T) {
	e := newReleaseEnv(t, 15, 4, "de-DE", "fr-FR", "ja-JP")
	e.publish(t)
	e.publish(t) // every input twice
	e.stack.Faults.Fraction = 0.05
	e.stack.Faults.Enable(true)
	second := e.stack.NewCoordinator(t, e.srv, e.clock, "coordinator-b", nil)
	chaos := harness.Chaos{Duplicate: 0.3, HoldBack: 0.2, HoldRounds: 5, Reorder: true}
	ctx := context.Background()
	errs := make(chan error, 2)
	for i, c := range []*harness.Coordinator{e.c, second} {
		c.ESM.Chaos = chaos
		c.ESM.Chaos.Seed = uint64(20 + i)
		c.ESM.SweepEvery = 2 * time.Second
		go func() { errs <- c.ESM.Run(ctx, 150*time.Second, e.allDelivered(ctx, e.plans)) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	e.stack.Faults.Enable(false)
	_, injected := e.stack.Faults.Stats()
	t.Logf("injected %v; coordinator a %s; b %s", injected, summary(e.c.ESM.Stats()), summary(second.ESM.Stats()))
	e.wantDeliveredOnce(t, e.plans)
	e.check(t)
}

// crashingEvidence lets the first evidence call reach the provider, then
// kills the calling goroutine (runtime.Goexit): the worker dies holding
// the evidence lease, with the provider's answer in hand and unwritten.
type crashingEvidence struct {
	release.EvidenceProvider
	crashed atomic.Bool
}

func (p *crashingEvidence) Obtain(ctx context.Context, req *contract.EvidenceRequest) ([]byte, error) {
	body, err := p.EvidenceProvider.Obtain(ctx, req)
	if p.crashed.CompareAndSwap(false, true) {
		runtime.Goexit()
	}
	return body, err
}

// crashingDelivery lets the first delivery reach the CMS (which applies
// it), then kills the calling goroutine before the result is written.
type crashingDelivery struct {
	release.DeliveryClient
	crashed atomic.Bool
}

func (c *crashingDelivery) Deliver(ctx context.Context, siteID, eventID string, body []byte) error {
	err := c.DeliveryClient.Deliver(ctx, siteID, eventID, body)
	if c.crashed.CompareAndSwap(false, true) {
		runtime.Goexit()
	}
	return err
}

// runUntilCrash drives one event's release steps on c in a goroutine that
// the crashing client kills; it fails the test if the crash never comes.
func runUntilCrash(t *testing.T, c *release.Coordinator, eventID string) {
	t.Helper()
	done := make(chan bool, 1)
	go func() {
		finished := false
		defer func() { done <- finished }()
		ctx := context.Background()
		for step := 0; step < 10; step++ {
			out, err := harness.Step(ctx, c, eventID)
			if err != nil {
				return
			}
			if out.Status == release.OutcomeDeliveryReady {
				if _, err := c.Deliver(ctx, eventID); err != nil {
					return
				}
			}
		}
		finished = true
	}()
	if finished := <-done; finished {
		t.Fatal("the worker never crashed")
	}
}

func (e *releaseEnv) ingest(t *testing.T, c *release.Coordinator) {
	t.Helper()
	ctx := context.Background()
	for _, p := range e.plans {
		if _, _, err := c.Ingest(ctx, "localeflow.plan.accepted", e.srv.Fixture.Detail(p.PlanPayload())); err != nil {
			t.Fatal(err)
		}
		for _, j := range p.Jobs {
			if _, _, err := c.Ingest(ctx, "localeflow.job.completed", e.srv.Fixture.Detail(p.ResultPayload(j.TargetLocale, releasetest.ResultOptions{}))); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestReleaseCrashHoldingEvidenceLease: a coordinator claims an evidence
// request, gets the provider's answer and dies. The lease expires (wake
// index), the sweep re-enqueues the event, another coordinator reclaims
// the expired lease as a failed attempt, obtains evidence again, approves
// and delivers once.
func TestReleaseCrashHoldingEvidenceLease(t *testing.T) {
	e := newReleaseEnv(t, 17, 1, "de-DE")
	e.crashWith(t, func(d *release.Dependencies) { d.Evidence = &crashingEvidence{EvidenceProvider: d.Evidence} })
	e.ingest(t, e.c.Coordinator)
	runUntilCrash(t, e.c.Coordinator, e.plans[0].EventID)
	ctx := context.Background()
	snap, err := e.c.Coordinator.Store().Load(ctx, e.plans[0].EventID)
	if err != nil || len(snap.Evidence) != 1 {
		t.Fatalf("after the crash: %d evidence records, %v", len(snap.Evidence), err)
	}
	for _, ev := range snap.Evidence {
		if ev.Status != release.StateLeased || ev.Attempts != 1 {
			t.Fatalf("after the crash: evidence %+v", ev.Lease)
		}
	}
	second := e.stack.NewCoordinator(t, e.srv, e.clock, "coordinator-b", nil)
	second.ESM.SweepEvery = 500 * time.Millisecond
	if err := second.ESM.Run(ctx, 90*time.Second, e.allDelivered(ctx, e.plans)); err != nil {
		t.Fatal(err)
	}
	snap, err = e.c.Coordinator.Store().Load(ctx, e.plans[0].EventID)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range snap.Evidence {
		if ev.Status != release.StateSucceeded || ev.Attempts != 2 {
			t.Fatalf("evidence %+v, want succeeded on the 2nd attempt", ev.Lease)
		}
	}
	e.wantDeliveredOnce(t, e.plans)
	e.check(t)
}

// TestReleaseCrashAfterCMSAccepted: a coordinator sends the delivery, the
// CMS accepts it, and the coordinator dies before writing that. The
// delivery lease expires, the sweep re-enqueues it, the next attempt sends
// the same delivery id, the CMS dedupes it: one delivery, record succeeded.
func TestReleaseCrashAfterCMSAccepted(t *testing.T) {
	e := newReleaseEnv(t, 18, 1, "de-DE", "fr-FR")
	e.crashWith(t, func(d *release.Dependencies) { d.CMS = &crashingDelivery{DeliveryClient: d.CMS} })
	e.ingest(t, e.c.Coordinator)
	runUntilCrash(t, e.c.Coordinator, e.plans[0].EventID)
	ctx := context.Background()
	if _, _, _, bundles := e.srv.CMS.Stats(); len(bundles) != 1 {
		t.Fatalf("the CMS holds %d deliveries after the crash, want 1", len(bundles))
	}
	if e.stack.Delivered(ctx, e.plans[0].EventID) {
		t.Fatal("the crashed delivery was recorded")
	}
	second := e.stack.NewCoordinator(t, e.srv, e.clock, "coordinator-b", nil)
	second.ESM.SweepEvery = 500 * time.Millisecond
	if err := second.ESM.Run(ctx, 90*time.Second, e.allDelivered(ctx, e.plans)); err != nil {
		t.Fatal(err)
	}
	if _, _, duplicates, _ := e.srv.CMS.Stats(); duplicates != 1 {
		t.Fatalf("CMS duplicates %d, want 1 (the repeated delivery id)", duplicates)
	}
	e.wantDeliveredOnce(t, e.plans)
	e.check(t)
}
