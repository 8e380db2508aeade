package handler_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/localeflow/localeflow/adapters/awsclient"
	"github.com/localeflow/localeflow/adapters/cms"
	"github.com/localeflow/localeflow/adapters/cms/cmstest"
	"github.com/localeflow/localeflow/adapters/delayqueue"
	"github.com/localeflow/localeflow/adapters/eventbus"
	"github.com/localeflow/localeflow/adapters/monitordb"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/dev/localtest"
	"github.com/localeflow/localeflow/dev/proof/meter"
	"github.com/localeflow/localeflow/functions/poller/handler"
	"github.com/localeflow/localeflow/topology"
)

// unitsByTarget adds up the consumed capacity DynamoDB reports
// (ReturnConsumedCapacity=INDEXES, which the meter asks for) by table and
// by global secondary index.
type unitsByTarget struct {
	mu    sync.Mutex
	units map[string]float64 // "table" or "index:<name>"
}

func (u *unitsByTarget) reset() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.units = map[string]float64{}
}

func (u *unitsByTarget) snapshot() map[string]float64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make(map[string]float64, len(u.units))
	for k, v := range u.units {
		out[k] = v
	}
	return out
}

func (u *unitsByTarget) install(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("localeflowUnitsByTarget",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			out, meta, err := next.HandleInitialize(ctx, in)
			var cc []ddbtypes.ConsumedCapacity
			switch o := out.Result.(type) {
			case *dynamodb.UpdateItemOutput:
				if o.ConsumedCapacity != nil {
					cc = append(cc, *o.ConsumedCapacity)
				}
			case *dynamodb.PutItemOutput:
				if o.ConsumedCapacity != nil {
					cc = append(cc, *o.ConsumedCapacity)
				}
			case *dynamodb.GetItemOutput:
				if o.ConsumedCapacity != nil {
					cc = append(cc, *o.ConsumedCapacity)
				}
			case *dynamodb.QueryOutput:
				if o.ConsumedCapacity != nil {
					cc = append(cc, *o.ConsumedCapacity)
				}
			}
			u.mu.Lock()
			defer u.mu.Unlock()
			for _, c := range cc {
				if c.Table != nil && c.Table.CapacityUnits != nil {
					u.units["table"] += *c.Table.CapacityUnits
				}
				for name, ix := range c.GlobalSecondaryIndexes {
					if ix.CapacityUnits != nil {
						u.units["index:"+name] += *ix.CapacityUnits
					}
				}
			}
			return out, meta, err
		}), middleware.After)
}

// realPathEnv is the poller handler on adapters/monitordb against
// DynamoDB Local, with a metered DynamoDB client, the signed test CMS
// (no added latency), and fakes for SQS and EventBridge (not counted here).
type realPathEnv struct {
	clock *clock
	svc   *monitor.Service
	cms   *cmstest.CMS
	h     *handler.Handler
	meter *meter.Meter
	units *unitsByTarget
	sqs   *fakeSQS
	// reader is the CMS client the handler uses.
	reader *cms.Client
	// table is the monitor table's name.
	table string
}

func realPathSetup(b testing.TB) *realPathEnv {
	b.Helper()
	// The paths advance the clock 1 s after registering: past this sweep
	// grace (the grace moves what a sweep lists, not what a poll costs).
	return realPathSetupWith(b, monitor.Config{WorkerID: "bench", SweepGrace: time.Millisecond})
}

// realPathSetupWith is realPathSetup with the monitor configured by mcfg.
func realPathSetupWith(b testing.TB, mcfg monitor.Config) *realPathEnv {
	b.Helper()
	localtest.Require(b)
	_, spec := localtest.Table(b, func(t topology.Topology) topology.Table { return t.Monitor })
	e := &realPathEnv{clock: &clock{now: time.Now().UTC().Truncate(time.Millisecond)}, meter: meter.New(),
		units: &unitsByTarget{units: map[string]float64{}}, sqs: &fakeSQS{}, table: spec.Name}
	db := awsclient.DynamoDB(localtest.Config(b), func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, e.meter.Install, e.units.install)
	})
	store, err := monitordb.New(db, spec.Name)
	if err != nil {
		b.Fatal(err)
	}
	e.svc, err = monitor.NewService(store, e.clock, nil, mcfg)
	if err != nil {
		b.Fatal(err)
	}
	e.cms = cmstest.New(testKey)
	srv := e.cms.Start()
	b.Cleanup(srv.Close)
	reader, err := cms.New(cms.Config{BaseURL: srv.URL, Key: testKey, Timeout: 5 * time.Second, Clock: e.clock})
	if err != nil {
		b.Fatal(err)
	}
	e.reader = reader
	e.h, err = handler.New(handler.Config{Monitor: e.svc, Reader: reader, Clock: e.clock,
		Queue: delayqueue.New(e.sqs, "https://sqs.local/poll"), Bus: eventbus.New(&fakeBus{}, "bus")})
	if err != nil {
		b.Fatal(err)
	}
	return e
}

