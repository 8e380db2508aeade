package monitordb_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/adapters/monitordb"
	"github.com/localeflow/localeflow/topology"
)

// gatedCensusDB answers each census Query with the ids of its index and
// shard after waiting (up to 300 ms) until gate Queries are in flight; it
// records the most in flight at once and the keys of the item reads.
type gatedCensusDB struct {
	monitordb.DynamoDBAPI
	gate        int32
	ids         map[string][]string // "<index>/<shard>" -> event ids
	failShard   map[string]error
	inFlight    atomic.Int32
	maxInFlight atomic.Int32
	mu          sync.Mutex
	arrived     chan struct{}
	got         []string
}

func (d *gatedCensusDB) Query(_ context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	now := d.inFlight.Add(1)
	defer d.inFlight.Add(-1)
	for m := d.maxInFlight.Load(); now > m && !d.maxInFlight.CompareAndSwap(m, now); m = d.maxInFlight.Load() {
	}
	d.mu.Lock()
	if now >= d.gate {
		close(d.arrived)
		d.arrived = make(chan struct{})
	}
	wait := d.arrived
	d.mu.Unlock()
	if now < d.gate {
		select {
		case <-wait:
		case <-time.After(300 * time.Millisecond):
		}
	}
	var shard string
	for _, v := range in.ExpressionAttributeValues {
		if n, ok := v.(*types.AttributeValueMemberN); ok {
			shard = n.Value
		}
	}
	k := *in.IndexName + "/" + shard
	if err := d.failShard[k]; err != nil {
		return nil, err
	}
	out := &dynamodb.QueryOutput{}
	for _, id := range d.ids[k] {
		out.Items = append(out.Items, map[string]types.AttributeValue{topology.AttrEventID: &types.AttributeValueMemberS{Value: id}})
	}
	return out, nil
}

func (d *gatedCensusDB) BatchGetItem(_ context.Context, in *dynamodb.BatchGetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, ka := range in.RequestItems {
		for _, key := range ka.Keys {
			d.got = append(d.got, key[topology.AttrEventID].(*types.AttributeValueMemberS).Value)
		}
	}
	return &dynamodb.BatchGetItemOutput{}, nil
}

// TestCensusQueriesItsShardsConcurrently: the census read the 16 index
// shards one after the other (16 round trips on the health check's
// critical path, most of a cold start's first invoke). They are now in
// flight together, and the item reads still get every id once, in order.
func TestCensusQueriesItsShardsConcurrently(t *testing.T) {
	shards := 2 * topology.WakeShards
	db := &gatedCensusDB{gate: int32(shards), arrived: make(chan struct{}), ids: map[string][]string{}}
	var want []string
	for shard := range topology.WakeShards {
		s := strconv.Itoa(shard)
		db.ids[topology.IndexWake+"/"+s] = []string{"evt-w" + s, "evt-both" + s}
		db.ids[topology.IndexAttention+"/"+s] = []string{"evt-both" + s, "evt-a" + s}
		want = append(want, "evt-w"+s, "evt-both"+s, "evt-a"+s)
	}
	slices.Sort(want)
	store, err := monitordb.New(db, "t-monitor")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Census(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := db.maxInFlight.Load(); got != int32(shards) {
		t.Errorf("at most %d census Queries in flight at once, want %d", got, shards)
	}
	if !slices.Equal(db.got, want) {
		t.Errorf("item reads %v, want %v", db.got, want)
	}
}

// TestCensusFailsWithTheFirstFailedShard: with Queries in parallel, the
// error is still the one of the first failing shard in read order (wake
// before attention, shard 0 first), as it was when they ran one by one.
func TestCensusFailsWithTheFirstFailedShard(t *testing.T) {
	first, later := errors.New("first"), errors.New("later")
	db := &gatedCensusDB{gate: 1, arrived: make(chan struct{}), failShard: map[string]error{
		topology.IndexWake + "/5":      first,
		topology.IndexAttention + "/0": later,
	}}
	store, err := monitordb.New(db, "t-monitor")
	if err != nil {
		t.Fatal(err)
	}
	_, err = store.Census(context.Background())
	if !errors.Is(err, first) || errors.Is(err, later) {
		t.Fatalf("census error %v, want the wake shard 5 failure only", err)
	}
	if len(db.got) != 0 {
		t.Fatalf("items read after a failed index Query: %v", db.got)
	}
}
