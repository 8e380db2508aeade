package harness

import (
	"testing"
	"time"
)

// The harness sweep runs at the deployed schedule's rate of the harness
// clock.
func TestSweepPeriodIsTheScheduleRateOfTheHarnessClock(t *testing.T) {
	if got := SweepPeriod(1); got != time.Minute {
		t.Fatalf("at the wall clock's speed: %s, want the schedule's 1m", got)
	}
	if got := SweepPeriod(40); got != 1500*time.Millisecond {
		t.Fatalf("at 40 x: %s, want 1.5s", got)
	}
}
