package monitordb_test

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/adapters/batchget"
	"github.com/localeflow/localeflow/adapters/monitordb"
	"github.com/localeflow/localeflow/topology"
)

// censusDB lists one event id in shard 0 of each census index and records
// the census requests.
type censusDB struct {
	monitordb.DynamoDBAPI
	mu      sync.Mutex
	queries []*dynamodb.QueryInput
	gets    []types.KeysAndAttributes
}

func (d *censusDB) Query(_ context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.queries = append(d.queries, in)
	out := &dynamodb.QueryOutput{}
	for _, v := range in.ExpressionAttributeValues {
		if n, ok := v.(*types.AttributeValueMemberN); ok && n.Value == "0" {
			out.Items = []map[string]types.AttributeValue{{topology.AttrEventID: &types.AttributeValueMemberS{Value: "evt-1"}}}
		}
	}
	return out, nil
}

func (d *censusDB) BatchGetItem(_ context.Context, in *dynamodb.BatchGetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, ka := range in.RequestItems {
		d.gets = append(d.gets, ka)
	}
	return &dynamodb.BatchGetItemOutput{}, nil
}

func projected(expr *string, names map[string]string) []string {
	var out []string
	for _, ref := range strings.Split(*expr, ",") {
		out = append(out, names[strings.TrimSpace(ref)])
	}
	slices.Sort(out)
	return out
}

// TestCensusProjectsOnlyMonitorAttributes: the census (the health
// function's only monitor read) queried the indexes and read the items
// without a projection, so the health role needed unrestricted reads of
// the monitor table (acknowledgement journal items included). Every index
// query now projects onto the event id with Select SPECIFIC_ATTRIBUTES,
// and the item reads onto topology.MonitorCensusAttributes.
func TestCensusProjectsOnlyMonitorAttributes(t *testing.T) {
	db := &censusDB{}
	store, err := monitordb.New(db, "t-monitor")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Census(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(db.queries) != 2*topology.WakeShards {
		t.Fatalf("%d index queries, want %d", len(db.queries), 2*topology.WakeShards)
	}
	for _, q := range db.queries {
		if q.ProjectionExpression == nil || q.Select != types.SelectSpecificAttributes {
			t.Fatalf("query of %s without a projection (select %q)", *q.IndexName, q.Select)
		}
		if got := projected(q.ProjectionExpression, q.ExpressionAttributeNames); !reflect.DeepEqual(got, []string{topology.AttrEventID}) {
			t.Fatalf("query of %s projects %v", *q.IndexName, got)
		}
	}
	if len(db.gets) != 1 || db.gets[0].ProjectionExpression == nil {
		t.Fatalf("BatchGetItem requests %+v: want one, projected", db.gets)
	}
	got := projected(db.gets[0].ProjectionExpression, db.gets[0].ExpressionAttributeNames)
	if want := slices.Sorted(slices.Values(topology.MonitorCensusAttributes)); !reflect.DeepEqual(got, want) {
		t.Fatalf("projection %v, want %v", got, want)
	}
}

// throttledDB leaves every key unprocessed on its first two BatchGetItem
// calls and records when each call came.
type throttledDB struct {
	censusDB
	calls []time.Time
}

func (d *throttledDB) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	d.mu.Lock()
	d.calls = append(d.calls, time.Now())
	n := len(d.calls)
	d.mu.Unlock()
	if n <= 2 {
		return &dynamodb.BatchGetItemOutput{UnprocessedKeys: in.RequestItems}, nil
	}
	return d.censusDB.BatchGetItem(ctx, in, opt...)
}

// TestCensusBacksOffBeforeAskingUnprocessedKeysAgain: the census asked
// BatchGetItem's unprocessed keys again at once, up to eight calls in a
// row against a table that was throttling it. It now waits
// batchget.Backoff before each retry.
func TestCensusBacksOffBeforeAskingUnprocessedKeysAgain(t *testing.T) {
	db := &throttledDB{}
	store, err := monitordb.New(db, "t-monitor")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Census(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(db.calls) != 3 || len(db.gets) != 1 {
		t.Fatalf("%d BatchGetItem calls (%d answered), want 3 (1)", len(db.calls), len(db.gets))
	}
	for round := 1; round <= 2; round++ {
		if gap := db.calls[round].Sub(db.calls[round-1]); gap < batchget.Backoff(round) {
			t.Fatalf("retry %d came %v after the call before, want at least %v", round, gap, batchget.Backoff(round))
		}
	}
}
