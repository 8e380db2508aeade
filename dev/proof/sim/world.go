package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// errCrashed is what every call of a crashed invocation returns: the
// Lambda execution environment is gone, nothing it does takes effect.
var errCrashed = errors.New("sim: invocation crashed")

// errInjected is the cause of every injected failure.
var errInjected = errors.New("sim: injected fault")

// Kinds of calls the world gates (one fault rate each).
const (
	KindStore = "store"
	KindSQS   = "sqs"
	KindBus   = "bus"
	KindHTTP  = "http"
)

// Faults is one seed's fault mix ("swarm" testing: every seed draws its
// own rates, so rare combinations come up somewhere in a block of seeds).
type Faults struct {
	// Fail is the chance that a call fails before it takes effect, by kind.
	Fail map[string]float64
	// Ambiguous is the chance that a call that took effect still reports
	// a failure (a timeout after the write), by kind.
	Ambiguous map[string]float64
	// Crash is the chance that the invocation ends right after a call.
	Crash float64
	// Duplicate is the chance that SQS delivers a message a second time.
	Duplicate float64
	// Concurrency is the event source mappings' maximum concurrency.
	Concurrency int
	// WorkerConcurrency is the poller's own parallelism within one
	// invocation.
	WorkerConcurrency int
	// Skew bounds each warm instance's clock offset (clock steps).
	Skew time.Duration
	// Stall is the chance that a call is held back before it takes
	// effect: a GC pause, a slow peer or network, or an invocation frozen
	// past its lease (stallFor). The rest of the world runs on meanwhile.
	Stall float64
	// BusEntryFail is the chance that PutEvents answers one entry as
	// failed (FailedEntryCount, an entry ErrorCode) and puts the others.
	BusEntryFail float64
	// Config is the deployment's configuration for this seed, drawn
	// within the documented ranges (README "Configuration").
	Config SimConfig
}

// SimConfig is the configuration a seed runs under: drawn per seed
// within the documented ranges so that leases do run out under live
// writers (a lease just above the CMS timeout, a stall past it).
type SimConfig struct {
	Lease           time.Duration // LOCALEFLOW_MONITOR_LEASE: > CMS timeout, ≤ 24 h
	CMSTimeout      time.Duration // LOCALEFLOW_CMS_TIMEOUT (poller): > 0, ≤ 15 min
	FunctionTimeout time.Duration // the Lambda timeout of the poller and the coordinator (1..900 s)
	PollInterval    time.Duration // LOCALEFLOW_POLL_INTERVAL
	BaseDelay       time.Duration // LOCALEFLOW_RETRY_BASE_DELAY
	MaxDelay        time.Duration // LOCALEFLOW_RETRY_MAX_DELAY
	MaxFailures     int           // LOCALEFLOW_MAX_CONSECUTIVE_FAILURES: 1..20
	EvidenceLease   time.Duration // LOCALEFLOW_EVIDENCE_LEASE: > both coordinator timeouts, ≤ 1 h, < function timeout − margin
}

// deployedSimConfig is the configuration of a stack deployed with no
// operator setting (TestSimRunsTheDeployedCoordinator checks the
// coordinator's part against the function's loader).
func deployedSimConfig() SimConfig {
	return SimConfig{Lease: 600 * time.Second, CMSTimeout: 10 * time.Second, FunctionTimeout: 120 * time.Second,
		PollInterval: 30 * time.Second, BaseDelay: 5 * time.Second, MaxDelay: 300 * time.Second, MaxFailures: 5,
		EvidenceLease: 90 * time.Second}
}

