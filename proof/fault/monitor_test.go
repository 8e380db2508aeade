package fault

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/localeflow/localeflow/adapters/cms/cmstest"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/proof/harness"
	"github.com/localeflow/localeflow/proof/invariant"
)

// monitorEnv is one stack, one CMS and one poller.
type monitorEnv struct {
	stack *harness.Stack
	life  *harness.Lifecycle
	clock *harness.Clock
	p     *harness.Poller
	logs  *bytes.Buffer
}

func newMonitorEnv(t *testing.T, seed uint64, maxFailures int) *monitorEnv {
	t.Helper()
	e := &monitorEnv{stack: harness.NewStack(t, seed), life: harness.NewLifecycle(t), clock: harness.NewClock(1), logs: &bytes.Buffer{}}
	e.p = e.stack.NewPoller(t, e.life, e.clock, harness.FastMonitor("poller-a", 200*time.Millisecond, maxFailures), nil)
	e.p.ESM.SweepEvery = time.Second
	return e
}

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return out
}

func texts(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = harness.ChangeText(id)
	}
	return out
}

// status reads a change's status or fails the test.
func (e *monitorEnv) status(t *testing.T, id string) monitor.Status {
	t.Helper()
	st, err := e.p.Service.Status(context.Background(), id)
	if err != nil {
		t.Fatalf("status %s: %v", id, err)
	}
	return st
}

// run drains the poll queue (with the sweep as the safety net) until every
// id is final.
func (e *monitorEnv) run(t *testing.T, ids []string, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	if err := e.p.ESM.Run(ctx, timeout, func() bool { return e.p.AllFinal(ctx, ids) }); err != nil {
		for _, id := range ids {
			st, _ := e.p.Service.Status(ctx, id)
			t.Logf("%s: %s %s attempts %d failures %d", id, st.State, st.LastErrorCode, st.PollAttempts, st.ConsecutiveFailures)
		}
		t.Fatal(err)
	}
}

// wantFinal checks every id ended in state with remote status (or error
// code for failed), after exactly attempts claims (0: any) and exactly
// requests CMS requests (0: any).
func (e *monitorEnv) wantFinal(t *testing.T, ids []string, state monitor.State, statusOrCode string, attempts, requests int) {
	t.Helper()
	for _, id := range ids {
		st := e.status(t, id)
		got := st.RemoteStatus
		if state == monitor.StateFailed {
			got = st.LastErrorCode
		}
		if st.State != state || got != statusOrCode || (attempts > 0 && st.PollAttempts != attempts) {
			t.Errorf("%s: %s %q attempts %d (want %s %q after %d)", id, st.State, got, st.PollAttempts, state, statusOrCode, attempts)
		}
		if n := len(e.life.RequestsFor(id)); requests > 0 && n != requests {
			t.Errorf("%s: CMS saw %d requests, want %d", id, n, requests)
		}
	}
}

func script(steps ...string) []cmstest.Step {
	out := make([]cmstest.Step, len(steps))
	for i, s := range steps {
		out[i] = cmstest.StatusStep(s)
	}
	return out
}

// TestCrashBetweenClaimAndComplete: a worker claims a change and dies
// before polling. The lease expires, the sweep reclaims it (a failure,
// lease_expired), and the change still reaches terminal, polled once per
// scripted answer.
func TestCrashBetweenClaimAndComplete(t *testing.T) {
	e := newMonitorEnv(t, 1, 5)
	ctx := context.Background()
	list := ids("evt-crash-claim", 3)
	for _, id := range list {
		e.life.PutChange(id, script("processing", "published")...)
		if err := e.p.Register(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	crashed := e.stack.NewPoller(t, e.life, e.clock, harness.FastMonitor("poller-crashed", 200*time.Millisecond, 5), nil)
	for _, id := range list {
		if _, ok, err := crashed.Service.Claim(ctx, id); err != nil || !ok {
			t.Fatalf("claim %s: ok %v err %v", id, ok, err)
		}
	}
	// Nothing was enqueued (registered directly): only the sweep finds them.
	e.run(t, list, 60*time.Second)
	// 3 claims (the crashed one + 2 polls), 2 CMS requests (the crashed
	// claim never asked).
	e.wantFinal(t, list, monitor.StateTerminal, "published", 3, 2)
	e.stack.Check(t, invariant.Options{Texts: texts(list), MaxPollAttempts: 3})
}
