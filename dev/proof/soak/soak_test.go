package soak

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/localeflow/localeflow/adapters/cms/cmstest"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/dev/proof/harness"
	"github.com/localeflow/localeflow/dev/proof/invariant"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// pollRate is polls per second until every change was final (done), or
// over the whole run (elapsed) when they never all were (done is 0).
func pollRate(polls int, done, elapsed time.Duration) float64 {
	if done <= 0 {
		done = elapsed
	}
	return float64(polls) / max(done, time.Millisecond).Seconds()
}

// parallel runs f(i) for i in [0,n) on workers goroutines.
func parallel(n, workers int, f func(i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// TestSoak: every change is answered processing, publishing, published;
// every 10th first gets a 503 (a retry with backoff). Every release has
// two locales. All must end terminal/delivered within the budget, with 0
// invariant violations.
func TestSoak(t *testing.T) {
	if os.Getenv("LOCALEFLOW_SOAK") != "1" {
		t.Skip("soak runs with LOCALEFLOW_SOAK=1 (make soak)")
	}
	changes := envInt("LOCALEFLOW_SOAK_CHANGES", 10000)
	releases := envInt("LOCALEFLOW_SOAK_RELEASES", 1000)
	budget, err := time.ParseDuration(os.Getenv("LOCALEFLOW_SOAK_BUDGET"))
	if err != nil {
		budget = 8 * time.Minute
	}
	stack := harness.NewStack(t, 99)
	life := harness.NewLifecycle(t)
	clock := harness.NewClock(1)
	pollers := make([]*harness.Poller, 8)
	for i := range pollers {
		pollers[i] = stack.NewPoller(t, life, clock, harness.FastMonitor(fmt.Sprintf("soak-poller-%d", i), time.Second, 5), nil)
		pollers[i].ESM.Visibility = 30
	}
	pollers[0].ESM.SweepEvery = 10 * time.Second // the schedule's sweep, on one instance
	relClock := harness.NewClock(40)
	srv := harness.NewReleaseServers(t, relClock)
	coords := make([]*harness.Coordinator, 2)
	for i := range coords {
		coords[i] = stack.NewCoordinator(t, srv, relClock, fmt.Sprintf("soak-coordinator-%d", i), nil)
		coords[i].ESM.Visibility = 30
	}
	coords[0].ESM.SweepEvery = 10 * time.Second

	ids := make([]string, changes)
	for i := range ids {
		ids[i] = fmt.Sprintf("evt-soak-%05d", i)
		steps := []cmstest.Step{cmstest.StatusStep("processing"), cmstest.StatusStep("publishing"), cmstest.StatusStep("published")}
		if i%10 == 0 {
			steps = append([]cmstest.Step{cmstest.HTTPStep(503)}, steps...)
		}
		life.PutChange(ids[i], steps...)
	}
	plans := make([]releasetest.PlanSpec, releases)
	for i := range plans {
		plans[i] = releasetest.NewPlan(fmt.Sprintf("evt-soakrel-%05d", i), "de-DE", "fr-FR")
	}
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	start := time.Now()
	var monitorDone, releaseDone time.Duration
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	// Producers: the dispatched events and the signed release inputs.
	wg.Add(2)
	go func() {
		defer wg.Done()
		errs <- parallel(changes, 8, func(i int) error { return stack.Dispatch(ctx, ids[i]) })
	}()
	go func() {
		defer wg.Done()
		errs <- parallel(releases, 4, func(i int) error { return stack.PublishRelease(ctx, srv.Fixture, plans[i]) })
	}()
	var finalOnce, deliveredOnce sync.Once
	var finished, deliveredAll atomic.Bool
	monitorFinal := func() bool {
		finalOnce.Do(func() {})
		if finished.Load() {
			return true
		}
		// Count through the monitor census would be cheaper; this is the
		// test's own unmetered read, done only when the queue is quiet.
		if stack.AllFinal(ctx, ids) {
			finished.Store(true)
			monitorDone = time.Since(start)
		}
		return finished.Load()
	}
	releasesDelivered := func() bool {
		deliveredOnce.Do(func() {})
		if deliveredAll.Load() {
			return true
		}
		for _, p := range plans {
			if !stack.Delivered(ctx, p.EventID) {
				return false
			}
		}
		deliveredAll.Store(true)
		releaseDone = time.Since(start)
		return true
	}
	for _, p := range pollers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- p.ESM.Run(ctx, budget, monitorFinal)
		}()
	}
	for _, c := range coords {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- c.ESM.Run(ctx, budget, releasesDelivered)
		}()
	}
	wg.Wait()
	close(errs)
	elapsed := time.Since(start)
	for err := range errs {
		if err != nil {
			t.Errorf("soak: %v", err)
		}
	}

	var latency, durations []time.Duration
	var polls, invocations, itemFailures, batchFailures int
	for _, p := range pollers {
		latency = append(latency, p.Latency.Values()...)
		st := p.ESM.Stats()
		invocations += st.Invocations
		itemFailures += st.ItemFailures
		batchFailures += st.BatchFailures
		durations = append(durations, st.Durations...)
	}
	polls = len(latency)
	var relInvocations, relFailures int
	for _, c := range coords {
		st := c.ESM.Stats()
		relInvocations += st.Invocations
		relFailures += st.ItemFailures + st.BatchFailures
	}
	snap := stack.Meter.Snapshot()
	t.Logf("SOAK changes=%d releases=%d elapsed=%s monitor_done=%s releases_done=%s", changes, releases, elapsed.Round(time.Millisecond), monitorDone.Round(time.Millisecond), releaseDone.Round(time.Millisecond))
	t.Logf("SOAK polls=%d polls_per_s=%.1f poll_p50=%s poll_p99=%s invocation_p50=%s invocation_p99=%s",
		polls, pollRate(polls, monitorDone, elapsed), percentile(latency, 0.50).Round(time.Microsecond*10), percentile(latency, 0.99).Round(time.Microsecond*10),
		percentile(durations, 0.5).Round(time.Millisecond), percentile(durations, 0.99).Round(time.Millisecond))
	t.Logf("SOAK poller_invocations=%d item_failures=%d batch_failures=%d coordinator_invocations=%d coordinator_failures=%d sdk_calls=%d sdk_attempts=%d sdk_retries=%d",
		invocations, itemFailures, batchFailures, relInvocations, relFailures, snap.Calls, snap.Attempts(), snap.Attempts()-snap.Calls)
	if t.Failed() {
		return
	}
	texts := make([]string, 0, changes+4*releases)
	for _, id := range ids {
		texts = append(texts, harness.ChangeText(id))
	}
	for _, p := range plans {
		texts = append(texts, harness.ReleaseTexts(p)...)
	}
	rep := stack.Check(t, invariant.Options{Texts: texts, Delivered: srv.Delivered(), ApprovalKey: srv.ApprovalKey(), MaxPollAttempts: 4})
	t.Logf("SOAK invariants: %d monitor records %v, %d release items, deliveries %v, 0 violations",
		rep.MonitorItems, rep.MonitorStates, rep.ReleaseItems, rep.DeliveryStates)
	if rep.MonitorStates[monitor.StateTerminal] != changes || rep.DeliveryStates["succeeded"] != releases {
		t.Fatalf("not everything finished: %v %v", rep.MonitorStates, rep.DeliveryStates)
	}
}
