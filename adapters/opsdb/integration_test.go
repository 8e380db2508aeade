package opsdb_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/localeflow/localeflow/adapters/awsclient"
	"github.com/localeflow/localeflow/adapters/monitordb"
	"github.com/localeflow/localeflow/adapters/opsdb"
	"github.com/localeflow/localeflow/adapters/releasedb"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/health"
	"github.com/localeflow/localeflow/core/health/healthtest"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/dev/localtest"
	"github.com/localeflow/localeflow/topology"
)

const base = int64(1_764_460_800_000)

// readMeter counts, per DynamoDB operation, the requests, the items
// returned and the read capacity consumed (it asks every request for
// ReturnConsumedCapacity TOTAL).
type readMeter struct {
	mu       sync.Mutex
	requests map[string]int
	items    map[string]int
	rcu      float64
	rcuByOp  map[string]float64
}

func newReadMeter() *readMeter {
	return &readMeter{requests: map[string]int{}, items: map[string]int{}, rcuByOp: map[string]float64{}}
}

func (m *readMeter) reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests, m.items, m.rcu, m.rcuByOp = map[string]int{}, map[string]int{}, 0, map[string]float64{}
}

func (m *readMeter) snapshot() (map[string]int, map[string]int, float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps(m.requests), maps(m.items), m.rcu
}

func maps(in map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range in {
		out[k] = v
	}
	return out
}

func (m *readMeter) install(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("healthReadMeter",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			switch p := in.Parameters.(type) {
			case *dynamodb.QueryInput:
				p.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
			case *dynamodb.BatchGetItemInput:
				p.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
			case *dynamodb.GetItemInput:
				p.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
			case *dynamodb.ScanInput:
				p.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
			}
			out, md, err := next.HandleInitialize(ctx, in)
			op := awsmiddleware.GetOperationName(ctx)
			m.mu.Lock()
			defer m.mu.Unlock()
			m.requests[op]++
			var caps []types.ConsumedCapacity
			switch o := out.Result.(type) {
			case *dynamodb.QueryOutput:
				m.items[op] += len(o.Items)
				if o.ConsumedCapacity != nil {
					caps = append(caps, *o.ConsumedCapacity)
				}
			case *dynamodb.BatchGetItemOutput:
				for _, items := range o.Responses {
					m.items[op] += len(items)
				}
				caps = append(caps, o.ConsumedCapacity...)
			case *dynamodb.GetItemOutput:
				if len(o.Item) > 0 {
					m.items[op]++
				}
				if o.ConsumedCapacity != nil {
					caps = append(caps, *o.ConsumedCapacity)
				}
			case *dynamodb.ScanOutput:
				m.items[op] += len(o.Items)
				if o.ConsumedCapacity != nil {
					caps = append(caps, *o.ConsumedCapacity)
				}
			}
			for _, c := range caps {
				m.rcu += aws.ToFloat64(c.CapacityUnits)
				m.rcuByOp[op] += aws.ToFloat64(c.CapacityUnits)
			}
			return out, md, err
		}), middleware.After)
}

type clock struct{ ms atomic.Int64 }

func (c *clock) Now() time.Time { return core.FromMillis(c.ms.Load()) }

// bundle is one test's fresh stack and everything wired on it.
type bundle struct {
	db       *dynamodb.Client
	meter    *readMeter
	topo     topology.Topology
	monitor  *monitordb.Store
	release  *releasedb.Store
	reader   *opsdb.ReleaseReader
	checker  *health.Checker
	clock    *clock
	requeuer *opsdb.Requeuer
	auditor  *opsdb.Auditor
}

