package core_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/localeflow/localeflow/core"
)

// TestJitterBoundsAndDeterminism: the monitor's backoff had no jitter, so
// every change that failed at the start of an outage retried at the same
// instants. Jitter spreads d over [d, d + ⌊d/2⌋] ms (never below d: the
// documented backoff stays a floor), the same for the same (key, attempt),
// different across keys.
func TestJitterBoundsAndDeterminism(t *testing.T) {
	for _, d := range []time.Duration{2 * time.Millisecond, 5 * time.Second, 40 * time.Second, 300 * time.Second, 86_400 * time.Second} {
		hi := core.JitterCeil(d)
		if hi != d+d/2/time.Millisecond*time.Millisecond {
			t.Errorf("ceiling of %s = %s", d, hi)
		}
		seen := map[time.Duration]bool{}
		for i := range 2000 {
			key := fmt.Sprintf("evt-%d", i)
			j := core.Jitter(d, key, 3)
			if j < d || j > hi || j%time.Millisecond != 0 {
				t.Fatalf("Jitter(%s, %s) = %s, outside [%s, %s]", d, key, j, d, hi)
			}
			if core.Jitter(d, key, 3) != j {
				t.Fatalf("Jitter(%s, %s) not deterministic", d, key)
			}
			seen[j] = true
		}
		if d >= time.Second && len(seen) < 1000 {
			t.Errorf("Jitter(%s) over 2000 keys took only %d values", d, len(seen))
		}
	}
	if core.Jitter(5*time.Second, "evt-1", 1) == core.Jitter(5*time.Second, "evt-1", 2) &&
		core.Jitter(10*time.Second, "evt-1", 1) == core.Jitter(10*time.Second, "evt-1", 2) {
		t.Error("the attempt does not change the draw")
	}
	if core.Jitter(time.Millisecond, "k", 1) != time.Millisecond || core.Jitter(0, "k", 1) != 0 {
		t.Error("delays below 2 ms are not jittered")
	}
}
