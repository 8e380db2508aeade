package harness

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/dev/proof/meter"
	"github.com/localeflow/localeflow/topology"
)

// SweepPeriod is the poller's scheduled sweep period in a harness whose
// clock runs speed times faster than the wall clock (NewClock): the
// deployed schedule's rate (1 min) of that clock. The schedule is fixed in
// time, whatever the poll interval: a harness that polls every second
// still sweeps once a minute, as a deployment configured so would.
func SweepPeriod(speed int) time.Duration {
	rate := time.Minute
	for _, s := range topology.New("harness").Schedules {
		if s.Function == "poller" {
			rate = time.Duration(s.RateMinutes) * time.Minute
		}
	}
	return rate / time.Duration(max(1, speed))
}

// Sweeper is the poller's scheduled sweep, run as deployment runs it (one
// invocation per period, with the function's timeout) on its own clients,
// counted by its own Meter so the polls of the queue path keep their
// figures.
type Sweeper struct {
	*Poller
	Meter *meter.Meter

	mu    sync.Mutex
	stats SweeperStats
}

// SweeperStats sums what the sweeps did.
type SweeperStats struct {
	Sweeps, Errors int
	// Listed, Polled and Skipped add up the sweeps' results (handler
	// SweepResult).
	Listed, Polled, Skipped int
	Durations               []time.Duration
}

// NewSweeper wires a poller instance for the scheduled sweep on clients
// counted by a meter of its own.
func (s *Stack) NewSweeper(t testing.TB, life *Lifecycle, clock core.Clock, cfg monitor.Config, log io.Writer) *Sweeper {
	t.Helper()
	m := meter.New()
	return &Sweeper{Poller: s.newPoller(t, s.MeteredClients(m), life, clock, cfg, log), Meter: m}
}

// Start runs a sweep every period until the returned stop is called (stop
// waits for a sweep in progress).
func (sw *Sweeper) Start(ctx context.Context, period time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				sw.Once(ctx)
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// Once runs one sweep invocation (deadline: the poller's timeout).
func (sw *Sweeper) Once(ctx context.Context) {
	ictx, cancel := context.WithTimeout(ctx, topology.PollerTimeoutSeconds*time.Second)
	defer cancel()
	start := time.Now()
	res, err := sw.Handler.Sweep(ictx)
	d := time.Since(start)
	sw.mu.Lock()
	defer sw.mu.Unlock()
	sw.stats.Sweeps++
	if err != nil {
		sw.stats.Errors++
	}
	sw.stats.Listed += res.Listed
	sw.stats.Polled += res.Polled
	sw.stats.Skipped += res.Skipped
	sw.stats.Durations = append(sw.stats.Durations, d)
}

// Stats returns a copy of the sums.
func (sw *Sweeper) Stats() SweeperStats {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	s := sw.stats
	s.Durations = append([]time.Duration(nil), sw.stats.Durations...)
	return s
}
