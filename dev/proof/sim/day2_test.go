package sim

import (
	"flag"
	"sort"
	"strings"
	"testing"
)

var flagDay2 = flag.String("sim.day2", "default",
	"day-2 operation kinds of TestSimSeeds: default, all, none or a comma separated list ("+strings.Join(Day2Kinds, ", ")+")")

// seedOptions are TestSimSeeds' options: the day-2 kinds of -sim.day2.
// The kinds that are off by default are reported (a counted exception
// each, with the finding that keeps it off), never left out silently.
func seedOptions(t *testing.T) Options {
	t.Helper()
	kinds, err := ParseDay2(*flagDay2)
	if err != nil {
		t.Fatal(err)
	}
	var off []string
	for k, why := range Day2Blocked {
		if !containsString(kinds, k) {
			off = append(off, k+": "+why)
		}
	}
	sort.Strings(off)
	t.Logf("day-2 kinds on (one seed in %d): %s", Day2Every, strings.Join(kinds, ", "))
	t.Logf("day-2 kinds off: %d", len(off))
	for _, o := range off {
		t.Logf("  off: %s", o)
	}
	return Options{Day2: kinds}
}

func containsString(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
