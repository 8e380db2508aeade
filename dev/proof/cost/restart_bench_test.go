package cost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/dev/proof/harness"
	"github.com/localeflow/localeflow/dev/proof/invariant"
)

// BenchmarkReleaseEventsWithRestart counts the output events (EventBridge
// PutEvents entries the coordinator makes) of one release of
// LOCALEFLOW_COST_RESTART_LOCALES locales (default 30) during which the
// coordinator restarts once: the LOCALEFLOW_COST_RESTART_AT-th invocation
// (default 2: mid-release since named steps and compact approvals cut a
// 30-locale release to about 4 invocations; 6 before) does its work but its execution environment
// dies before the event source mapping deletes the batch, so every message
// of that batch comes back (receive count 2) to a new coordinator
// instance, which handles everything from then on. The minimum is one
// release.approved per locale plus delivery.ready and delivery.delivered;
// the target (issue 25) is at most 2 × (locales + deliveries).
func BenchmarkReleaseEventsWithRestart(b *testing.B) {
	locales := envInt("LOCALEFLOW_COST_RESTART_LOCALES", 30)
	restartAt := envInt("LOCALEFLOW_COST_RESTART_AT", 2)
	stack := harness.NewStack(b, 3)
	clock := harness.NewClock(40)
	srv := harness.NewReleaseServers(b, clock)
	first := stack.NewCoordinator(b, srv, clock, "restart-1", nil)
	second := stack.NewCoordinator(b, srv, clock, "restart-2", nil)
	var (
		mu          sync.Mutex
		invocations int
		restarted   bool
		restartedAt time.Time
		returned    int // messages handled again after the restart
	)
	esm := first.ESM
	esm.Visibility = 10
	esm.Handle = func(ctx context.Context, payload json.RawMessage) (any, error) {
		mu.Lock()
		invocations++
		n, after := invocations, restarted
		mu.Unlock()
		if after {
			var batch struct {
				Records []struct {
					Attributes map[string]string `json:"attributes"`
				} `json:"Records"`
			}
			_ = json.Unmarshal(payload, &batch)
			for _, r := range batch.Records {
				if r.Attributes["ApproximateReceiveCount"] > "1" {
					mu.Lock()
					returned++
					mu.Unlock()
				}
			}
			return second.Handler.Handle(ctx, payload)
		}
		res, err := first.Handler.Handle(ctx, payload)
		if n == restartAt {
			mu.Lock()
			restarted, restartedAt = true, time.Now()
			mu.Unlock()
			return nil, errors.New("restart: the execution environment died before the batch was deleted")
		}
		return res, err
	}
	ctx := context.Background()
	var ls []string
	for i := range locales {
		ls = append(ls, fmt.Sprintf("x%02d-ZZ", i))
	}
	b.ResetTimer()
	var events int64
	for iter := 0; iter < b.N; iter++ {
		p := releasetest.NewPlan(fmt.Sprintf("evt-restart-%d", iter), ls...)
		if err := stack.PublishRelease(ctx, srv.Fixture, p); err != nil {
			b.Fatal(err)
		}
		// Only the coordinator's own events count, not the inputs.
		stack.Meter.Reset()
		// Done once delivered and the lost batch came back (its
		// visibility ran out) and was handled.
		done := func() bool {
			mu.Lock()
			if !restarted {
				// Delivered before the restart's invocation: the run ends
				// and fails below (a later LOCALEFLOW_COST_RESTART_AT is
				// not mid-release) instead of waiting out the deadline.
				mu.Unlock()
				return stack.Delivered(ctx, p.EventID)
			}
			// (or 3 minutes passed: the check below then fails the run).
			back := restarted && time.Since(restartedAt) > time.Duration(esm.Visibility+3)*time.Second &&
				(returned > 0 || time.Since(restartedAt) > 3*time.Minute)
			mu.Unlock()
			return back && stack.Delivered(ctx, p.EventID)
		}
		if err := esm.Run(ctx, 15*time.Minute, done); err != nil {
			b.Fatal(err)
		}
		events += stack.Meter.Snapshot().Events
		texts := harness.ReleaseTexts(p)
		stack.Check(b, invariant.Options{Texts: texts, Delivered: srv.Delivered(), ApprovalKey: srv.ApprovalKey()})
	}
	b.StopTimer()
	st := esm.Stats()
	perRelease := float64(events) / float64(b.N)
	b.ReportMetric(perRelease, "events/release")
	b.ReportMetric(float64(2*(locales+1)), "target-events/release")
	b.Logf("%d locales, restart at invocation %d (restarted %v): %.0f events per release (minimum %d, target <= %d); invocations %d, batch failures %d, messages %d (%d handled again after the restart)",
		locales, restartAt, restarted, perRelease, locales+2, 2*(locales+1), st.Invocations, st.BatchFailures, st.Messages, returned)
	if !restarted || returned == 0 {
		b.Fatalf("no message came back after the restart (restarted %v)", restarted)
	}
}
