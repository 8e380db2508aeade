package sim

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/localeflow/localeflow/adapters/delayqueue"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/dev/logcapture"
	"github.com/localeflow/localeflow/topology"
)

// Options shape one run.
type Options struct {
	// FaultWindow is how long faults are injected from the start; the
	// world then runs fault-free for Recovery before the checks.
	FaultWindow time.Duration
	Recovery    time.Duration
	// Changes is the number of changes (0: 3..8 drawn from the seed).
	Changes int
	// Adapters runs the real DynamoDB adapters on the in-memory DynamoDB
	// instead of the memory stores (adapters.go).
	Adapters bool
	// Strict makes every finding of a check pending a fix a violation
	// (pendingFixes).
	Strict bool
	// Day2 lists the day-2 operation kinds (day2.go) a seed may get; one
	// seed in Day2Every gets them.
	Day2 []string
}

func (o Options) withDefaults() Options {
	if o.FaultWindow == 0 {
		o.FaultWindow = 20 * time.Minute
	}
	if o.Recovery == 0 {
		o.Recovery = 2 * time.Hour
	}
	return o
}

// Result is one seed's history and verdict.
type Result struct {
	Seed       uint64
	Faults     Faults
	Violations []string
	Trace      []Step
	Events     int
	Calls      int
	Stats      Stats
	// Day2 lists the day-2 operations applied (nil: none), under the
	// kinds Day2Kinds.
	Day2      []string
	Day2Kinds []string
	// Coordinators are the configurations the run's coordinators were
	// built with (the latest deployment's last; coordinatorconfig.
	// DeployedRelease with the seed's settings).
	Coordinators []release.Config
	// Adapters says the seed ran on the DynamoDB adapters (the adapters
	// block): its replay command needs ADAPTERS=1.
	Adapters bool
}

// Run simulates one seed. It must run inside a synctest bubble (wait is
// synctest.Wait): the bubble's clock is the virtual clock and wait tells
// the scheduler that every goroutine is parked at a call boundary.
//
// A panic inside the seed (the simulator's or the product's, on the
// scheduler's goroutine or in an invocation) fails this seed with a
// violation naming it; the process and the block go on.
func Run(seed uint64, opts Options, peers *Peers, wait func()) (res Result) {
	opts = opts.withDefaults()
	w := newWorld(seed)
	defer func() {
		if p := recover(); p != nil {
			res = w.panicked(p, wait)
			res.Seed, res.Adapters = seed, opts.Adapters
		}
	}()
	w.strict = opts.Strict
	w.faultsEnd = w.start.Add(opts.FaultWindow)
	if opts.Adapters {
		// The day-2 operations delete expired items from the memory
		// stores (TTL): a block on the adapters runs without them.
		opts.Day2 = nil
		w.useAdapters()
	}
	producerKey = eventKey
	w.day2 = newDay2(w, opts.Day2)
	until := w.faultsEnd.Add(opts.Recovery)
	log := &logcapture.Buffer{}
	bus := &Bus{w: w, rules: map[string]*Queue{}}
	// The quarantine queue of rejected inputs: nothing drains it; an
	// operator lists and replays it.
	quarantined := newQueue(w, topology.Queue{Logical: "QuarantineQueue", MaxReceiveCount: 1 << 30, BatchSize: 10}, "")
	mon, err := newMonitor(w, bus, log, quarantined)
	if err != nil {
		return Result{Seed: seed, Adapters: opts.Adapters, Violations: []string{"setup: " + err.Error()}}
	}
	n := opts.Changes
	if n == 0 {
		n = 3 + w.rng.IntN(6)
	}
	mon.script(n, opts.FaultWindow*3/4)
	rel, err := newRelease(w, bus, log, peers, quarantined)
	if err != nil {
		return Result{Seed: seed, Adapters: opts.Adapters, Violations: []string{"setup: " + err.Error()}}
	}
	rel.script(1+w.rng.IntN(3), opts.FaultWindow*3/4)
	if w.day2 != nil {
		w.day2.attach(mon, rel, opts.FaultWindow)
	}
	w.every(time.Minute, until, "schedule poller sweep", mon.fn.schedule)
	w.every(5*time.Minute, until, "schedule release sweep", rel.sweep)
	poll := func(now time.Time) (bool, time.Time) {
		started := mon.fn.poll(now)
		started = rel.fn.poll(now) || started
		next, _ := mon.queue.nextVisible()
		if t, ok := rel.queue.nextVisible(); ok && (next.IsZero() || t.Before(next)) {
			next = t
		}
		return started, next
	}
	settled := func() bool {
		return mon.queue.empty() && rel.queue.empty() && w.settledBy(func() { endChecks(w, mon, rel) })
	}
	w.loop(wait, until, poll, settled)
	// A release (or a change) still honouring a peer's capped Retry-After runs on until
	// that wait is over and a hop has run it (peerRetryAfterWake); each
	// round needs a new capped answer, and the peers' scripted failures
	// are few, so the rounds are bounded.
	for range 4 {
		at, ok := rel.peerRetryAfterWake(context.Background())
		if mt, mok := mon.peerRetryAfterWake(context.Background()); mok && (!ok || mt.After(at)) {
			at, ok = mt, true
		}
		if !ok || len(w.violations) > 0 {
			break
		}
		w.loop(wait, at.Add(2*delayqueue.MaxDelay), poll, settled)
	}
	if w.day2 != nil {
		w.day2.weeks(wait, poll, settled)
	}
	endChecks(w, mon, rel)
	if w.day2 != nil {
		w.day2.check(log.String())
	}
	checkContentFree(w, log.String())
	checkHintCodes(w, log.String())
	calls := 0
	for _, s := range w.trace {
		if s.Inv != 0 {
			calls++
		}
	}
	res = Result{Seed: seed, Adapters: opts.Adapters, Faults: w.Faults, Violations: w.violations, Trace: w.trace, Events: len(bus.Events), Calls: calls, Stats: w.Stats,
		Coordinators: rel.coordinators}
	if w.day2 != nil {
		res.Day2, res.Day2Kinds = w.day2.ops, opts.Day2
	}
	return res
}