// drawConfig picks a seed's configuration: the deployed defaults on about
// a third of the seeds, otherwise values from the documented ranges that
// make leases short next to the function timeout and the stalls.
func drawConfig(r *rand.Rand) SimConfig {
	c := deployedSimConfig()
	if r.IntN(3) == 0 {
		return c
	}
	// 2..20 s, off the whole second: a timer of the CMS client never fires
	// at the very instant a scripted answer delay (whole seconds) ends,
	// which would leave the outcome to the Go scheduler, not the seed.
	c.CMSTimeout = time.Duration(2000+r.IntN(18000))*time.Millisecond + 500*time.Microsecond
	above := c.CMSTimeout.Truncate(time.Millisecond) + time.Millisecond // leases are whole milliseconds
	switch r.IntN(3) {
	case 0: // just above the CMS timeout
		c.Lease = above + time.Duration(r.IntN(10_000))*time.Millisecond
	case 1:
		c.Lease = above + time.Duration(10+r.IntN(110))*time.Second
	default:
		c.Lease = time.Duration(120+r.IntN(600)) * time.Second
	}
	c.FunctionTimeout = []time.Duration{60 * time.Second, 120 * time.Second, 120 * time.Second, 300 * time.Second}[r.IntN(4)]
	c.PollInterval = time.Duration(5+r.IntN(56)) * time.Second
	c.BaseDelay = time.Duration(1+r.IntN(10)) * time.Second
	c.MaxDelay = c.BaseDelay * time.Duration(1<<r.IntN(8))
	c.MaxFailures = []int{1, 2, 3, 4, 5, 5, 6, 8, 10, 20}[r.IntN(10)]
	// The coordinator refuses an invocation shorter than its lease plus
	// its margin (2 s in the simulation): the lease fits the timeout.
	c.EvidenceLease = time.Duration(31+r.IntN(int(c.FunctionTimeout/time.Second)-33)) * time.Second
	return c
}

// drawFaults picks a seed's fault mix.
func drawFaults(r *rand.Rand) Faults {
	rate := func(max float64) float64 {
		if r.IntN(3) == 0 {
			return 0
		}
		return r.Float64() * max
	}
	f := Faults{
		Fail:      map[string]float64{KindStore: rate(0.1), KindSQS: rate(0.1), KindBus: rate(0.2), KindHTTP: rate(0.2)},
		Ambiguous: map[string]float64{KindStore: rate(0.05), KindSQS: rate(0.05), KindBus: rate(0.05), KindHTTP: 0},
		Crash:     rate(0.08),
		Duplicate: rate(0.2),
		// 1..3 concurrent invocations per function.
		Concurrency:       1 + r.IntN(3),
		WorkerConcurrency: 1 + r.IntN(2),
	}
	if r.IntN(8) == 0 {
		// A storm: the CMS and the functions fail often, so failure
		// budgets run out on every path (lease expiries included).
		f.Crash = 0.1 + r.Float64()*0.2
		f.Fail[KindHTTP] = 0.3 + r.Float64()*0.3
	}
	if r.IntN(4) == 0 {
		f.Skew = time.Duration(r.IntN(2000)) * time.Millisecond
	}
	f.Stall = rate(0.03)
	f.BusEntryFail = rate(0.1)
	f.Ambiguous[KindHTTP] = rate(0.05)
	f.Config = drawConfig(r)
	return f
}

// stallFor draws how long a stalled call of inv is held back: mostly a
// GC pause, sometimes a slow peer, and one stall in ten freezes the
// invocation past its lease (it wakes after the lease ran out, if the
// Lambda timeout did not end it first).
func (w *World) stallFor(inv *Invocation) time.Duration {
	lease := w.Faults.Config.Lease
	if inv.Fn == "coordinator" {
		lease = w.Faults.Config.EvidenceLease
	}
	switch k := w.rng.IntN(10); {
	case k < 6:
		return time.Duration(10+w.rng.IntN(1990)) * time.Millisecond
	case k < 9:
		return time.Duration(2+w.rng.IntN(58)) * time.Second
	default:
		w.Stats.Frozen++
		return lease + time.Duration(1+w.rng.IntN(60))*time.Second
	}
}

// Stats counts what one seed's history exercised; TestSimSeeds sums them
// per block (docs/simulation.md "Counts per block").
type Stats struct {
	// StaleRefused counts finishing writes the store refused because their
	// lease was no longer the current, live one (expired, or reclaimed).
	StaleRefused int
	// Reclaims counts expired monitor leases taken over by another writer.
	Reclaims int
	// Stalls counts stalled calls; Frozen those held past a lease.
	Stalls, Frozen int
	// LeaseExpiredLive counts leases that ran out while their holder's
	// invocation was still running.
	LeaseExpiredLive int
	// DLQExplained counts validly signed inputs in a DLQ whose every
	// receive ended in an injected fault (the DLQ alarm shows them).
	DLQExplained int
	// MaxEvents is the most events one outcome, approval or delivery
	// status produced (bounded by MaxEventsPerOutcome).
	MaxEvents int
	// Wide counts wide releases (announce.go), Restarted the coordinator
	// invocations their restarts ended, Returning the release-queue
	// messages received again, MaxApproved the most release.approved
	// events of one approval.
	Wide, Restarted, Returning, MaxApproved int
	// FailedColdStarts counts invocations of a function left without an
	// instance (Function.instance): never expected, each one is traced.
	FailedColdStarts int
	// Pending counts findings of checks that wait for a named fix
	// (pendingFixes): reported, never silently dropped.
	Pending map[string]int
}

