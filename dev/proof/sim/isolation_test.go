package sim

import (
	"fmt"
	"reflect"
	"testing"
)

// TestSeedsIndependentOfOrder: a seed's Result depends only on (seed,
// options). Each seed runs first in this test, then again after a block
// of other seeds ran in the same process; the two runs must agree on
// every step of the trace, every violation and every count. Package state
// that one seed leaves for the next (a producer key, a cache, a shared
// fixture) breaks this, and so the replay of a seed found in a long run.
func TestSeedsIndependentOfOrder(t *testing.T) {
	day2 := Options{Day2: Day2Default()}
	// Seeds 4, 10 and 17 get day-2 operations (one seed in Day2Every):
	// every default kind, the event key rotation alone (it switches the
	// producers' key, package state that Run resets), redeploys and
	// configuration changes.
	cases := []struct {
		seed uint64
		opts Options
	}{
		{3, Options{}},
		{7, Options{}},
		{5, Options{Adapters: true}},
		{4, day2},
		// Two approvals awaiting delivery at once: their clearing writes
		// once followed the approvals map's random order.
		{2, day2},
		{10, Options{Day2: []string{Day2EventKey}}},
		{17, Options{Day2: []string{Day2Redeploy, Day2Config}}},
	}
	first := make([]Result, len(cases))
	for i, c := range cases {
		first[i] = runSeedWith(t, c.seed, c.opts)
	}
	// Other seeds, with and without day-2 operations (21 and 30 get
	// them), in between.
	for seed := uint64(20); seed < 32; seed++ {
		runSeedWith(t, seed, day2)
	}
	for i := len(cases) - 1; i >= 0; i-- {
		c := cases[i]
		again := runSeedWith(t, c.seed, c.opts)
		if c.opts.Day2 != nil && len(again.Day2) == 0 {
			t.Errorf("seed %d got no day-2 operations", c.seed)
		}
		if d := resultDiff(first[i], again); d != "" {
			t.Errorf("seed %d (day-2 %v, adapters %v) differs after other seeds ran: %s", c.seed, c.opts.Day2 != nil, c.opts.Adapters, d)
		}
	}
}

// resultDiff names the first difference of two results ("" if none).
func resultDiff(a, b Result) string {
	for i := range min(len(a.Trace), len(b.Trace)) {
		if a.Trace[i] != b.Trace[i] {
			return fmt.Sprintf("step %d:\n  %s\n  %s", i, a.Trace[i], b.Trace[i])
		}
	}
	if len(a.Trace) != len(b.Trace) {
		return fmt.Sprintf("traces of %d and %d steps", len(a.Trace), len(b.Trace))
	}
	if !reflect.DeepEqual(a.Violations, b.Violations) {
		return fmt.Sprintf("violations %q and %q", a.Violations, b.Violations)
	}
	if !reflect.DeepEqual(a.Stats, b.Stats) {
		return fmt.Sprintf("stats %+v and %+v", a.Stats, b.Stats)
	}
	if a.Events != b.Events || a.Calls != b.Calls || !reflect.DeepEqual(a.Day2, b.Day2) || !reflect.DeepEqual(a.Faults, b.Faults) {
		return fmt.Sprintf("events %d/%d, calls %d/%d, day-2 %q/%q", a.Events, b.Events, a.Calls, b.Calls, a.Day2, b.Day2)
	}
	if !reflect.DeepEqual(a.Coordinators, b.Coordinators) {
		return "coordinator configurations differ"
	}
	return ""
}
