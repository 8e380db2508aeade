package sim

import (
	"flag"
	"fmt"
	"testing"
	"time"
)

var (
	flagAdapters = flag.Bool("sim.adapters", false, "run TestSimSeeds on the real DynamoDB adapters over the in-memory DynamoDB (make sim ADAPTERS=1)")
	flagAStart   = flag.Uint64("sim.adapters.start", 1, "first seed of TestSimAdapterSeeds")
	flagASeeds   = flag.Int("sim.adapters.seeds", adapterBlock, "seeds of TestSimAdapterSeeds")
)

// adapterBlock is the default block of seeds run on the adapters in make
// test (go test ./...).
const adapterBlock = 100

// TestSimAdapterSeeds runs a block of seeds on the real DynamoDB adapters
// (adapters/monitordb, adapters/releasedb: shards, cursors, condition
// expressions, sparse indexes, pagination, transactions) over the
// in-memory DynamoDB (dev/dynamofake), every SDK call a call boundary.
// The histories differ from TestSimSeeds' for the same seed (more call
// boundaries, SDK-level faults).
func TestSimAdapterSeeds(t *testing.T) {
	if seedsGiven() && !adapterSeedsGiven() {
		t.Skip("a block of TestSimSeeds was asked for")
	}
	start := time.Now()
	var failed []uint64
	var stats Stats
	for seed := *flagAStart; seed < *flagAStart+uint64(*flagASeeds); seed++ {
		res := runSeedWith(t, seed, Options{Adapters: true, Strict: *flagStrict})
		stats.add(res.Stats)
		if *flagVerbose {
			for _, s := range res.Trace {
				t.Log(s.String())
			}
		}
		if len(res.Violations) > 0 {
			failed = append(failed, seed)
			if len(failed) <= *flagReports {
				t.Errorf("on the adapters (replay: go test ./dev/proof/sim -run '^TestSimAdapterSeeds$' -sim.adapters.start=%d -sim.adapters.seeds=1 -sim.verbose, or make sim ADAPTERS=1 START=%d SEEDS=1 VERBOSE=1):\n%s", seed, seed, res.Report())
			} else {
				for _, v := range res.Violations {
					t.Errorf("seed %d (adapters): %s", seed, v)
				}
			}
		}
	}
	if len(failed) > 0 {
		t.Errorf("%d of %d seeds failed on the adapters: %v", len(failed), *flagASeeds, head(failed, 50))
	}
	report := fmt.Sprintf("%d seeds from %d on the adapters, %d failed, %s; stale finishing writes refused %d, reclaims %d, most events of one outcome %d",
		*flagASeeds, *flagAStart, len(failed), time.Since(start).Round(time.Millisecond), stats.StaleRefused, stats.Reclaims, stats.MaxEvents)
	for fix := range pendingFixes {
		if n := stats.Pending[fix]; n > 0 {
			report += fmt.Sprintf("; PENDING %s: %d findings counted, not failed", fix, n)
		}
	}
	fmt.Println("sim: " + report)
	t.Log(report)
}

func adapterSeedsGiven() bool {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "sim.adapters.seeds" })
	return given
}

// TestSimAdaptersReplayExactly: a seed on the adapters replays call for
// call too (the adapters' parallel shard reads are ordered by the
// scheduler, not by goroutine timing).
func TestSimAdaptersReplayExactly(t *testing.T) {
	for _, seed := range []uint64{3, 29} {
		a, b := runSeedWith(t, seed, Options{Adapters: true}), runSeedWith(t, seed, Options{Adapters: true})
		if len(a.Trace) == 0 || len(a.Trace) != len(b.Trace) {
			t.Fatalf("seed %d: traces of %d and %d steps", seed, len(a.Trace), len(b.Trace))
		}
		for i := range a.Trace {
			if a.Trace[i] != b.Trace[i] {
				t.Fatalf("seed %d: step %d differs:\n%s\n%s", seed, i, a.Trace[i], b.Trace[i])
			}
		}
	}
}
