package harness

import (
	"testing"
	"time"

	"github.com/localeflow/localeflow/core/monitor"
)

// The harness sweep runs as often, relative to the poll interval, as the
// deployed schedule does relative to the default poll interval.
func TestSweepPeriodScalesTheScheduleLikeThePollInterval(t *testing.T) {
	if got := SweepPeriod(monitor.DefaultPollInterval); got != time.Minute {
		t.Fatalf("at the default poll interval: %s, want the schedule's 1m", got)
	}
	if got := SweepPeriod(time.Second); got != 2*time.Second {
		t.Fatalf("at a 1 s poll interval: %s, want 2s", got)
	}
}
