package health

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
)

// MonitorCensus reads the monitor records that can wake or need attention
// (monitor.Store.Census: adapters/monitordb.Store implements it).
type MonitorCensus interface {
	Census(ctx context.Context) ([]monitor.Record, error)
}

// ItemCounter reports a table's approximate item count.
type ItemCounter interface {
	ItemCount(ctx context.Context) (int64, error)
}

// ReleaseCensus reads the evidence and delivery records that can wake or
// need attention (adapters/opsdb.ReleaseReader).
type ReleaseCensus interface {
	ReleaseCensus(ctx context.Context) ([]ReleaseRecord, error)
}

// Checker runs health checks. It only reads.
type Checker struct {
	monitor MonitorCensus
	items   ItemCounter
	release ReleaseCensus
	clock   core.Clock
	log     *slog.Logger
	limits  Limits
}

// NewChecker returns a Checker. items may be nil (counts.terminal is then
// a lower bound); a nil logger discards logs.
func NewChecker(m MonitorCensus, items ItemCounter, r ReleaseCensus, clock core.Clock, log *slog.Logger) (*Checker, error) {
	if m == nil || r == nil || clock == nil {
		return nil, errors.New("health: NewChecker needs the monitor and release readers and a clock")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Checker{monitor: m, items: items, release: r, clock: clock, log: log, limits: DefaultLimits()}, nil
}

// WithLimits sets the age limits (DefaultLimits unless set); invalid
// limits are an error with CodeLimitsInvalid.
func (c *Checker) WithLimits(l Limits) (*Checker, error) {
	if err := l.Validate(); err != nil {
		return nil, core.Wrap(CodeLimitsInvalid, false, err)
	}
	c.limits = l
	return c, nil
}

// Check reads both tables (concurrently) and evaluates them. A table that
// cannot be read is an error with CodeUnavailable (retryable): health that
// cannot look is not "ok".
func (c *Checker) Check(ctx context.Context) (Report, error) {
	now := core.Millis(c.clock.Now())
	if !core.ValidMillis(now) {
		return Report{}, core.Fail(monitor.CodeTimeInvalid)
	}
	census := Census{MonitorItemCount: -1}
	var wg sync.WaitGroup
	var merr, rerr, cerr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		census.Monitor, merr = c.monitor.Census(ctx)
	}()
	go func() {
		defer wg.Done()
		census.Release, rerr = c.release.ReleaseCensus(ctx)
	}()
	if c.items != nil {
		n, err := c.items.ItemCount(ctx)
		census.MonitorItemCount, cerr = n, err
		if err != nil {
			census.MonitorItemCount = -1
		}
	}
	wg.Wait()
	if merr != nil {
		return Report{}, core.Wrap(CodeUnavailable, true, fmt.Errorf("health: monitor census: %w", merr))
	}
	if rerr != nil {
		return Report{}, core.Wrap(CodeUnavailable, true, fmt.Errorf("health: release census: %w", rerr))
	}
	if cerr != nil {
		c.log.WarnContext(ctx, "health terminal count unavailable", "code", CodeTerminalCountUnavailable, "cause", core.CodeOf(cerr))
	}
	r := EvaluateWith(now, census, c.limits)
	for _, it := range r.Items {
		if it.Invalid {
			c.log.ErrorContext(ctx, "health record invalid", "kind", it.Kind, "event_id", it.EventID, "key", it.Key, "code", it.ErrorCode)
		}
	}
	level := slog.LevelInfo
	if r.Status == StatusBlocked {
		level = slog.LevelWarn
	}
	c.log.Log(ctx, level, "health checked", "status", r.Status, "reasons", r.Reasons,
		"monitor_open", len(census.Monitor), "release_open", len(census.Release),
		"due", r.Monitor.Due, "failed", r.Monitor.Failed, "remote_failures", r.Monitor.RemoteFailures,
		"oldest_open_change", r.Ages.OldestOpenChange, "oldest_open_change_s", r.Ages.OldestOpenChangeMS/1000,
		"oldest_open_release", r.Ages.OldestOpenRelease, "oldest_open_release_s", r.Ages.OldestOpenReleaseMS/1000,
		"expiring_unfinished", r.Ages.ExpiringUnfinished)
	return r, nil
}