// register registers n changes (ids with prefix) through the service and
// scripts the CMS to answer each with status.
func (e *realPathEnv) register(b testing.TB, prefix string, n int, status string) []string {
	b.Helper()
	ids := make([]string, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%05d", prefix, i)
		e.cms.Put(cmstest.Change{EventID: ids[i], SiteID: "site-bench", PlanID: "plan-" + ids[i], WebsiteVersion: "v1",
			SourceSequence: 1, RequiredLocales: []string{"de-DE"}})
		e.cms.Script(ids[i], cmstest.StatusStep(status))
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			registerDirect(b, e.svc, ids[i], "site-bench", 1)
		}()
	}
	wg.Wait()
	return ids
}

// batches builds SQS events of up to 10 due poll envelopes for ids.
func (e *realPathEnv) batches(b testing.TB, ids []string) []events.SQSEvent {
	b.Helper()
	var out []events.SQSEvent
	for start := 0; start < len(ids); start += 10 {
		var ev events.SQSEvent
		for _, id := range ids[start:min(start+10, len(ids))] {
			env, err := delayqueue.NewEnvelope(handler.KindPoll, id, "", e.clock.Now())
			if err != nil {
				b.Fatal(err)
			}
			body, err := env.Marshal()
			if err != nil {
				b.Fatal(err)
			}
			ev.Records = append(ev.Records, events.SQSMessage{MessageId: "m-" + id, Body: string(body),
				Attributes: map[string]string{"ApproximateReceiveCount": "1"}, EventSource: "aws:sqs"})
		}
		out = append(out, ev)
	}
	return out
}

// BenchmarkRealPathRequests measures DynamoDB requests and consumed
// capacity per completed poll on the path Lambda runs: Handler.Sweep (the
// scheduled event) and Handler.HandleSQS (batches of 10 due poll
// messages) on adapters/monitordb against DynamoDB Local, with a terminal
// ("published") and a non-terminal ("processing") CMS answer. Each round
// registers 1,000 changes (not counted), then runs the path over them.
// Target: ≤ 2.05 requests per completed poll on every variant.
func BenchmarkRealPathRequests(b *testing.B) {
	const items = 1000
	for _, path := range []string{"sweep", "sqs"} {
		for _, status := range []string{"published", "processing"} {
			b.Run(path+"/"+status, func(b *testing.B) {
				e := realPathSetup(b)
				var polls int64
				var requests map[string]int64
				units := map[string]float64{}
				var readUnits, writeUnits float64
				requests = map[string]int64{}
				for round := 0; b.Loop(); round++ {
					b.StopTimer()
					// Earlier rounds' non-terminal changes are due again
					// after the poll interval; stay within it.
					ids := e.register(b, fmt.Sprintf("evt-%s-%s-r%d", path, status, round), items, status)
					var sqsEvents []events.SQSEvent
					if path == "sqs" {
						sqsEvents = e.batches(b, ids)
					}
					e.clock.Advance(time.Second)
					e.meter.Reset()
					e.units.reset()
					b.StartTimer()
					var polled int
					if path == "sweep" {
						res, err := e.h.Sweep(context.Background())
						if err != nil || res.Errors != 0 {
							b.Fatalf("sweep %+v: %v", res, err)
						}
						polled = res.Polled
					} else {
						for _, ev := range sqsEvents {
							resp := e.h.HandleSQS(context.Background(), ev)
							if len(resp.BatchItemFailures) != 0 {
								b.Fatalf("batch item failures %+v", resp.BatchItemFailures)
							}
						}
						polled = items
					}
					b.StopTimer()
					if polled != items {
						b.Fatalf("polled %d of %d", polled, items)
					}
					snap := e.meter.Snapshot()
					for op, n := range snap.Requests {
						requests[op] += n
					}
					readUnits += snap.ReadUnits
					writeUnits += snap.WriteUnits
					for k, v := range e.units.snapshot() {
						units[k] += v
					}
					polls += int64(polled)
					for _, id := range ids {
						st, err := e.svc.Status(context.Background(), id)
						want := monitor.StateWatching
						if status == "published" {
							want = monitor.StateTerminal
						}
						if err != nil || st.State != want {
							b.Fatalf("%s: state %s, %v (want %s)", id, st.State, err, want)
						}
					}
					b.StartTimer()
				}
				var total int64
				for _, n := range requests {
					total += n
				}
				p := float64(polls)
				b.ReportMetric(float64(total)/p, "requests/poll")
				ops := make([]string, 0, len(requests))
				for op := range requests {
					ops = append(ops, op)
				}
				sort.Strings(ops)
				for _, op := range ops {
					b.ReportMetric(float64(requests[op])/p, op+"/poll")
				}
				b.ReportMetric(readUnits/p, "RCU/poll")
				b.ReportMetric(writeUnits/p, "WCU/poll")
				for k, v := range units {
					b.ReportMetric(v/p, "units-"+k+"/poll")
				}
			})
		}
	}
}
