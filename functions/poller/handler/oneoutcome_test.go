package handler_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/localeflow/localeflow/adapters/cms/cmstest"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/functions/poller/handler"
)

// crashStore is the monitor store as a poller that crashed sees it: once
// crashed is set, none of its writes reach the store (the process died;
// its invocation's later calls have no effect).
type crashStore struct {
	monitor.Store
	crashed *atomic.Bool
}

func (s crashStore) Transition(ctx context.Context, f monitor.Fence, u monitor.Update) (monitor.Record, error) {
	if s.crashed.Load() {
		return monitor.Record{}, core.Wrap(monitor.CodeStoreUnavailable, true, errors.New("the poller crashed"))
	}
	return s.Store.Transition(ctx, f, u)
}

func (s crashStore) Announced(ctx context.Context, eventID string, finishedMS int64) error {
	if s.crashed.Load() {
		return core.Wrap(monitor.CodeStoreUnavailable, true, errors.New("the poller crashed"))
	}
	return s.Store.Announced(ctx, eventID, finishedMS)
}

// checkOneOutcome fails unless every localeflow.change.terminal published
// for id carries the same state, remote_status, error_code and outcome_id,
// and that outcome is the stored record's final one.
func (e *env) checkOneOutcome(id string) {
	e.t.Helper()
	st := e.status(id)
	if !st.State.Final() {
		e.t.Fatalf("%s did not end: %s", id, st.State)
	}
	want := map[string]any{"state": string(st.State), "remote_status": nilIfEmpty(st.RemoteStatus),
		"error_code": nilIfEmpty(st.LastErrorCode), "outcome_id": monitor.OutcomeID(id, st.State, st.Updated.UnixMilli())}
	n := 0
	for _, d := range e.bus.Details() {
		if d["event_id"] != id {
			continue
		}
		n++
		for k, v := range want {
			if d[k] != v {
				e.t.Errorf("published outcome %d of %s: %s = %v, the final record says %v (event %v)", n, id, k, d[k], v, d)
			}
		}
	}
	if n == 0 {
		e.t.Fatalf("no outcome published for %s", id)
	}
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// sweepUntilFinal runs the scheduled sweep, a lease plus a second apart,
// until id is final and owes nothing (at most 12 sweeps).
func (e *env) sweepUntilFinal(id string) {
	e.t.Helper()
	for range 12 {
		e.clock.Advance(e.svc.Config().Lease + time.Second)
		e.sweep()
		if st := e.status(id); st.State.Final() && len(e.owedIDs()) == 0 {
			return
		}
	}
	e.t.Fatalf("%s not final after 12 sweeps: %+v", id, e.status(id))
}

// The seed-1448 shape (issue 24): the poller reads a terminal CMS status,
// the outcome is published, the poller crashes before its finishing write,
// the sweep reclaims the lease (a failure) and the CMS is unavailable from
// then on. The change used to end failed (cms.http_503) after
// localeflow.change.terminal had announced it terminal/published. The
// outcome is now written before it is published, so the crash either
// comes before the write (nothing was published) or after it (the record
// is final and nothing can change it): one outcome per change.
func TestTerminalPublishedThenCrashReclaimOutageKeepsOneOutcome(t *testing.T) {
	crashed := &atomic.Bool{}
	e := setup(t)
	svc, err := monitor.NewService(crashStore{Store: e.store, crashed: crashed}, e.clock, nil, monitor.Config{WorkerID: "poller-test", SweepGrace: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	e.cfg.Monitor = svc
	if e.h, err = handler.New(e.cfg); err != nil {
		t.Fatal(err)
	}
	e.lambda = lambda.NewHandler(e.h.Handle)
	const id = "evt-poller-0001"
	e.cms.Script(id, append([]cmstest.Step{cmstest.StatusStep("published")}, cmstest.Repeat(cmstest.HTTPStep(503), 10)...)...)
	e.intake()
	// The crash comes right after the first publish of the change.
	e.bus.observe = func(d map[string]any) {
		if d["event_id"] == id {
			crashed.Store(true)
		}
	}
	e.sweep()
	if !crashed.Load() {
		t.Fatal("nothing was published by the poll that read the terminal status")
	}
	crashed.Store(false) // the next invocations run normally
	e.bus.observe = nil
	e.sweepUntilFinal(id)
	e.checkOneOutcome(id)
	if st := e.status(id); st.State != monitor.StateTerminal || st.RemoteStatus != "published" {
		t.Fatalf("the CMS answered published, the change ended %s %s %s", st.State, st.RemoteStatus, st.LastErrorCode)
	}
}

// Terminal, then failed, with no failure before: the poller reads a
// terminal status, publishes and stalls past its lease before the
// finishing write; meanwhile another worker reclaims the lease (a failure,
// lease_expired), so the stalled write is refused, and the CMS stays
// unavailable until the failure limit. It used to end failed after being
// announced terminal.
func TestTerminalPublishedThenStallThenOutageKeepsOneOutcome(t *testing.T) {
	e := setup(t)
	const id = "evt-poller-0001"
	e.cms.Script(id, append([]cmstest.Step{cmstest.StatusStep("published")}, cmstest.Repeat(cmstest.HTTPStep(503), 10)...)...)
	e.intake()
	stalled := false
	e.bus.observe = func(d map[string]any) {
		if d["event_id"] == id && !stalled {
			stalled = true
			e.clock.Advance(e.svc.Config().Lease + time.Second)
			if _, ok, err := e.svc.Claim(context.Background(), id); ok || err != nil {
				t.Errorf("the reclaim during the stall: claimed %v, %v", ok, err)
			}
		}
	}
	e.deliverAll()
	if !stalled {
		t.Fatal("nothing was published")
	}
	if st := e.status(id); !st.State.Final() {
		e.sweepUntilFinal(id)
	}
	e.checkOneOutcome(id)
	if st := e.status(id); st.State != monitor.StateTerminal || st.RemoteStatus != "published" {
		t.Fatalf("the CMS answered published, the change ended %s %s %s", st.State, st.RemoteStatus, st.LastErrorCode)
	}
}