func setup(t testing.TB) *bundle {
	t.Helper()
	localtest.Require(t)
	topo := localtest.Topology(t)
	b := &bundle{meter: newReadMeter(), topo: topo, clock: &clock{}}
	b.clock.ms.Store(base)
	b.db = awsclient.DynamoDB(localtest.Config(t), func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, b.meter.install)
	})
	var err error
	if b.monitor, err = monitordb.New(b.db, topo.Monitor.Name); err != nil {
		t.Fatal(err)
	}
	b.release = releasedb.New(b.db, topo.Release.Name)
	if b.reader, err = opsdb.NewReleaseReader(b.db, topo.Release.Name); err != nil {
		t.Fatal(err)
	}
	items := opsdb.TableItems{DB: b.db, Table: topo.Monitor.Name}
	if b.checker, err = health.NewChecker(b.monitor, items, b.reader, b.clock, nil); err != nil {
		t.Fatal(err)
	}
	if b.requeuer, err = opsdb.NewRequeuer(b.monitor, b.db, topo.Monitor.Name); err != nil {
		t.Fatal(err)
	}
	if b.auditor, err = opsdb.NewAuditor(b.db, b.monitor, topo.Monitor.Name, topo.Release.Name); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *bundle) putMonitor(t testing.TB, recs ...monitor.Record) {
	t.Helper()
	for _, r := range recs {
		if _, created, err := b.monitor.Create(context.Background(), r); err != nil || !created {
			t.Fatalf("create %s: %v %v", r.EventID, created, err)
		}
	}
}

func (b *bundle) putRelease(t testing.TB, recs ...release.Record) {
	t.Helper()
	for _, r := range recs {
		if err := b.release.Put(context.Background(), r, 0); err != nil {
			t.Fatalf("put release record: %v", err)
		}
	}
}

// check runs health until want accepts it (the indexes are eventually
// consistent) or a few seconds pass; it returns the last report.
func (b *bundle) check(t testing.TB, want func(health.Report) bool) health.Report {
	t.Helper()
	var r health.Report
	var err error
	for range 50 {
		if r, err = b.checker.Check(context.Background()); err != nil {
			t.Fatalf("check: %v", err)
		}
		if want(r) {
			return r
		}
		time.Sleep(100 * time.Millisecond)
	}
	return r
}

func (b *bundle) tamper(t testing.TB, table string, key map[string]types.AttributeValue, update string, values map[string]types.AttributeValue) {
	t.Helper()
	in := &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: key, UpdateExpression: aws.String(update), ExpressionAttributeValues: values,
	}
	if strings.Contains(update, "#s") {
		in.ExpressionAttributeNames = map[string]string{"#s": "status"}
	}
	_, err := b.db.UpdateItem(context.Background(), in)
	if err != nil {
		t.Fatalf("tamper: %v", err)
	}
}

func monitorKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{topology.AttrEventID: &types.AttributeValueMemberS{Value: id}}
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

