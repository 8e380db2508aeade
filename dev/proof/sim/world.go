package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
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
	return f
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
	crashed atomic.Bool
	cancel  context.CancelFunc
	done    func(resp any, err error, crashed bool)
	resp    any
	err     error
}

type invKey struct{}

func invocationOf(ctx context.Context) *Invocation {
	inv, _ := ctx.Value(invKey{}).(*Invocation)
	return inv
}

type call struct {
	inv   *Invocation
	name  string
	ready chan struct{}
}

// World is the simulated account: one virtual clock (the synctest
// bubble's), one scheduler that lets exactly one gated call proceed at a
// time, SQS queues, a bus and a history.
type World struct {
	rng       *rand.Rand
	Seed      uint64
	Faults    Faults
	start     time.Time
	faultsEnd time.Time

	mu       sync.Mutex
	pending  []*call
	finished []*Invocation
	nextInv  int
	active   map[string]int
	trace    []Step

	violations []string
	timers     []*timer

	// ddb is the in-memory DynamoDB of a run on the adapters (nil: the
	// memory stores).
	ddb *adapterWorld

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
	w := &World{rng: rng, Seed: seed, start: time.Now(), active: map[string]int{}}
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
		return errCrashed
	}
	c := &call{inv: inv, name: name, ready: make(chan struct{})}
	w.mu.Lock()
	w.pending = append(w.pending, c)
	w.mu.Unlock()
	<-c.ready
	if inv.crashed.Load() {
		return errCrashed
	}
	faulty := w.faultsOn()
	if faulty && w.chance(w.Faults.Fail[kind]) {
		w.record(inv, name, "injected failure")
		return fail()
	}
	outcome, err := effect()
	if err != nil && outcome == "" {
		outcome = "error " + errText(err)
	}
	if faulty && err == nil && w.chance(w.Faults.Ambiguous[kind]) {
		outcome += " (reported as failed)"
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

func errText(err error) string {
	s := err.Error()
	if len(s) > 80 {
		s = s[:80]
	}
	return strings.ReplaceAll(s, "\n", " ")
}

// invoke starts fn(ctx) as an invocation with a deadline of timeout.
func (w *World) invoke(fn, what string, timeout time.Duration, run func(ctx context.Context) (any, error),
	done func(resp any, err error, crashed bool)) {
	w.nextInv++
	inv := &Invocation{ID: w.nextInv, Fn: fn, What: what, done: done}
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), invKey{}, inv), timeout)
	inv.cancel = cancel
	w.active[fn]++
	w.record(inv, "START", what)
	go func() {
		defer cancel()
		resp, err := run(ctx)
		w.mu.Lock()
		inv.resp, inv.err = resp, err
		w.finished = append(w.finished, inv)
		w.mu.Unlock()
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
		return strings.Compare(a.name, b.name)
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
			inv.done(inv.resp, inv.err, crashed)
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
	for {
		wait()
		if w.grant() {
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
			w.violate("invocations still running %s after the end: %v", now.Sub(until), w.active)
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
