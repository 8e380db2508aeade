package monitordb

import (
	"context"
	"fmt"
	"os"
	"strconv"
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
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/lifecycle"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/monitor/monitortest"
	"github.com/localeflow/localeflow/dev/localtest"
)

// requestCounter counts every DynamoDB HTTP attempt (retries included) by
// operation, through a middleware in the Deserialize step.
type requestCounter struct {
	mu    sync.Mutex
	total int64
	byOp  map[string]int64
}

func (c *requestCounter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total, c.byOp = 0, map[string]int64{}
}

func (c *requestCounter) snapshot() (int64, map[string]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ops := make(map[string]int64, len(c.byOp))
	for k, v := range c.byOp {
		ops[k] = v
	}
	return c.total, ops
}

func (c *requestCounter) install(stack *middleware.Stack) error {
	return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("localeflowRequestCounter",
		func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
			c.mu.Lock()
			c.total++
			c.byOp[awsmiddleware.GetOperationName(ctx)]++
			c.mu.Unlock()
			return next.HandleDeserialize(ctx, in)
		}), middleware.After)
}

// benchTable is a fresh monitor table with a request-counting client.
func benchTable(b *testing.B) (*dynamodb.Client, string, *requestCounter) {
	_, table := newTable(b)
	counter := &requestCounter{byOp: map[string]int64{}}
	db := awsclient.DynamoDB(localtest.Config(b), func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, counter.install)
	})
	return db, table, counter
}

// seed writes recs with parallel BatchWriteItem calls (25 items each).
func seed(b *testing.B, db *dynamodb.Client, table string, recs []monitor.Record) {
	b.Helper()
	const workers = 8
	batches := make(chan []monitor.Record)
	var wg sync.WaitGroup
	var failed atomic.Value
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for batch := range batches {
				if err := writeBatch(db, table, batch); err != nil {
					failed.Store(err)
				}
			}
		}()
	}
	for start := 0; start < len(recs); start += 25 {
		batches <- recs[start:min(start+25, len(recs))]
	}
	close(batches)
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		b.Fatalf("seed: %v", err)
	}
}

func writeBatch(db *dynamodb.Client, table string, batch []monitor.Record) error {
	var reqs []types.WriteRequest
	for _, rec := range batch {
		av, err := encode(rec)
		if err != nil {
			return err
		}
		reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: av}})
	}
	pending := map[string][]types.WriteRequest{table: reqs}
	for round := 0; len(pending) > 0; round++ {
		if round == 20 {
			return fmt.Errorf("unprocessed items after %d rounds", round)
		}
		out, err := db.BatchWriteItem(context.Background(), &dynamodb.BatchWriteItemInput{RequestItems: pending})
		if err != nil {
			return err
		}
		pending = out.UnprocessedItems
	}
	return nil
}

func pendingRecords(prefix string, n int, nowMS int64) []monitor.Record {
	recs := make([]monitor.Record, n)
	for i := range recs {
		recs[i] = monitortest.NewRecord(fmt.Sprintf("%s-%06d", prefix, i), nowMS)
	}
	return recs
}

func terminalRecords(prefix string, n int, nowMS int64) []monitor.Record {
	recs := pendingRecords(prefix, n, nowMS)
	for i := range recs {
		recs[i].State, recs[i].RemoteStatus = monitor.StateTerminal, "cancelled"
	}
	return recs
}

type publishedReader struct{}

func (publishedReader) Timeout() time.Duration { return time.Second }

func (publishedReader) ReadLifecycle(_ context.Context, target lifecycle.Target) (lifecycle.Response, error) {
	rec := monitor.Record{EventID: target.EventID, SiteID: target.SiteID, PlanID: target.PlanID,
		WebsiteVersion: target.WebsiteVersion, SourceSequence: target.SourceSequence, JobCount: target.JobCount}
	snap := monitortest.Snapshot(rec, "published")
	return lifecycle.Parse(target, snap.RequestID, snap.Canonical)
}

// BenchmarkRequestsPerCompletedPoll is a floor, not the deployed path: it
// calls the monitor service directly (one Due over all wake shards, then
// PollOnce per item with bounded concurrency) over 1,000 due items and
// reports DynamoDB requests per completed poll, with the outbox clear of
// terminal outcomes reported apart. The path Lambda runs (Handler.Sweep
// and Handler.HandleSQS) is measured by BenchmarkRealPathRequests in
// functions/poller/handler.
func BenchmarkRequestsPerCompletedPoll(b *testing.B) {
	const items = 1000
	db, table, counter := benchTable(b)
	s, _ := New(db, table)
	clock := &benchClock{ms: monitortest.T0}
	svc, err := monitor.NewService(s, clock, nil, monitor.Config{WorkerID: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var requests, polls, outboxRequests, owedTotal int64
	ops := map[string]int64{}
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		seed(b, db, table, pendingRecords(fmt.Sprintf("evt-r%d", i), items, clock.now()))
		clock.advance(1)
		counter.reset()
		b.StartTimer()
		ids, err := svc.Due(ctx, items)
		if err != nil {
			b.Fatal(err)
		}
		var done atomic.Int64
		var owedMu sync.Mutex
		var owed []monitor.Announcement
		work := make(chan string)
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for id := range work {
					out, err := svc.PollOnce(ctx, id, publishedReader{})
					if err != nil {
						b.Error(err)
						continue
					}
					if out.Polled && out.State == monitor.StateTerminal {
						done.Add(1)
					}
					if out.Owed != nil {
						owedMu.Lock()
						owed = append(owed, *out.Owed)
						owedMu.Unlock()
					}
				}
			}()
		}
		for _, id := range ids {
			work <- id
		}
		close(work)
		wg.Wait()
		b.StopTimer()
		if done.Load() != items {
			b.Fatalf("%d of %d polls completed", done.Load(), items)
		}
		n, byOp := counter.snapshot()
		requests += n
		polls += done.Load()
		for k, v := range byOp {
			ops[k] += v
		}
		// The outbox: clearing each owed outcome once its event is
		// published (the publish itself is EventBridge, not counted).
		counter.reset()
		for _, a := range owed {
			if err := svc.Announced(ctx, a); err != nil {
				b.Fatal(err)
			}
		}
		n, _ = counter.snapshot()
		outboxRequests += n
		owedTotal += int64(len(owed))
		b.StartTimer()
	}
	if owedTotal != polls {
		b.Fatalf("%d outcomes owed for %d terminal polls", owedTotal, polls)
	}
	b.ReportMetric(float64(outboxRequests)/float64(owedTotal), "outbox-requests/terminal")
	b.ReportMetric(float64(requests)/float64(polls), "requests/poll")
	for op, n := range ops {
		b.ReportMetric(float64(n)/float64(polls), op+"/poll")
	}
}

