package fault

import (
	"context"
	"testing"
	"time"

	"github.com/localeflow/localeflow/adapters/cms/cmstest"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/dev/proof/harness"
	"github.com/localeflow/localeflow/dev/proof/invariant"
)

// TestPollThatOutlivesItsLeaseWithoutSweep is the cost benchmark's hang
// under load, made deterministic: the first poll of a change stalls
// between its claim and its finishing write for longer than the lease (the
// clock jumps past the lease while the CMS answer is on its way), so the
// write is refused with lease_expired. No sweep runs: the queue alone must
// carry the change to its end. Before the fix the poller quarantined and
// acknowledged the message and the change stayed leased for ever.
func TestPollThatOutlivesItsLeaseWithoutSweep(t *testing.T) {
	e := newMonitorEnv(t, 7, 5)
	e.p.ESM.SweepEvery = 0
	ctx := context.Background()
	const id = "evt-lostlease-000"
	first := cmstest.StatusStep("processing")
	first.Delay = 500 * time.Millisecond
	e.life.PutChange(id, first, cmstest.StatusStep("published"))
	stalled := make(chan struct{})
	go func() {
		defer close(stalled)
		if harness.Eventually(ctx, 30*time.Second, func() bool { return len(e.life.RequestsFor(id)) > 0 }) {
			e.clock.Step(harness.FastMonitor("x", time.Second, 1).Lease + time.Second)
		}
	}()
	if err := e.stack.Dispatch(ctx, id); err != nil {
		t.Fatal(err)
	}
	e.run(t, []string{id}, 60*time.Second)
	<-stalled
	// Two claims (the stalled poll, the retry after the reclaim) and two
	// CMS reads.
	e.wantFinal(t, []string{id}, monitor.StateTerminal, "published", 2, 2)
	e.stack.Check(t, invariant.Options{Texts: texts([]string{id}), MaxPollAttempts: 2})
}