// TestHealthCountsEachState seeds one record of every monitor variant and
// every open or failed evidence and delivery state and checks each count
// on DynamoDB Local.
func TestHealthCountsEachState(t *testing.T) {
	b := setup(t)
	for _, v := range []string{healthtest.Pending, healthtest.Leased, healthtest.Watching, healthtest.RetryWait, healthtest.Failed, healthtest.Terminal, healthtest.RemoteFailure} {
		b.putMonitor(t, healthtest.MonitorRecord("evt-"+v, v, base))
	}
	b.putMonitor(t, healthtest.MonitorRecord("evt-terminal-2", healthtest.Terminal, base))
	for _, st := range []string{"pending", "leased", "retry_wait", "failed", "succeeded"} {
		b.putRelease(t, healthtest.Evidence("evt-rel", "req-"+st, st, base))
	}
	b.putRelease(t, healthtest.Delivery("evt-d1", "pending", base), healthtest.Delivery("evt-d2", "leased", base),
		healthtest.Delivery("evt-d3", "retry_wait", base), healthtest.Delivery("evt-d4", "succeeded", base))
	// Now: pending due, retry_wait due (base+1+5000), watching not yet
	// (base+1+30000), leases live.
	b.clock.ms.Store(base + 10_000)
	want := contract.MonitorHealth{
		Counts: map[string]int{"pending": 1, "leased": 1, "watching": 1, "retry_wait": 1, "failed": 1, "terminal": 3},
		Due:    2, Failed: 1, RemoteFailures: 1,
	}
	r := b.check(t, func(r health.Report) bool { return reflect.DeepEqual(r.Monitor, want) })
	if !reflect.DeepEqual(r.Monitor, want) {
		t.Fatalf("monitor = %+v, want %+v", r.Monitor, want)
	}
	if !r.TerminalApproximate {
		t.Fatal("terminal count not from the table's item count")
	}
	wantEvidence := contract.LeaseHealth{Counts: map[string]int{"pending": 1, "leased": 1, "retry_wait": 1, "failed": 1}, Open: 3, Due: 2, Failed: 1}
	wantDelivery := contract.LeaseHealth{Counts: map[string]int{"pending": 1, "leased": 1, "retry_wait": 1, "failed": 0}, Open: 3, Due: 2}
	if !reflect.DeepEqual(r.Release.Evidence, wantEvidence) || !reflect.DeepEqual(r.Release.Delivery, wantDelivery) {
		t.Fatalf("release = %+v", r.Release)
	}
	wantReasons := []string{health.ReasonEvidenceFailed, health.ReasonMonitorFailed, health.ReasonMonitorRemoteFailures}
	if r.Status != health.StatusBlocked || !slices.Equal(r.Reasons, wantReasons) {
		t.Fatalf("status %s reasons %v", r.Status, r.Reasons)
	}
	// Every item read is listed, attention first with its error code.
	if len(r.Items) != 6+4+3 || !r.Items[0].Attention {
		t.Fatalf("items = %+v", r.Items)
	}
	var codes []string
	for _, it := range r.Attention() {
		codes = append(codes, it.Kind+":"+it.EventID+":"+it.ErrorCode)
	}
	slices.Sort(codes)
	if !slices.Equal(codes, []string{"evidence:evt-rel:evidence.http_503", "monitor:evt-failed:cms.http_503", "monitor:evt-remote_failure:"}) {
		t.Fatalf("attention = %v", codes)
	}
}

