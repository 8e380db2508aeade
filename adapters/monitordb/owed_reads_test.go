package monitordb

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/topology"
)

// countingDB counts the item reads a Store sends.
type countingDB struct {
	DynamoDBAPI
	gets, batchGets atomic.Int64
}

func (d *countingDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	d.gets.Add(1)
	return d.DynamoDBAPI.GetItem(ctx, in, opt...)
}

func (d *countingDB) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	d.batchGets.Add(1)
	return d.DynamoDBAPI.BatchGetItem(ctx, in, opt...)
}

// TestOwedPassReadsLeasedEntriesInBatchesOnDynamoDB: the owed pass reads
// every wake-index entry older than the outbox grace to find the owed
// final records among them; a leased record keeps its old wake_ms, so
// 1,000 leased changes cost 1,000 GetItems, one round trip each, in
// series (issue: owed pass cost). They are now read a page of up to 100
// keys per BatchGetItem: on DynamoDB Local, the listing of 1,000 leased
// and 3 owed records finds exactly the 3 owed ones with no GetItem and at
// most one BatchGetItem per shard page.
func TestOwedPassReadsLeasedEntriesInBatchesOnDynamoDB(t *testing.T) {
	ctx := context.Background()
	db, table := newTable(t)
	counting := &countingDB{DynamoDBAPI: db}
	s, err := New(counting, table)
	if err != nil {
		t.Fatal(err)
	}
	clock := &stepClock{now: time.Now().UTC().Truncate(time.Millisecond)}
	svc, err := monitor.NewService(s, clock, nil, monitor.Config{WorkerID: "worker-1"})
	if err != nil {
		t.Fatal(err)
	}
	const leased, owed = 1000, 3
	for i := range leased + owed {
		if _, err := svc.Register(ctx, dispatchedDetail(t, fmt.Sprintf("evt-%04d", i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range leased {
		if _, ok, err := svc.Claim(ctx, fmt.Sprintf("evt-%04d", i)); !ok || err != nil {
			t.Fatalf("claim %d: %v, %v", i, ok, err)
		}
	}
	want := map[string]bool{}
	for i := leased; i < leased+owed; i++ {
		id := fmt.Sprintf("evt-%04d", i)
		if out, err := svc.PollOnce(ctx, id, fixedReader{status: "published"}); err != nil || out.Owed == nil {
			t.Fatalf("terminal poll %s: %+v, %v", id, out, err)
		}
		want[id] = true
	}
	counting.gets.Store(0)
	counting.batchGets.Store(0)
	started := time.Now()
	ids, err := s.Owed(ctx, 1<<62, 1000)
	took := time.Since(started)
	if err != nil || len(ids) != owed {
		t.Fatalf("owed = %v, %v; want the %d owed records", ids, err, owed)
	}
	for _, id := range ids {
		if !want[id] {
			t.Errorf("listed %s, which owes nothing", id)
		}
	}
	gets, batches := counting.gets.Load(), counting.batchGets.Load()
	// Each shard holds about (leased+owed)/WakeShards entries: one page
	// of up to 100 wake keys, one BatchGetItem, more only for a fuller
	// shard.
	maxBatches := int64(topology.WakeShards + (leased+owed)/100)
	t.Logf("owed listing over %d wake entries: %d GetItem, %d BatchGetItem, %s", leased+owed, gets, batches, took.Round(time.Millisecond))
	if gets != 0 || batches > maxBatches {
		t.Fatalf("owed listing sent %d GetItem and %d BatchGetItem; want 0 and at most %d", gets, batches, maxBatches)
	}
}
