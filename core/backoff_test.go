package core_test

import (
	"math"
	"testing"
	"time"

	"github.com/localeflow/localeflow/core"
)

// TestBackoffSchedules checks the one backoff function against the three
// schedules that use it: the monitor's (5 s..300 s), the evidence and
// delivery leases' (5 s..3600 s) and health's BatchGetItem retry
// (50 ms..3.2 s), with the edges (attempt 0 and below, overflow).
func TestBackoffSchedules(t *testing.T) {
	tests := []struct {
		name          string
		base, maximum time.Duration
		attempt       int
		want          time.Duration
	}{
		{"monitor", 5 * time.Second, 300 * time.Second, 1, 5 * time.Second},
		{"monitor", 5 * time.Second, 300 * time.Second, 2, 10 * time.Second},
		{"monitor", 5 * time.Second, 300 * time.Second, 6, 160 * time.Second},
		{"monitor", 5 * time.Second, 300 * time.Second, 7, 300 * time.Second},
		{"lease", 5 * time.Second, time.Hour, 0, 5 * time.Second},
		{"lease", 5 * time.Second, time.Hour, -3, 5 * time.Second},
		{"lease", 5 * time.Second, time.Hour, 10, 2560 * time.Second},
		{"lease", 5 * time.Second, time.Hour, 11, time.Hour},
		{"lease", 5 * time.Second, time.Hour, math.MaxInt, time.Hour},
		{"census", 50 * time.Millisecond, 3200 * time.Millisecond, 1, 50 * time.Millisecond},
		{"census", 50 * time.Millisecond, 3200 * time.Millisecond, 7, 3200 * time.Millisecond},
		{"overflow", 86_400 * time.Second, 86_400 * time.Second, 40, 86_400 * time.Second},
		{"overflow", time.Duration(1) << 62, time.Duration(math.MaxInt64), 3, time.Duration(math.MaxInt64)},
	}
	for _, tt := range tests {
		if got := core.Backoff(tt.attempt, tt.base, tt.maximum); got != tt.want {
			t.Errorf("%s: Backoff(%d, %v, %v) = %v, want %v", tt.name, tt.attempt, tt.base, tt.maximum, got, tt.want)
		}
	}
}
