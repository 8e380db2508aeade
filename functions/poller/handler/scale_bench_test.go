package handler_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/adapters/awsclient"
	"github.com/localeflow/localeflow/adapters/monitordb"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/monitor/monitortest"
	"github.com/localeflow/localeflow/dev/localtest"
)

// scaleWatched is the list of watched-change counts BenchmarkScaleWatched
// runs (LOCALEFLOW_SCALE_WATCHED, comma-separated; default 1,000 and
// 100,000).
func scaleWatched(b *testing.B) []int {
	raw := os.Getenv("LOCALEFLOW_SCALE_WATCHED")
	if raw == "" {
		return []int{1_000, 100_000}
	}
	var out []int
	for _, f := range strings.Split(raw, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 || n > 10_000_000 {
			b.Fatalf("LOCALEFLOW_SCALE_WATCHED=%q: want counts in 0..10,000,000", raw)
		}
		out = append(out, n)
	}
	return out
}

// seedWatched writes n watched changes that are not due (next poll an
// hour ahead: in the wake index, past its key condition) with parallel
// BatchWriteItem calls of 25 items on a client of its own (not metered).
func seedWatched(b *testing.B, table string, n int, nowMS int64) time.Duration {
	b.Helper()
	db := awsclient.DynamoDB(localtest.Config(b))
	start := time.Now()
	const workers = 8
	batches := make(chan []ddbtypes.WriteRequest)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed error
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for reqs := range batches {
				pending := map[string][]ddbtypes.WriteRequest{table: reqs}
				for round := 0; len(pending) > 0; round++ {
					out, err := db.BatchWriteItem(context.Background(), &dynamodb.BatchWriteItemInput{RequestItems: pending})
					if err == nil && round == 50 {
						err = fmt.Errorf("unprocessed items after %d rounds", round)
					}
					if err != nil {
						mu.Lock()
						failed = err
						mu.Unlock()
						break
					}
					pending = out.UnprocessedItems
				}
			}
		}()
	}
	var reqs []ddbtypes.WriteRequest
	for i := range n {
		rec := monitortest.NewRecord(fmt.Sprintf("evt-watched-%07d", i), nowMS)
		rec.NextPollMS = nowMS + time.Hour.Milliseconds()
		item, err := monitordb.ItemOf(rec)
		if err != nil {
			b.Fatal(err)
		}
		reqs = append(reqs, ddbtypes.WriteRequest{PutRequest: &ddbtypes.PutRequest{Item: item}})
		if len(reqs) == 25 || i == n-1 {
			batches <- reqs
			reqs = nil
		}
	}
	close(batches)
	wg.Wait()
	if failed != nil {
		b.Fatalf("seeding %d watched changes: %v", n, failed)
	}
	return time.Since(start)
}

// BenchmarkScaleWatched is the measured point of docs/scale.md: the
// scheduled sweep (Handler.Sweep) and the poll path (Handler.HandleSQS,
// batches of 10) over 1,000 due changes, on adapters/monitordb against
// DynamoDB Local, with W watched changes that are not due in the table
// besides (W from LOCALEFLOW_SCALE_WATCHED, default 1,000 and 100,000;
// seeded with BatchWriteItem, not counted). Each round registers 1,000
// changes for the sweep and 1,000 for the queue (answered "processing":
// they stay watched, so the wake index grows by 2,000 a round), then
// counts every DynamoDB request and the units by table and index. It
// fails unless every change is polled, and reports the discovery cost of
// a sweep (wake-index Queries and their read units) and the requests and
// write units per poll on both paths: flat in W is the claim.
func BenchmarkScaleWatched(b *testing.B) {
	const due = 1000
	for _, watched := range scaleWatched(b) {
		b.Run(fmt.Sprintf("watched=%d", watched), func(b *testing.B) {
			e := realPathSetup(b)
			took := seedWatched(b, e.table, watched, core.Millis(e.clock.Now()))
			b.Logf("seeded %d watched changes in %s (%.0f items/s; load %s)", watched, took.Round(time.Millisecond),
				float64(watched)/took.Seconds(), loadAverage())
			var sweeps, sweepPolls, sqsPolls int64
			var queries, sweepRequests, sqsRequests int64
			var discoveryRCU, wakeUnits, sweepWCU, sqsWCU float64
			for round := 0; b.Loop(); round++ {
				b.StopTimer()
				sweepIDs := e.register(b, fmt.Sprintf("evt-scale-s%d", round), due, "processing")
				sqsIDs := e.register(b, fmt.Sprintf("evt-scale-q%d", round), due, "processing")
				batches := e.batches(b, sqsIDs)
				// The queue's batches first, then the sweep: it finds
				// only its own changes due (the queue's were rescheduled;
				// earlier rounds' are due again only after the 30 s poll
				// interval, 30 rounds later).
				e.clock.Advance(time.Second)
				e.meter.Reset()
				e.units.reset()
				b.StartTimer()
				for _, ev := range batches {
					if resp := e.h.HandleSQS(context.Background(), ev); len(resp.BatchItemFailures) != 0 {
						b.Fatalf("batch item failures %+v", resp.BatchItemFailures)
					}
				}
				b.StopTimer()
				snap := e.meter.Snapshot()
				for _, n := range snap.Requests {
					sqsRequests += n
				}
				sqsWCU += snap.WriteUnits + float64(snap.ConditionFailures)
				sqsPolls += due
				e.meter.Reset()
				e.units.reset()
				b.StartTimer()
				res, err := e.h.Sweep(context.Background())
				b.StopTimer()
				if err != nil || res.Errors != 0 || res.Polled != due || res.Listed != due {
					b.Fatalf("sweep %+v: %v (want %d listed and polled)", res, err, due)
				}
				snap = e.meter.Snapshot()
				for op, n := range snap.Requests {
					sweepRequests += n
					if op == "DynamoDB.Query" {
						queries += n
					}
				}
				sweepWCU += snap.WriteUnits + float64(snap.ConditionFailures)
				// The sweep reads only through its wake-index Queries (the
				// claims and completions are writes): its read units are
				// the discovery's. The index's own units (the completion
				// moving each wake key) are reported per poll apart.
				discoveryRCU += snap.ReadUnits
				wakeUnits += e.units.snapshot()["index:wake"]
				sweeps++
				sweepPolls += int64(res.Polled)
				for _, id := range append(sweepIDs, sqsIDs...) {
					if st, err := e.svc.Status(context.Background(), id); err != nil || st.State != monitor.StateWatching || st.PollAttempts != 1 {
						b.Fatalf("%s: %s after %d polls, %v (want watching after 1)", id, st.State, st.PollAttempts, err)
					}
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(watched), "watched")
			b.ReportMetric(float64(queries)/float64(sweeps), "discovery-queries/sweep")
			b.ReportMetric(discoveryRCU/float64(sweeps), "discovery-RCU/sweep")
			b.ReportMetric(wakeUnits/float64(sweepPolls), "sweep-wake-index-units/poll")
			b.ReportMetric(float64(sweepRequests)/float64(sweepPolls), "sweep-requests/poll")
			b.ReportMetric(sweepWCU/float64(sweepPolls), "sweep-WCU/poll")
			b.ReportMetric(float64(sqsRequests)/float64(sqsPolls), "sqs-requests/poll")
			b.ReportMetric(sqsWCU/float64(sqsPolls), "sqs-WCU/poll")
		})
	}
}
