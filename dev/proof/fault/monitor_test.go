package fault

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/localeflow/localeflow/adapters/cms/cmstest"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/dev/proof/faultinject"
	"github.com/localeflow/localeflow/dev/proof/harness"
	"github.com/localeflow/localeflow/dev/proof/invariant"
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
	if err := e.p.ESM.Run(ctx, timeout, func() bool { return e.stack.AllFinal(ctx, ids) }); err != nil {
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

// TestCrashAfterCMSAnswered: a worker claims, gets the CMS's answer and
// dies before writing it. Nothing of that answer is stored; the lease
// expires, the sweep reclaims and the next polls reach terminal.
func TestCrashAfterCMSAnswered(t *testing.T) {
	e := newMonitorEnv(t, 2, 5)
	ctx := context.Background()
	list := ids("evt-crash-answer", 3)
	crashed := e.stack.NewPoller(t, e.life, e.clock, harness.FastMonitor("poller-crashed", 200*time.Millisecond, 5), nil)
	for _, id := range list {
		e.life.PutChange(id, script("processing", "publishing", "published")...)
		if err := e.p.Register(ctx, id); err != nil {
			t.Fatal(err)
		}
		c, ok, err := crashed.Service.Claim(ctx, id)
		if err != nil || !ok {
			t.Fatalf("claim %s: %v %v", id, ok, err)
		}
		resp, err := crashed.Reader.ReadLifecycle(ctx, c.Target())
		if err != nil || resp.Status != "processing" {
			t.Fatalf("read %s: %+v %v", id, resp.Status, err)
		}
		// Crash: the answer is never written.
		if st := e.status(t, id); st.State != monitor.StateLeased || st.RemoteStatus != "" {
			t.Fatalf("%s after the crash: %s %q", id, st.State, st.RemoteStatus)
		}
	}
	e.run(t, list, 60*time.Second)
	// 3 claims, 3 CMS requests: the lost answer cost one request.
	e.wantFinal(t, list, monitor.StateTerminal, "published", 3, 3)
	for _, id := range list {
		if st := e.status(t, id); st.ConsecutiveFailures != 0 {
			t.Errorf("%s: consecutive failures %d after a success", id, st.ConsecutiveFailures)
		}
	}
	e.stack.Check(t, invariant.Options{Texts: texts(list), MaxPollAttempts: 3})
}

// TestDuplicateDelayedReorderedMessages: changes enter through the bus and
// every message may be delivered twice, late (after later messages of the
// same change) and out of order. Duplicates and stale chains collapse at
// the conditional writes: each change is polled exactly once per scripted
// answer.
func TestDuplicateDelayedReorderedMessages(t *testing.T) {
	e := newMonitorEnv(t, 3, 5)
	ctx := context.Background()
	list := ids("evt-chaos", 12)
	for _, id := range list {
		e.life.PutChange(id, script("processing", "awaiting_approval", "publishing", "published")...)
		if err := e.stack.Dispatch(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	e.p.ESM.Chaos = harness.Chaos{Duplicate: 0.4, HoldBack: 0.25, HoldRounds: 6, Reorder: true, Seed: 3}
	e.p.ESM.SweepEvery = 0 // the queue alone must carry every change
	e.run(t, list, 90*time.Second)
	st := e.p.ESM.Stats()
	if st.Duplicated == 0 || st.HeldBack == 0 {
		t.Fatalf("no chaos happened: %+v", st)
	}
	t.Logf("messages %d, duplicated %d, held back %d", st.Messages, st.Duplicated, st.HeldBack)
	e.wantFinal(t, list, monitor.StateTerminal, "published", 4, 4)
	e.stack.Check(t, invariant.Options{Texts: texts(list), MaxPollAttempts: 4})
}

// TestDynamoDBThrottlingAnd5xx: a seeded fraction of every DynamoDB call of
// the pollers is answered with ProvisionedThroughputExceeded, Throttling,
// InternalServerError or 503 before it reaches the table ("before"), or
// after the table applied it, the answer lost ("after": the ambiguous
// outcome). The SDK retries, the handler reports failed messages, SQS
// redelivers, the sweep recovers lost chains and expired leases: every
// change still ends published, and the tables stay consistent.
func TestDynamoDBThrottlingAnd5xx(t *testing.T) {
	for _, tt := range []struct {
		name     string
		mode     int
		fraction float64
	}{
		{"before", 0, 0.2},
		{"after", 1, 0.08},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newMonitorEnv(t, 4, 10)
			ctx := context.Background()
			list := ids("evt-ddb-"+tt.name, 10)
			for _, id := range list {
				e.life.PutChange(id, script("processing", "publishing", "published")...)
				if err := e.stack.Dispatch(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			e.stack.Faults.Mode = faultMode(tt.mode)
			e.stack.Faults.Fraction = tt.fraction
			e.stack.Faults.Enable(true)
			e.run(t, list, 120*time.Second)
			e.stack.Faults.Enable(false)
			calls, injected := e.stack.Faults.Stats()
			t.Logf("DynamoDB calls %d, injected %v, ESM %+v", calls, injected, summary(e.p.ESM.Stats()))
			if injected["total"] == 0 {
				t.Fatal("no fault was injected")
			}
			// Published; attempts are not fixed (a lost claim answer
			// costs an expired lease and a reclaim), but every CMS
			// answer but the last was non-terminal, so at most one
			// published answer was ever written.
			e.wantFinal(t, list, monitor.StateTerminal, "published", 0, 0)
			e.stack.Check(t, invariant.Options{Texts: texts(list)})
		})
	}
}

// TestCMSTimeoutsErrorsAndMalformedBodies: the CMS times out, answers 5xx
// and 429 (retried with backoff), sends a malformed or wrongly signed body
// (a contract violation: failed at once, never retried), or keeps failing
// until the failure limit.
func TestCMSTimeoutsErrorsAndMalformedBodies(t *testing.T) {
	e := newMonitorEnv(t, 5, 5)
	ctx := context.Background()
	timeout := cmstest.Step{Status: "processing", Delay: harness.CMSTimeout + 500*time.Millisecond}
	type want struct {
		state          monitor.State
		statusOrCode   string
		attempts, reqs int
	}
	cases := map[string]struct {
		steps []cmstest.Step
		want  want
	}{
		"evt-cms-recovers": {[]cmstest.Step{cmstest.HTTPStep(503), timeout, cmstest.HTTPStep(429), cmstest.HTTPStep(500), cmstest.StatusStep("processing"), cmstest.StatusStep("published")},
			want{monitor.StateTerminal, "published", 6, 6}},
		"evt-cms-malformed":  {[]cmstest.Step{{Status: "processing", Fault: cmstest.FaultMalformedBody}}, want{monitor.StateFailed, "lifecycle_monitor.response_invalid", 1, 1}},
		"evt-cms-signature":  {[]cmstest.Step{cmstest.StatusStep("processing"), {Status: "processing", Fault: cmstest.FaultBadSignature}}, want{monitor.StateFailed, "lifecycle_monitor.response_invalid", 2, 2}},
		"evt-cms-extra-key":  {[]cmstest.Step{{Status: "processing", Fault: cmstest.FaultExtraKey}}, want{monitor.StateFailed, "lifecycle_monitor.response_invalid", 1, 1}},
		"evt-cms-exhausted":  {cmstest.Repeat(cmstest.HTTPStep(503), 5), want{monitor.StateFailed, "cms.http_503", 5, 5}},
		"evt-cms-timeouts":   {cmstest.Repeat(timeout, 5), want{monitor.StateFailed, "cms.timeout", 5, 5}},
		"evt-cms-remotefail": {script("processing", "publication_failed"), want{monitor.StateTerminal, "publication_failed", 2, 2}},
	}
	var list []string
	for id, c := range cases {
		list = append(list, id)
		e.life.PutChange(id, c.steps...)
		if err := e.stack.Dispatch(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	e.run(t, list, 120*time.Second)
	for id, c := range cases {
		t.Run(id, func(t *testing.T) {
			e.wantFinal(t, []string{id}, c.want.state, c.want.statusOrCode, c.want.attempts, c.want.reqs)
		})
	}
	rep := e.stack.Check(t, invariant.Options{Texts: texts(list), MaxPollAttempts: 6})
	if rep.MonitorStates[monitor.StateFailed] != 5 || rep.MonitorStates[monitor.StateTerminal] != 2 {
		t.Fatalf("states %v, want 5 failed and 2 terminal", rep.MonitorStates)
	}
}

// TestClockSteppedBackwards: a worker claims, the clock steps back 4 s
// before it writes: the write is refused as clock_regressed (nothing
// stored), messages that are now early are re-sent, and the change still
// ends published once the clock has caught up.
func TestClockSteppedBackwards(t *testing.T) {
	e := newMonitorEnv(t, 6, 5)
	ctx := context.Background()
	list := ids("evt-clock", 3)
	for _, id := range list {
		e.life.PutChange(id, script("processing", "publishing", "published")...)
		if err := e.p.Register(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	claims := make([]monitor.Claim, len(list))
	for i, id := range list {
		c, ok, err := e.p.Service.Claim(ctx, id)
		if err != nil || !ok {
			t.Fatalf("claim %s: %v %v", id, ok, err)
		}
		claims[i] = c
	}
	e.clock.Step(-4 * time.Second)
	for i, c := range claims {
		resp, err := e.p.Reader.ReadLifecycle(ctx, c.Target())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.p.Service.Complete(ctx, c, resp); !core.HasCode(err, monitor.CodeClockRegressed) {
			t.Fatalf("%s: complete after the clock went back: %v, want %s", list[i], err, monitor.CodeClockRegressed)
		}
	}
	e.run(t, list, 60*time.Second)
	// The refused answer cost its CMS answer ("processing") and an expired
	// lease: 3 claims, 3 requests, published.
	e.wantFinal(t, list, monitor.StateTerminal, "published", 3, 3)
	e.stack.Check(t, invariant.Options{Texts: texts(list)})
}

func faultMode(m int) faultinject.Mode { return faultinject.Mode(m) }

func summary(s harness.ESMStats) string {
	return fmt.Sprintf("invocations %d messages %d item-failures %d sweeps %d", s.Invocations, s.Messages, s.ItemFailures, s.Sweeps)
}