func (s *Stats) add(o Stats) {
	s.StaleRefused += o.StaleRefused
	s.Reclaims += o.Reclaims
	s.Stalls += o.Stalls
	s.Frozen += o.Frozen
	s.LeaseExpiredLive += o.LeaseExpiredLive
	s.DLQExplained += o.DLQExplained
	s.MaxEvents = max(s.MaxEvents, o.MaxEvents)
	s.Wide += o.Wide
	s.Restarted += o.Restarted
	s.Returning += o.Returning
	s.MaxApproved = max(s.MaxApproved, o.MaxApproved)
	s.FailedColdStarts += o.FailedColdStarts
	for k, v := range o.Pending {
		if s.Pending == nil {
			s.Pending = map[string]int{}
		}
		s.Pending[k] += v
	}
}

// Step is one line of a history trace.
type Step struct {
	At      time.Duration // virtual time since the start
	Inv     int           // invocation number, 0 for the world itself
	Fn      string
	Call    string
	Outcome string
}

func (s Step) String() string {
	return fmt.Sprintf("%10.3fs  #%-4d %-12s %-48s %s", s.At.Seconds(), s.Inv, s.Fn, s.Call, s.Outcome)
}

// Invocation is one Lambda invocation in flight.
type Invocation struct {
	ID      int
	Fn      string
	What    string
	clock   skewClock // the instance's clock
	started time.Time
	// deadline is the Lambda timeout: nothing of the invocation takes
	// effect after it.
	deadline time.Time
	// afterCrash counts calls made after the crash; a handler that keeps
	// calling is ended (watchdog).
	afterCrash int
	// faulted: a fault was injected into one of its calls (or it crashed).
	faulted atomic.Bool
	// faults counts the faults injected into it (fault), so a check can
	// tell a fault after a given point from one before it.
	faults  atomic.Int32
	crashed atomic.Bool
	cancel  context.CancelFunc
	done    func(resp any, err error, crashed, faulted bool)
	resp    any
	err     error
}

// fault marks a fault injected into the invocation.
func (inv *Invocation) fault() {
	inv.faulted.Store(true)
	inv.faults.Add(1)
}

type invKey struct{}

func invocationOf(ctx context.Context) *Invocation {
	inv, _ := ctx.Value(invKey{}).(*Invocation)
	return inv
}

type call struct {
	inv   *Invocation
	name  string
	goid  uint64 // the calling goroutine (tiebreak between equal calls)
	ready chan struct{}
}

// goid is the current goroutine's id. Goroutines get increasing ids in
// the order they are created (on one P: the simulation runs with
// GOMAXPROCS 1), so two equal calls of one invocation's workers are
// ordered by the order the invocation started those workers, not by the
// order they happened to reach the call boundary.
func goid() uint64 {
	var buf [32]byte
	n := runtime.Stack(buf[:], false)
	f := strings.Fields(string(buf[:n]))
	if len(f) < 2 {
		return 0
	}
	id, _ := strconv.ParseUint(f[1], 10, 64)
	return id
}

// World is the simulated account: one virtual clock (the synctest
// bubble's), one scheduler that lets exactly one gated call proceed at a
// time, SQS queues, a bus and a history.
type World struct {
	rng *rand.Rand
	// peerReads is the Retry-After each invocation last received from a
	// release peer, until its next write of that peer's record (release.go).
	peerReads map[peerRead]time.Duration
	// pollSent: an invocation sent a poll message for a change;
	// sendFailed: an entry of one of its send batches failed (aws.go).
	pollSent   map[readKey]bool
	sendFailed map[int]bool
	Seed       uint64
	Faults     Faults
	start      time.Time
	faultsEnd  time.Time

	mu       sync.Mutex
	pending  []*call
	finished []*Invocation
	nextInv  int
	active   map[string]int
	trace    []Step

	violations []string
	timers     []*timer
	running    map[int]*Invocation

	// Stats counts what the history exercised.
	Stats Stats
	// strict turns every pending finding into a violation (-sim.strict).
	strict bool
	// maxOffset is the largest clock offset any instance ever had (the
	// tolerance of the timing checks between two instances' clocks).
	maxOffset time.Duration
	// minOffset is the smallest (≤ 0: a clock stepped back): two
	// instances' clocks differ by at most maxOffset − minOffset.
	minOffset time.Duration

	// ddb is the in-memory DynamoDB of a run on the adapters (nil: the
	// memory stores).
	ddb *adapterWorld

	// day2 is the seed's day-2 operations (day2.go), nil when it has none.
	day2 *day2
	// fx: the draws and checks of issue 24's other findings (findings.go).
	fx *findings

	// dry makes violate only count (a trial run of the end checks).
	dry           bool
	dryViolations int
}

