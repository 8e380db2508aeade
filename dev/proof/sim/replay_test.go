package sim

import (
	"strings"
	"testing"
)

// TestReplayNamesTheBlock: a failing seed's replay command reruns it in
// the block it failed in. The adapters block's command once omitted
// ADAPTERS=1, so it replayed the seed on the memory stores, where it
// passed.
func TestReplayNamesTheBlock(t *testing.T) {
	for _, c := range []struct {
		res  Result
		want string
	}{
		{Result{Seed: 535, Adapters: true}, "replay: make sim START=535 SEEDS=1 VERBOSE=1 ADAPTERS=1\n"},
		{Result{Seed: 7}, "replay: make sim START=7 SEEDS=1 VERBOSE=1\n"},
		{Result{Seed: 9, Day2: []string{"op"}, Day2Kinds: []string{"redrive", "key-reload"}}, "replay: make sim START=9 SEEDS=1 VERBOSE=1 DAY2=redrive,key-reload\n"},
	} {
		report := c.res.Report()
		if !strings.Contains(report, c.want) {
			t.Errorf("seed %d: report\n%s\nlacks %q", c.res.Seed, report, c.want)
		}
		if !c.res.Adapters && strings.Contains(report, "ADAPTERS=1") {
			t.Errorf("seed %d of the default block: report names ADAPTERS=1:\n%s", c.res.Seed, report)
		}
	}
}
