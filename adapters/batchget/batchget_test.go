package batchget

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/core"
)

// fakeDB answers BatchGetItem from items, leaving the requested keys
// unprocessed for its first unprocessed calls, and records every request.
type fakeDB struct {
	items       map[string]map[string]types.AttributeValue
	unprocessed int
	calls       []*dynamodb.BatchGetItemInput
	err         error
}

func (f *fakeDB) BatchGetItem(_ context.Context, in *dynamodb.BatchGetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	f.calls = append(f.calls, in)
	if f.err != nil {
		return nil, f.err
	}
	if len(f.calls) <= f.unprocessed {
		return &dynamodb.BatchGetItemOutput{UnprocessedKeys: in.RequestItems}, nil
	}
	out := &dynamodb.BatchGetItemOutput{Responses: map[string][]map[string]types.AttributeValue{}}
	for table, ka := range in.RequestItems {
		for _, k := range ka.Keys {
			if it, ok := f.items[k["pk"].(*types.AttributeValueMemberS).Value]; ok {
				out.Responses[table] = append(out.Responses[table], it)
			}
		}
		out.ConsumedCapacity = append(out.ConsumedCapacity, types.ConsumedCapacity{TableName: aws.String(table), CapacityUnits: aws.Float64(float64(len(ka.Keys)))})
	}
	return out, nil
}

func keyOf(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: id}}
}

func itemsOf(ids ...string) map[string]map[string]types.AttributeValue {
	m := map[string]map[string]types.AttributeValue{}
	for _, id := range ids {
		m[id] = map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: id}, "n": &types.AttributeValueMemberN{Value: "1"}}
	}
	return m
}

func TestItemsRetriesUnprocessedKeysWithBackoff(t *testing.T) {
	db := &fakeDB{items: itemsOf("a", "b"), unprocessed: 2}
	var waits []time.Duration
	var units float64
	in := Input{
		Table: "t", Keys: []map[string]types.AttributeValue{keyOf("a"), keyOf("b"), keyOf("gone")},
		Read:                   types.KeysAndAttributes{ConsistentRead: aws.Bool(true), ProjectionExpression: aws.String("#p"), ExpressionAttributeNames: map[string]string{"#p": "pk"}},
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
		Consumed: func(cs []types.ConsumedCapacity) {
			for _, c := range cs {
				units += *c.CapacityUnits
			}
		},
	}
	got, err := items(context.Background(), db, in, func(round int) time.Duration {
		waits = append(waits, Backoff(round))
		return time.Millisecond
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []map[string]types.AttributeValue{db.items["a"], db.items["b"]}; !reflect.DeepEqual(got, want) {
		t.Fatalf("items = %v, want %v", got, want)
	}
	if len(db.calls) != 3 {
		t.Fatalf("%d calls, want 3 (two unprocessed, then done)", len(db.calls))
	}
	if want := []time.Duration{50 * time.Millisecond, 100 * time.Millisecond}; !reflect.DeepEqual(waits, want) {
		t.Fatalf("backoff before the retries = %v, want %v", waits, want)
	}
	for i, c := range db.calls {
		ka := c.RequestItems["t"]
		if len(c.RequestItems) != 1 || len(ka.Keys) != 3 || !aws.ToBool(ka.ConsistentRead) || aws.ToString(ka.ProjectionExpression) != "#p" ||
			ka.ExpressionAttributeNames["#p"] != "pk" || c.ReturnConsumedCapacity != types.ReturnConsumedCapacityTotal {
			t.Fatalf("call %d asked %+v", i, c)
		}
	}
	if units != 3 {
		t.Fatalf("consumed %v units, want 3", units)
	}
}

func TestItemsWaitsBetweenRounds(t *testing.T) {
	db := &fakeDB{items: itemsOf("a"), unprocessed: 2}
	start := time.Now()
	got, err := Items(context.Background(), db, Input{Table: "t", Keys: []map[string]types.AttributeValue{keyOf("a")}})
	if err != nil || len(got) != 1 {
		t.Fatalf("Items = %v, %v", got, err)
	}
	if el := time.Since(start); el < Backoff(1)+Backoff(2) {
		t.Fatalf("two retries took %v, want at least %v of backoff", el, Backoff(1)+Backoff(2))
	}
}

func TestItemsGivesUpAfterMaxRounds(t *testing.T) {
	db := &fakeDB{items: itemsOf("a"), unprocessed: MaxRounds + 5}
	_, err := items(context.Background(), db, Input{Table: "t", Keys: []map[string]types.AttributeValue{keyOf("a")}}, func(int) time.Duration { return 0 })
	if !core.HasCode(err, CodeUnprocessed) || !core.IsRetryable(err) {
		t.Fatalf("err = %v, want retryable %s", err, CodeUnprocessed)
	}
	if len(db.calls) != MaxRounds {
		t.Fatalf("%d calls, want %d", len(db.calls), MaxRounds)
	}
}

func TestItemsStopsWhenContextEndsDuringBackoff(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	db := &fakeDB{items: itemsOf("a"), unprocessed: 1}
	_, err := Items(ctx, db, Input{Table: "t", Keys: []map[string]types.AttributeValue{keyOf("a")}})
	if !errors.Is(err, context.Canceled) || len(db.calls) != 1 {
		t.Fatalf("err = %v after %d calls, want context.Canceled after 1", err, len(db.calls))
	}
}

func TestItemsSplitsKeysIntoRequestsOf100(t *testing.T) {
	var keys []map[string]types.AttributeValue
	var ids []string
	for i := range 250 {
		id := fmt.Sprintf("k%03d", i)
		ids = append(ids, id)
		keys = append(keys, keyOf(id))
	}
	db := &fakeDB{items: itemsOf(ids...)}
	got, err := Items(context.Background(), db, Input{Table: "t", Keys: keys})
	if err != nil || len(got) != 250 {
		t.Fatalf("Items = %d items, %v", len(got), err)
	}
	var sizes []int
	for _, c := range db.calls {
		sizes = append(sizes, len(c.RequestItems["t"].Keys))
	}
	if !reflect.DeepEqual(sizes, []int{100, 100, 50}) {
		t.Fatalf("request sizes %v, want [100 100 50]", sizes)
	}
}

func TestItemsReturnsTheCallsError(t *testing.T) {
	boom := errors.New("boom")
	db := &fakeDB{err: boom}
	if _, err := Items(context.Background(), db, Input{Table: "t", Keys: []map[string]types.AttributeValue{keyOf("a")}}); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the call's error", err)
	}
	if got, err := Items(context.Background(), db, Input{Table: "t"}); got != nil || err != nil || len(db.calls) != 1 {
		t.Fatalf("no keys: %v, %v after %d calls, want nothing and no call", got, err, len(db.calls))
	}
}