// settledBy runs the end checks as a trial; true when none fails.
func (w *World) settledBy(checks func()) bool {
	w.dry, w.dryViolations = true, 0
	checks()
	w.dry = false
	return w.dryViolations == 0
}

// timer is a world action due at a virtual time.
type timer struct {
	at   time.Time
	name string
	run  func()
}

func newWorld(seed uint64) *World {
	rng := rand.New(rand.NewPCG(seed, seed^0x6c6f63616c65666c))
	w := &World{rng: rng, Seed: seed, start: time.Now(), active: map[string]int{}, running: map[int]*Invocation{}}
	w.Faults = drawFaults(rng)
	return w
}

func (w *World) since() time.Duration { return time.Since(w.start) }

// faultsOn reports whether faults are still injected.
func (w *World) faultsOn() bool { return time.Now().Before(w.faultsEnd) }

func (w *World) chance(p float64) bool { return p > 0 && w.rng.Float64() < p }

func (w *World) record(inv *Invocation, name, outcome string) {
	s := Step{At: w.since(), Call: name, Outcome: outcome}
	if inv != nil {
		s.Inv, s.Fn = inv.ID, inv.Fn
	} else {
		s.Fn = "world"
	}
	w.mu.Lock()
	w.trace = append(w.trace, s)
	w.mu.Unlock()
}

// violate records a broken property.
func (w *World) violate(format string, args ...any) {
	if w.dry {
		w.dryViolations++
		return
	}
	msg := fmt.Sprintf("%10.3fs  ", w.since().Seconds()) + fmt.Sprintf(format, args...)
	w.mu.Lock()
	w.violations = append(w.violations, msg)
	w.mu.Unlock()
	w.record(nil, "VIOLATION", fmt.Sprintf(format, args...))
}

// pendingFix records a finding of a check that waits for a named fix
// (pendingFixes): counted and traced, reported per block, and a
// violation with -sim.strict. Never a silent relaxation.
func (w *World) pendingFix(fix, format string, args ...any) {
	if _, ok := pendingFixes[fix]; !ok {
		panic("sim: unknown pending fix " + fix)
	}
	if w.strict {
		w.violate("["+fix+"] "+format, args...)
		return
	}
	if w.dry {
		return
	}
	if w.Stats.Pending == nil {
		w.Stats.Pending = map[string]int{}
	}
	w.Stats.Pending[fix]++
	w.record(nil, "PENDING "+fix, fmt.Sprintf(format, args...))
}

// do runs one call of an invocation at a call boundary: it waits for the
// scheduler's turn, may fail it before it takes effect (fail returns the
// error a real client would see), runs effect, may report a failure
// although the effect happened, and may end the invocation right after.
// Calls outside any invocation (the world's own) run at once.
func (w *World) do(ctx context.Context, kind, name string, fail func() error, effect func() (string, error)) error {
	inv := invocationOf(ctx)
	if inv == nil {
		_, err := effect()
		return err
	}
	if inv.crashed.Load() {
		return w.afterCrash(inv)
	}
	w.gate(inv, name)
	if inv.crashed.Load() {
		return w.afterCrash(inv)
	}
	faulty := w.faultsOn()
	if faulty && w.chance(w.Faults.Stall) {
		d := w.stallFor(inv)
		w.Stats.Stalls++
		inv.fault()
		w.record(inv, name, "stalled "+d.String())
		time.Sleep(d)
		// Back through the scheduler before anything else, so that two
		// goroutines waking at one instant never run side by side.
		w.gate(inv, name)
		if inv.crashed.Load() {
			return w.afterCrash(inv)
		}
		if !time.Now().Before(inv.deadline) {
			// Lambda ended the invocation at its timeout.
			inv.crashed.Store(true)
			inv.cancel()
			w.record(inv, "CRASH", "function timeout while stalled")
			return w.afterCrash(inv)
		}
	}
	if faulty && w.chance(w.Faults.Fail[kind]) {
		inv.fault()
		w.record(inv, name, "injected failure")
		return fail()
	}
	began := time.Now()
	outcome, err := effect()
	if time.Now().After(began) {
		// The effect waited on virtual time (a slow peer, a client
		// timeout): other goroutines may have woken at the same instant,
		// so go back through the scheduler before drawing from the seed.
		w.gate(inv, name+" (answer)")
	}
	if err != nil && outcome == "" {
		outcome = "error " + errText(err)
	}
	if faulty && err == nil && w.chance(w.Faults.Ambiguous[kind]) {
		outcome += " (reported as failed)"
		inv.fault()
		err = fail()
	}
	w.record(inv, name, outcome)
	if faulty && w.chance(w.Faults.Crash) {
		inv.crashed.Store(true)
		inv.cancel()
		w.record(inv, "CRASH", "invocation ends")
		return errCrashed
	}
	return err
}