// TestHealthBlockedConditions: each condition alone turns health blocked
// with its reason, on a fresh stack.
func TestHealthBlockedConditions(t *testing.T) {
	tests := []struct {
		name    string
		seed    func(t *testing.T, b *bundle)
		nowMS   int64
		reasons []string
		check   func(t *testing.T, r health.Report)
	}{
		{"ok baseline", func(t *testing.T, b *bundle) {
			b.putMonitor(t, healthtest.MonitorRecord("evt-1", healthtest.Leased, base), healthtest.MonitorRecord("evt-2", healthtest.Terminal, base))
		}, base + 5, nil, nil},
		{"expired monitor lease", func(t *testing.T, b *bundle) {
			b.putMonitor(t, healthtest.MonitorRecord("evt-1", healthtest.Leased, base))
		}, base + 1 + healthtest.LeaseMS, []string{health.ReasonMonitorExpiredLeases}, func(t *testing.T, r health.Report) {
			if r.Monitor.ExpiredLeases != 1 || !r.Items[0].LeaseExpired {
				t.Fatalf("monitor = %+v", r.Monitor)
			}
		}},
		{"failed monitor item", func(t *testing.T, b *bundle) {
			b.putMonitor(t, healthtest.MonitorRecord("evt-1", healthtest.Failed, base))
		}, base + 5, []string{health.ReasonMonitorFailed}, nil},
		{"remote failure status", func(t *testing.T, b *bundle) {
			b.putMonitor(t, healthtest.MonitorRecord("evt-1", healthtest.RemoteFailure, base))
		}, base + 5, []string{health.ReasonMonitorRemoteFailures}, func(t *testing.T, r health.Report) {
			if r.Items[0].RemoteStatus != "publication_failed" {
				t.Fatalf("item = %+v", r.Items[0])
			}
		}},
		{"tampered monitor record", func(t *testing.T, b *bundle) {
			b.putMonitor(t, healthtest.MonitorRecord("evt-1", healthtest.Watching, base))
			b.tamper(t, b.topo.Monitor.Name, monitorKey("evt-1"), "SET site_id = :v", map[string]types.AttributeValue{":v": s("site-elsewhere")})
		}, base + 5, []string{monitor.CodeStateInvalid, health.ReasonMonitorFailed}, func(t *testing.T, r health.Report) {
			it := r.Items[0]
			if !it.Invalid || it.EventID != "evt-1" || it.ErrorCode != monitor.CodeStateInvalid || r.Monitor.Counts["watching"] != 0 {
				t.Fatalf("item = %+v monitor %+v", it, r.Monitor)
			}
		}},
		{"expired evidence lease", func(t *testing.T, b *bundle) {
			b.putRelease(t, healthtest.Evidence("evt-1", "req-1", "leased", base))
		}, base + 1 + healthtest.LeaseMS, []string{health.ReasonEvidenceExpiredLeases}, nil},
		{"failed evidence", func(t *testing.T, b *bundle) {
			b.putRelease(t, healthtest.Evidence("evt-1", "req-1", "failed", base))
		}, base + 5, []string{health.ReasonEvidenceFailed}, nil},
		{"failed delivery", func(t *testing.T, b *bundle) {
			b.putRelease(t, healthtest.Delivery("evt-1", "failed", base))
		}, base + 5, []string{health.ReasonDeliveryFailed}, nil},
		{"tampered evidence record", func(t *testing.T, b *bundle) {
			b.putRelease(t, healthtest.Evidence("evt-1", "req-1", "pending", base))
			key := map[string]types.AttributeValue{topology.AttrPK: s("event#evt-1"), topology.AttrSK: s("evidence#req-1")}
			// status succeeded while the wake keys stay: the index keys no
			// longer agree with the state.
			b.tamper(t, b.topo.Release.Name, key, "SET #s = :v", map[string]types.AttributeValue{":v": s("succeeded")})
		}, base + 5, []string{health.CodeEvidenceInvalid, health.ReasonEvidenceFailed}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t)
			tc.seed(t, b)
			b.clock.ms.Store(tc.nowMS)
			want := append([]string{}, tc.reasons...)
			slices.Sort(want)
			r := b.check(t, func(r health.Report) bool { return slices.Equal(r.Reasons, want) })
			if !slices.Equal(r.Reasons, want) {
				t.Fatalf("reasons %v, want %v (%+v)", r.Reasons, want, r)
			}
			wantStatus := health.StatusOK
			if len(want) > 0 {
				wantStatus = health.StatusBlocked
			}
			if r.Status != wantStatus {
				t.Fatalf("status %s, want %s", r.Status, wantStatus)
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}

// TestForeignMonitorAttributeSeenByAuditNotHealth: the census projects
// onto the monitor record's own attributes (the health role may read
// nothing else), so an attribute outside the layout is invisible to health;
// the audit (and the poller's own reads) still mark the record corrupt.
func TestForeignMonitorAttributeSeenByAuditNotHealth(t *testing.T) {
	b := setup(t)
	b.putMonitor(t, healthtest.MonitorRecord("evt-1", healthtest.Pending, base))
	b.tamper(t, b.topo.Monitor.Name, monitorKey("evt-1"), "SET note = :v", map[string]types.AttributeValue{":v": s("hello")})
	b.clock.ms.Store(base + 5)
	r := b.check(t, func(r health.Report) bool { return r.Monitor.Counts["pending"] == 1 })
	if r.Monitor.Counts["pending"] != 1 || len(r.Reasons) != 0 {
		t.Fatalf("health saw the foreign attribute: reasons %v monitor %+v", r.Reasons, r.Monitor)
	}
	rep, err := b.auditor.Audit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Invalid) != 1 || rep.Invalid[0].EventID != "evt-1" || rep.Invalid[0].Code != monitor.CodeStateInvalid {
		t.Fatalf("audit findings %+v, want evt-1 %s", rep.Invalid, monitor.CodeStateInvalid)
	}
}

// TestHealthReadsOnlyOpenAndAttentionItems is the acceptance check: with
// 10 open records (monitor and release) and 2 needing attention, a health
// check reads exactly those 12 items and consumes the same read capacity
// whether the monitor table holds 0 or 1,000 terminal records.
func TestHealthReadsOnlyOpenAndAttentionItems(t *testing.T) {
	b := setup(t)
	seedOpen(t, b)
	before := measureCheck(t, b, 0)
	seedTerminal(t, b, 1000)
	after := measureCheck(t, b, 1000)
	t.Logf("0 terminal: %d items read, %.1f RCU, requests %v", before.items, before.rcu, before.requests)
	t.Logf("1,000 terminal: %d items read, %.1f RCU, requests %v", after.items, after.rcu, after.requests)
	b.meter.mu.Lock()
	t.Logf("RCU by operation (last check): %v", b.meter.rcuByOp)
	b.meter.mu.Unlock()
	if before.items != 12 || after.items != 12 {
		t.Fatalf("health read %d and %d items, want 12 (10 open + 2 attention)", before.items, after.items)
	}
	if after.rcu != before.rcu || !reflect.DeepEqual(after.requests, before.requests) {
		t.Fatalf("cost grew with terminal records: %.1f -> %.1f RCU, %v -> %v", before.rcu, after.rcu, before.requests, after.requests)
	}
	if after.requests["Scan"] != 0 {
		t.Fatal("health scanned a table")
	}
}

// seedOpen writes 10 open records (6 monitor watching, 3 evidence, 1
// delivery) and 2 needing attention (a failed monitor record and a failed
// evidence request).
func seedOpen(t testing.TB, b *bundle) {
	t.Helper()
	for i := range 6 {
		b.putMonitor(t, healthtest.MonitorRecord(fmt.Sprintf("evt-open-%d", i), healthtest.Watching, base))
	}
	b.putRelease(t, healthtest.Evidence("evt-open-0", "req-1", "pending", base), healthtest.Evidence("evt-open-0", "req-2", "leased", base),
		healthtest.Evidence("evt-open-1", "req-3", "retry_wait", base), healthtest.Delivery("evt-open-2", "pending", base))
	b.putMonitor(t, healthtest.MonitorRecord("evt-failed", healthtest.Failed, base))
	b.putRelease(t, healthtest.Evidence("evt-open-3", "req-4", "failed", base))
}

type cost struct {
	items    int
	rcu      float64
	requests map[string]int
	elapsed  time.Duration
}

// measureCheck waits until health sees the 12 seeded items and at least
// terminal terminal records, then measures one check.
func measureCheck(t testing.TB, b *bundle, terminal int) cost {
	t.Helper()
	b.clock.ms.Store(base + 10)
	r := b.check(t, func(r health.Report) bool { return len(r.Items) == 12 && r.Monitor.Counts["terminal"] >= terminal })
	if len(r.Items) != 12 || r.Monitor.Counts["terminal"] < terminal {
		t.Fatalf("health sees %d items, %d terminal", len(r.Items), r.Monitor.Counts["terminal"])
	}
	b.meter.reset()
	start := time.Now()
	if _, err := b.checker.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	requests, items, rcu := b.meter.snapshot()
	return cost{items: items["BatchGetItem"] + items["GetItem"] + items["Scan"], rcu: rcu, requests: requests, elapsed: elapsed}
}

func seedTerminal(t testing.TB, b *bundle, n int) {
	t.Helper()
	ids := make(chan int)
	var wg sync.WaitGroup
	var failed atomic.Value
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ids {
				rec := healthtest.MonitorRecord(fmt.Sprintf("evt-done-%06d", i), healthtest.Terminal, base)
				if _, _, err := b.monitor.Create(context.Background(), rec); err != nil {
					failed.Store(err)
				}
			}
		}()
	}
	for i := range n {
		ids <- i
	}
	close(ids)
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		t.Fatalf("seed terminal records: %v", err)
	}
}
