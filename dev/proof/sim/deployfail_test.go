package sim

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/cryptotest"
	"testing/synctest"
	"time"

	"github.com/localeflow/localeflow/dev/logcapture"
	"github.com/localeflow/localeflow/topology"
)

// deployWorld is a seed's world with both functions deployed, nothing
// scripted: the deployment tests drive it by hand.
func deployWorld(t *testing.T, peers *Peers) (*World, *Monitor, *Release, *day2) {
	t.Helper()
	w := newWorld(1)
	w.faultsEnd = w.start // no injected faults
	log := &logcapture.Buffer{}
	bus := &Bus{w: w, rules: map[string]*Queue{}}
	quarantined := newQueue(w, topology.Queue{Logical: "QuarantineQueue", MaxReceiveCount: 1 << 30, BatchSize: 10}, "")
	mon, err := newMonitor(w, bus, log, quarantined)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := newRelease(w, bus, log, peers, quarantined)
	if err != nil {
		t.Fatal(err)
	}
	d := &day2{w: w, mon: mon, rel: rel, dep: defaultDeployment(w, peers.Fixture)}
	return w, mon, rel, d
}

// TestRefusedRedeployKeepsTheOldInstances: a redeploy whose configuration
// the coordinator's loader refuses (LOCALEFLOW_EVIDENCE_MAX_ATTEMPTS 0) is
// reported as a violation and leaves the serving instances in place, as a
// failed Lambda deployment keeps the old version: the schedule still runs
// on them. Before, the failed deploy left the function without instances
// and its next invocation panicked the process (invalid argument to
// IntN, function.go), after which no seed's summary was printed.
func TestRefusedRedeployKeepsTheOldInstances(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	cryptotest.SetGlobalRandom(t, 1)
	peers := NewPeers()
	defer peers.Close()
	synctest.Test(t, func(t *testing.T) {
		w, mon, rel, d := deployWorld(t, peers)
		before := len(rel.coordinators)
		d.dep.evidenceMaxAttempts = 0
		d.redeploy("evidence attempts 0")
		if len(w.violations) != 1 || !strings.Contains(w.violations[0], "the coordinator does not start after evidence attempts 0") {
			t.Fatalf("violations %q, want the refused coordinator deployment", w.violations)
		}
		if len(rel.fn.instances) != 2 || len(mon.fn.instances) != 2 {
			t.Fatalf("instances after the failed redeploy: coordinator %d, poller %d (want the 2 serving on)", len(rel.fn.instances), len(mon.fn.instances))
		}
		if len(rel.coordinators) != before {
			t.Fatalf("configurations %d → %d: the refused deployment was counted as deployed", before, len(rel.coordinators))
		}
		rel.sweep()
		mon.fn.schedule()
		w.loop(synctest.Wait, w.start.Add(time.Minute), func(time.Time) (bool, time.Time) { return false, time.Time{} }, func() bool { return true })
		ends := 0
		for _, s := range w.trace {
			if s.Call == "END" && s.Outcome == "returned" {
				ends++
			}
		}
		if ends != 2 || w.Stats.FailedColdStarts != 0 {
			t.Fatalf("%d sweeps returned, %d failed cold starts; want both sweeps served by the old instances", ends, w.Stats.FailedColdStarts)
		}
	})
}

// TestFunctionWithoutInstancesFailsItsColdStart: an invocation of a
// function left without instances fails as a failed cold start, traced
// and counted, and an SQS batch it was handed returns to its queue; the
// seed goes on (before: a panic, invalid argument to IntN).
func TestFunctionWithoutInstancesFailsItsColdStart(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	cryptotest.SetGlobalRandom(t, 1)
	peers := NewPeers()
	defer peers.Close()
	synctest.Test(t, func(t *testing.T) {
		w, mon, rel, _ := deployWorld(t, peers)
		rel.fn.instances, mon.fn.instances = nil, nil
		rel.sweep()
		mon.queue.put(`{"kind":"poll"}`, 0)
		if !mon.fn.poll(time.Now()) {
			t.Fatal("the mapping handed no batch to the poller")
		}
		w.loop(synctest.Wait, w.start.Add(time.Minute), func(time.Time) (bool, time.Time) { return false, time.Time{} }, func() bool { return true })
		var cold, failed int
		for _, s := range w.trace {
			switch {
			case strings.HasPrefix(s.Call, "COLD START ") && s.Outcome == "failed: no instance deployed":
				cold++
			case s.Call == "END" && strings.Contains(s.Outcome, "cold start failed"):
				failed++
			}
		}
		if cold != 2 || failed != 2 || w.Stats.FailedColdStarts != 2 {
			t.Fatalf("%d failed cold starts traced, %d invocations ended with the error, %d counted; want 2 each\n%v", cold, failed, w.Stats.FailedColdStarts, w.trace)
		}
		if mon.queue.empty() {
			t.Fatal("the batch of the failed cold start was taken off the queue")
		}
		if len(w.violations) != 0 {
			t.Fatalf("violations %q", w.violations)
		}
	})
}

// TestPanicFailsTheSeedNotTheProcess: a panic in an invocation and one on
// the scheduler's goroutine each become a violation of their seed; Run
// returns (the block goes on and prints its summary).
func TestPanicFailsTheSeedNotTheProcess(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(1)
		w.faultsEnd = w.start
		w.invoke("poller", "boom", time.Minute, skewClock{offset: &atomic.Int64{}}, func(context.Context) (any, error) {
			panic("handler bug")
		}, nil)
		w.loop(synctest.Wait, w.start.Add(time.Minute), func(time.Time) (bool, time.Time) { return false, time.Time{} }, func() bool { return true })
		if len(w.violations) != 1 || !strings.Contains(w.violations[0], "panic in invocation #1 (poller boom): handler bug at ") {
			t.Fatalf("violations %q, want the invocation's panic", w.violations)
		}
		if w.activeTotal() != 0 {
			t.Fatalf("%d invocations still running", w.activeTotal())
		}
	})
	// A nil Peers panics while the release side is set up, on Run's own
	// goroutine.
	var res Result
	synctest.Test(t, func(t *testing.T) {
		res = Run(7, Options{}, nil, synctest.Wait)
	})
	if res.Seed != 7 || len(res.Violations) != 1 || !strings.Contains(res.Violations[0], "panic: ") || !strings.Contains(res.Violations[0], "newRelease") {
		t.Fatalf("seed %d, violations %q: want seed 7 failed with the panic in newRelease", res.Seed, res.Violations)
	}
}