// gate parks the call until the scheduler grants it.
func (w *World) gate(inv *Invocation, name string) {
	c := &call{inv: inv, name: name, goid: goid(), ready: make(chan struct{})}
	w.mu.Lock()
	w.pending = append(w.pending, c)
	w.mu.Unlock()
	<-c.ready
}

// maxCallsAfterCrash: a handler that keeps calling after its invocation
// crashed (every call fails at once, nothing parks) would spin without
// the scheduler; the watchdog ends its goroutine.
const maxCallsAfterCrash = 100_000

func (w *World) afterCrash(inv *Invocation) error {
	inv.afterCrash++
	if inv.afterCrash > maxCallsAfterCrash {
		runtime.Goexit()
	}
	return errCrashed
}

func errText(err error) string {
	s := err.Error()
	if len(s) > 80 {
		s = s[:80]
	}
	return strings.ReplaceAll(s, "\n", " ")
}

// invoke starts fn(ctx) as an invocation with a deadline of timeout.
func (w *World) invoke(fn, what string, timeout time.Duration, clock skewClock, run func(ctx context.Context) (any, error),
	done func(resp any, err error, crashed, faulted bool)) {
	w.nextInv++
	now := time.Now()
	inv := &Invocation{ID: w.nextInv, Fn: fn, What: what, done: done, clock: clock, started: now, deadline: now.Add(timeout)}
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), invKey{}, inv), timeout)
	inv.cancel = cancel
	w.active[fn]++
	w.running[inv.ID] = inv
	w.record(inv, "START", what)
	go func() {
		var resp any
		var err error
		// Deferred, so that a goroutine the watchdog ends still finishes,
		// and a panic fails the seed (a violation naming it) instead of
		// the process: the invocation ends with an error, as a Lambda
		// runtime reports a panicking handler.
		defer func() {
			if p := recover(); p != nil {
				w.violate("panic in invocation #%d (%s %s): %v at %s", inv.ID, fn, what, p, panicSite())
				err = fmt.Errorf("sim: handler panicked: %v", p)
			}
			cancel()
			w.mu.Lock()
			inv.resp, inv.err = resp, err
			w.finished = append(w.finished, inv)
			w.mu.Unlock()
		}()
		resp, err = run(ctx)
	}()
}

// grant lets one pending call proceed, chosen by the seed; false when no
// call is pending.
func (w *World) grant() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.pending) == 0 {
		return false
	}
	// Sort so that the choice depends only on the seed, not on the order
	// the goroutines arrived in.
	slices.SortStableFunc(w.pending, func(a, b *call) int {
		if a.inv.ID != b.inv.ID {
			return a.inv.ID - b.inv.ID
		}
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		return cmp.Compare(a.goid, b.goid)
	})
	i := w.rng.IntN(len(w.pending))
	c := w.pending[i]
	w.pending = slices.Delete(w.pending, i, i+1)
	close(c.ready)
	return true
}

