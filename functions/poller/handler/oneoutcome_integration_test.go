package handler_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/eventbridge"

	"github.com/localeflow/localeflow/adapters/cms/cmstest"
	"github.com/localeflow/localeflow/adapters/eventbus"
	"github.com/localeflow/localeflow/adapters/monitordb"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/functions/poller/handler"
)

// crashingBus puts events on the real bus and, while armed, sets crashed
// after the first accepted localeflow.change.terminal of id (and disarms):
// the poller dies right after that publish.
type crashingBus struct {
	real    eventbus.EventBridgeAPI
	id      string
	armed   *atomic.Bool
	crashed *atomic.Bool
}

func (b crashingBus) PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, opts ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	out, err := b.real.PutEvents(ctx, in, opts...)
	if err == nil && out.FailedEntryCount == 0 {
		for _, e := range in.Entries {
			var d map[string]any
			if json.Unmarshal([]byte(*e.Detail), &d) == nil && d["event_id"] == b.id && b.armed.CompareAndSwap(true, false) {
				b.crashed.Store(true)
			}
		}
	}
	return out, err
}

// The seed-1448 shape on DynamoDB Local and the local bus: a sweep polls a
// change the CMS reports published, the poller crashes right after the
// first publish of its outcome (none of its later writes reach the table),
// then the CMS is unavailable while sweeps run a lease apart until the
// change is final and owes nothing. On the real store the terminal
// finishing write (with its outbox key, conditional on the whole claim)
// comes before the publish, so every published outcome is the final
// record's and the change ends terminal/published; before issue 24 it
// ended failed after being announced terminal.
func TestIntegrationTerminalCrashReclaimOutageKeepsOneOutcome(t *testing.T) {
	const id = "evt-poller-0001"
	crashed, armed := &atomic.Bool{}, &atomic.Bool{}
	armed.Store(true)
	var ddb *monitordb.Store
	e := setupStack(t, func(e *stackEnv, _ string, c *handler.Config) {
		var err error
		if ddb, err = monitordb.New(e.ddb, e.res.table); err != nil {
			t.Fatal(err)
		}
		svc, err := monitor.NewService(crashStore{Store: ddb, crashed: crashed}, e.clock, nil, monitor.Config{WorkerID: "poller-it", SweepGrace: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		c.Monitor = svc
		c.Bus = eventbus.New(crashingBus{real: e.bus, id: id, armed: armed, crashed: crashed}, e.res.bus)
	})
	e.cms.Script(id, append([]cmstest.Step{cmstest.StatusStep("published")}, cmstest.Repeat(cmstest.HTTPStep(503), 10)...)...)
	ctx := context.Background()
	sweep := func() {
		t.Helper()
		e.clock.Advance(time.Millisecond) // past the sweep grace
		if _, err := e.invoke.Invoke(ctx, testdata(t, "scheduled.json")); err != nil {
			t.Fatalf("sweep: %v", err)
		}
	}
	if _, err := e.invoke.Invoke(ctx, testdata(t, "sqs_intake.json")); err != nil {
		t.Fatalf("intake: %v", err)
	}
	sweep()
	if !crashed.Load() {
		t.Fatal("the sweep published nothing for the change")
	}
	crashed.Store(false)
	for i := 0; ; i++ {
		st, err := e.svc.Status(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		owed, err := ddb.Owed(ctx, 1<<62, 10)
		if err != nil {
			t.Fatal(err)
		}
		if st.State.Final() && len(owed) == 0 {
			break
		}
		if i == 12 {
			t.Fatalf("not final after 12 sweeps: %+v (owed %v)", st, owed)
		}
		e.clock.Advance(e.svc.Config().Lease + time.Second)
		sweep()
	}
	st, err := e.svc.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != monitor.StateTerminal || st.RemoteStatus != "published" {
		t.Fatalf("the CMS answered published, the change ended %s %s %s", st.State, st.RemoteStatus, st.LastErrorCode)
	}
	n := 0
	for _, d := range e.bus.Details() {
		if d["event_id"] != id {
			continue
		}
		n++
		if d["state"] != "terminal" || d["remote_status"] != "published" || d["error_code"] != nil ||
			d["outcome_id"] != monitor.OutcomeID(id, st.State, st.Updated.UnixMilli()) {
			t.Errorf("published outcome %d %v is not the final record's (%s %s, finished %d)", n, d, st.State, st.RemoteStatus, st.Updated.UnixMilli())
		}
	}
	if n == 0 {
		t.Fatal("no outcome published")
	}
}
