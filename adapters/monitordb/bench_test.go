package monitordb

import (
	"context"
	"fmt"
	"os"
	"strconv"
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

// BenchmarkClaimReadUnits measures the read capacity consumed to find and
// claim 100 due items with 0 and with N terminal items in the table
// (N = LOCALEFLOW_BENCH_TERMINAL, default 100,000) and reports both and
// their ratio. Target ratio ≤ 1.1: terminal items are not in the wake
// index, so discovery never reads them.
func BenchmarkClaimReadUnits(b *testing.B) {
	terminal := 100_000
	if v := os.Getenv("LOCALEFLOW_BENCH_TERMINAL"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			b.Fatalf("LOCALEFLOW_BENCH_TERMINAL=%q", v)
		}
		terminal = n
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
		seed(b, db, table, pendingRecords(fmt.Sprintf("evt-d%d", round), 100, clock.now()))
		round++
		clock.advance(1)
		before, _ := readUnits()
		counter.reset()
		claims, err := svc.ClaimDue(ctx, 100)
		if err != nil || len(claims) != 100 {
			b.Fatalf("ClaimDue = %d claims, %v", len(claims), err)
		}
		after, _ := readUnits()
		n, _ := counter.snapshot()
		clock.advance(1)
		return after - before, n
	}
	var empty, full float64
	var emptyReq, fullReq int64
	seeded := false
	for b.Loop() {
		b.StopTimer()
		if !seeded {
			e, er := measure()
			empty, emptyReq = e, er
			start := time.Now()
			seed(b, db, table, terminalRecords("evt-t", terminal, clock.now()))
			b.Logf("seeded %d terminal items in %s", terminal, time.Since(start).Round(time.Millisecond))
			seeded = true
		}
		b.StartTimer()
		f, fr := measure()
		full, fullReq = f, fr
	}
	if empty <= 0 {
		b.Fatalf("no read capacity reported (%v): does the endpoint return ConsumedCapacity?", empty)
	}
	b.ReportMetric(empty, "RCU-0-terminal")
	b.ReportMetric(full, "RCU-N-terminal")
	b.ReportMetric(full/empty, "RCU-ratio")
	b.ReportMetric(float64(emptyReq), "requests-0-terminal")
	b.ReportMetric(float64(fullReq), "requests-N-terminal")
	b.ReportMetric(float64(terminal), "terminal-items")
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