// reap finishes the invocations that returned, in invocation order.
func (w *World) reap() {
	w.mu.Lock()
	done := w.finished
	w.finished = nil
	w.mu.Unlock()
	slices.SortFunc(done, func(a, b *Invocation) int { return a.ID - b.ID })
	for _, inv := range done {
		w.active[inv.Fn]--
		delete(w.running, inv.ID)
		crashed := inv.crashed.Load()
		outcome := "returned"
		switch {
		case crashed:
			outcome = "crashed"
		case inv.err != nil:
			outcome = "error " + errText(inv.err)
		}
		w.record(inv, "END", outcome)
		if inv.done != nil {
			inv.done(inv.resp, inv.err, crashed, crashed || inv.faulted.Load())
		}
	}
}

func (w *World) activeTotal() int {
	n := 0
	for _, v := range w.active {
		n += v
	}
	return n
}

// at schedules a world action.
func (w *World) at(t time.Time, name string, run func()) {
	w.timers = append(w.timers, &timer{at: t, name: name, run: run})
}

// fireTimers runs the world actions that are due, earliest first; true
// when one ran.
func (w *World) fireTimers(now time.Time) bool {
	slices.SortStableFunc(w.timers, func(a, b *timer) int { return a.at.Compare(b.at) })
	ran := false
	for len(w.timers) > 0 && !w.timers[0].at.After(now) {
		t := w.timers[0]
		w.timers = w.timers[1:]
		w.record(nil, t.name, "")
		t.run()
		ran = true
	}
	return ran
}

func (w *World) nextTimer() (time.Time, bool) {
	if len(w.timers) == 0 {
		return time.Time{}, false
	}
	m := w.timers[0].at
	for _, t := range w.timers[1:] {
		if t.at.Before(m) {
			m = t.at
		}
	}
	return m, true
}

// maxSpins is how many calls the scheduler grants at one virtual instant
// before the watchdog calls it a livelock (a busy seed grants a few
// hundred).
const maxSpins = 200_000

// abort ends a seed the watchdog stopped: every running invocation
// crashes, its parked calls are released (they fail at once), and the
// world waits for the goroutines to return so that the bubble ends and
// the seed reports its replay command instead of hanging.
func (w *World) abort(wait func()) {
	for i := 0; i < 1_000_000 && w.activeTotal() > 0; i++ {
		for _, inv := range w.running {
			if !inv.crashed.Load() {
				inv.crashed.Store(true)
				inv.cancel()
			}
		}
		wait()
		if w.grant() {
			continue
		}
		w.reap()
		if w.activeTotal() > 0 {
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// loop drives the world until `until` with nothing left in flight. wait
// is synctest.Wait; poll starts work (ESM receives) and returns the next
// time something becomes due. After the faults stopped, settled is asked
// (at most every settleEvery, with nothing in flight): when it says the
// world is quiet and every end check already holds, the run ends early —
// nothing is left that could change the verdict.
func (w *World) loop(wait func(), until time.Time, poll func(now time.Time) (bool, time.Time), settled func() bool) {
	const step = 100 * time.Millisecond
	const settleEvery = 10 * time.Minute
	hardStop := until.Add(6 * time.Hour)
	nextSettle := w.faultsEnd.Add(settleEvery)
	lastNow, spins := time.Now(), 0
	for {
		wait()
		if w.grant() {
			// Watchdog: calls that keep coming without the virtual clock
			// moving are a livelock; fail the seed rather than hang.
			if now := time.Now(); now.Equal(lastNow) {
				spins++
			} else {
				lastNow, spins = now, 0
			}
			if spins > maxSpins {
				w.violate("livelock: %d calls at virtual time %s without the clock moving (watchdog)", spins, w.since())
				w.abort(wait)
				return
			}
			continue
		}
		w.reap()
		now := time.Now()
		if w.fireTimers(now) {
			continue
		}
		started, next := poll(now)
		if started {
			continue
		}
		if t, ok := w.nextTimer(); ok && (next.IsZero() || t.Before(next)) {
			next = t
		}
		busy := w.activeTotal() > 0
		if !busy && !now.Before(until) {
			return
		}
		if !busy && !now.Before(nextSettle) {
			nextSettle = now.Add(settleEvery)
			if settled() {
				w.record(nil, "settled", "every end check holds, nothing in flight")
				return
			}
		}
		if now.After(hardStop) {
			w.violate("no progress: invocations still running %s after the end: %v (watchdog)", now.Sub(until), w.active)
			w.abort(wait)
			return
		}
		if next.IsZero() || next.After(until) && !busy {
			next = until
		}
		d := next.Sub(now)
		if busy && d > step {
			d = step
		}
		if d <= 0 {
			d = time.Millisecond
		}
		time.Sleep(d)
	}
}