// BenchmarkClaimReadUnits measures the read capacity and requests
// consumed to find and claim 100 due items (ClaimDue(100)) with three
// tables behind them: nothing else, N watched changes that are not due
// (wake time a day ahead: in the wake index, past the key condition), and
// N terminal items besides (not in the wake index).
// N = LOCALEFLOW_BENCH_TERMINAL (default 100,000). It reports each and
// the ratios to the empty table; it fails unless every ClaimDue claims
// all 100 and the ratios are ≤ 1.1: discovery reads only due keys. After
// each measurement the 100 claims are finished (published: out of the
// wake index, not counted), so the next round's listing does not meet
// them leased (a leased record keeps its wake key: docs/design.md "The
// claim does not move the wake key"; the benchmark failed on that with
// "ClaimDue = 0 claims" once the claim stopped moving the key).
func BenchmarkClaimReadUnits(b *testing.B) {
	background := 100_000
	if v := os.Getenv("LOCALEFLOW_BENCH_TERMINAL"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			b.Fatalf("LOCALEFLOW_BENCH_TERMINAL=%q", v)
		}
		background = n
	}
	db, table, counter := benchTable(b)
	s, _ := New(db, table)
	readUnits := s.MeasureCapacity()
	clock := &benchClock{ms: monitortest.T0}
	svc, err := monitor.NewService(s, clock, nil, monitor.Config{WorkerID: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	round := 0
	measure := func() (float64, int64) {
		b.StopTimer()
		seed(b, db, table, pendingRecords(fmt.Sprintf("evt-d%d", round), 100, clock.now()))
		round++
		clock.advance(1)
		before, _ := readUnits()
		counter.reset()
		b.StartTimer()
		claims, err := svc.ClaimDue(ctx, 100)
		b.StopTimer()
		if err != nil || len(claims) != 100 {
			b.Fatalf("ClaimDue = %d claims, %v", len(claims), err)
		}
		after, _ := readUnits()
		n, _ := counter.snapshot()
		for _, c := range claims {
			if out, err := svc.Poll(ctx, c, publishedReader{}); err != nil || out.State != monitor.StateTerminal {
				b.Fatalf("finishing %s: %+v, %v", c.EventID, out, err)
			}
		}
		clock.advance(1)
		b.StartTimer()
		return after - before, n
	}
	seedTimed := func(what string, recs []monitor.Record) {
		start := time.Now()
		seed(b, db, table, recs)
		b.Logf("seeded %d %s items in %s (load %s)", len(recs), what, time.Since(start).Round(time.Millisecond), loadavg())
	}
	empty, emptyReq := measure()
	watching := pendingRecords("evt-w", background, clock.now())
	for i := range watching {
		watching[i].NextPollMS = clock.now() + 86_400_000
	}
	seedTimed("watched-not-due", watching)
	watched, watchedReq := measure()
	seedTimed("terminal", terminalRecords("evt-t", background, clock.now()))
	var full float64
	var fullReq int64
	for b.Loop() {
		full, fullReq = measure()
	}
	if empty <= 0 {
		b.Fatalf("no read capacity reported (%v): does the endpoint return ConsumedCapacity?", empty)
	}
	if watched/empty > 1.1 || full/empty > 1.1 {
		b.Fatalf("discovery read units grew with the table: %.1f empty, %.1f with %d watched-not-due, %.1f with %d terminal besides (want ratio ≤ 1.1)",
			empty, watched, background, full, background)
	}
	b.ReportMetric(empty, "RCU-0")
	b.ReportMetric(watched, "RCU-N-watched")
	b.ReportMetric(full, "RCU-N-terminal")
	b.ReportMetric(watched/empty, "RCU-ratio-watched")
	b.ReportMetric(full/empty, "RCU-ratio")
	b.ReportMetric(float64(emptyReq), "requests-0")
	b.ReportMetric(float64(watchedReq), "requests-N-watched")
	b.ReportMetric(float64(fullReq), "requests-N-terminal")
	b.ReportMetric(float64(background), "background-items")
}

// loadavg is /proc/loadavg's first three fields ("" where unreadable).
func loadavg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(raw))
	return strings.Join(f[:min(3, len(f))], " ")
}

// benchClock is a settable millisecond clock.
type benchClock struct {
	mu sync.Mutex
	ms int64
}

func (c *benchClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return core.FromMillis(c.ms)
}

func (c *benchClock) now() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ms
}

func (c *benchClock) advance(ms int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ms += ms
}

var _ = aws.String