// panicked is the result of a seed whose scheduler goroutine panicked: the
// panic as a violation, every invocation still running ended (abort), the
// trace so far.
func (w *World) panicked(p any, wait func()) Result {
	w.violate("panic: %v at %s (the seed ended here)", p, panicSite())
	func() {
		// The world may be half-way through a step: ending what still
		// runs is best effort, a second panic only stops that.
		defer func() {
			if p2 := recover(); p2 != nil {
				w.violate("panic while ending the seed's invocations: %v", p2)
			}
		}()
		w.abort(wait)
	}()
	w.mu.Lock()
	defer w.mu.Unlock()
	return Result{Faults: w.Faults, Violations: slices.Clone(w.violations), Trace: slices.Clone(w.trace), Stats: w.Stats}
}

// panicSite is the function and line that panicked: the first frame past
// the runtime's panic machinery, called from a deferred recover.
func panicSite() string {
	pcs := make([]uintptr, 32)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs)])
	past := false
	for {
		f, more := frames.Next()
		if past && !strings.HasPrefix(f.Function, "runtime.") {
			return fmt.Sprintf("%s (%s:%d)", f.Function, filepath.Base(f.File), f.Line)
		}
		past = past || f.Function == "runtime.gopanic" || strings.HasPrefix(f.Function, "runtime.panic")
		if !more {
			return "unknown"
		}
	}
}

// endChecks are the checks once the world is quiet.
func endChecks(w *World, mon *Monitor, rel *Release) {
	ctx := context.Background()
	mon.needOperator, rel.needOperator = nil, nil
	mon.check(ctx, time.Now())
	rel.check(ctx)
	checkHealth(ctx, w, mon, rel)
}

// every schedules run at the schedule's rate until `until`.
func (w *World) every(rate time.Duration, until time.Time, name string, run func()) {
	var arm func(t time.Time)
	arm = func(t time.Time) {
		if t.After(until) {
			return
		}
		w.at(t, name, func() {
			run()
			arm(t.Add(rate))
		})
	}
	arm(w.start.Add(rate))
}

func checkContentFree(w *World, logs string) {
	if strings.Contains(logs, Secret) {
		for _, line := range strings.Split(logs, "\n") {
			if strings.Contains(line, Secret) {
				w.violate("a log line holds content: %.200s", line)
				return
			}
		}
	}
}

// Shrink keeps the trace steps that matter for the violations: those that
// name an id the violations name, the invocations that touched it (start,
// end, crash), and the violations themselves.
func (r Result) Shrink() []Step {
	idPattern := regexp.MustCompile(`\b(ch|rel)-\d+\b`)
	ids := map[string]bool{}
	for _, v := range r.Violations {
		for _, id := range idPattern.FindAllString(v, -1) {
			ids[id] = true
		}
	}
	touched := map[int]bool{}
	mentions := func(s Step) bool {
		for _, id := range idPattern.FindAllString(s.Call+" "+s.Outcome, -1) {
			if ids[id] {
				return true
			}
		}
		return false
	}
	for _, s := range r.Trace {
		if mentions(s) && s.Inv != 0 {
			touched[s.Inv] = true
		}
	}
	var out []Step
	for _, s := range r.Trace {
		switch {
		case mentions(s), s.Call == "VIOLATION":
			out = append(out, s)
		case touched[s.Inv] && (s.Call == "START" || s.Call == "END" || s.Call == "CRASH"):
			out = append(out, s)
		}
	}
	return out
}

// Replay is the command that replays the seed alone: its block (ADAPTERS=1
// for the adapters block) and its day-2 kinds.
func (r Result) Replay() string {
	cmd := fmt.Sprintf("replay: make sim START=%d SEEDS=1 VERBOSE=1", r.Seed)
	if r.Adapters {
		cmd += " ADAPTERS=1"
	}
	if len(r.Day2) > 0 {
		cmd += " DAY2=" + strings.Join(r.Day2Kinds, ",")
	}
	return cmd
}

// Report is the readable verdict of a failing seed.
func (r Result) Report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d failed (%d calls, %d events); faults %+v\n", r.Seed, r.Calls, r.Events, r.Faults)
	b.WriteString(r.Replay() + "\n")
	for _, op := range r.Day2 {
		fmt.Fprintf(&b, "  day-2: %s\n", op)
	}
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "  VIOLATION %s\n", v)
	}
	b.WriteString("trace (shrunk to the ids in the violations):\n")
	for _, s := range r.Shrink() {
		b.WriteString("  " + s.String() + "\n")
	}
	return b.String()
}
