package dynamofake

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/localeflow/localeflow/dev/localtest"
	"github.com/localeflow/localeflow/topology"
)

// API is what the conformance suite calls: the operations the adapters use.
type API interface {
	GetItem(ctx context.Context, params *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, params *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, params *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Query(ctx context.Context, params *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	BatchGetItem(ctx context.Context, params *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	TransactWriteItems(ctx context.Context, params *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

var (
	_ API = (*DB)(nil)
	_ API = (*dynamodb.Client)(nil)
)

// tables makes a fresh monitor table (event_id; sparse wake, attention and
// outbox indexes) and release table (pk, sk; the same indexes).
type tables func(t *testing.T) (db API, monitor, release string)

func TestConformanceFake(t *testing.T) {
	run(t, func(t *testing.T) (API, string, string) {
		topo := topology.New("fake")
		return New(topo.Monitor, topo.Release), topo.Monitor.Name, topo.Release.Name
	})
}

// TestConformanceDynamoDBLocal runs the same cases on DynamoDB Local.
func TestConformanceDynamoDBLocal(t *testing.T) {
	localtest.Require(t)
	run(t, func(t *testing.T) (API, string, string) {
		db, mon := localtest.Table(t, func(topo topology.Topology) topology.Table { return topo.Monitor })
		_, rel := localtest.Table(t, func(topo topology.Topology) topology.Table { return topo.Release })
		return db, mon.Name, rel.Name
	})
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v int64) types.AttributeValue  { return &types.AttributeValueMemberN{Value: fmt.Sprint(v)} }
func mkey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{topology.AttrEventID: s(id)}
}

func build(t *testing.T, b expression.Builder) expression.Expression {
	t.Helper()
	e, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func apiCode(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

func run(t *testing.T, newTables tables) {
	ctx := context.Background()
	must := func(t *testing.T, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	put := func(t *testing.T, db API, table string, item map[string]types.AttributeValue) {
		t.Helper()
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item})
		must(t, err)
	}
	get := func(t *testing.T, db API, table string, key map[string]types.AttributeValue) map[string]types.AttributeValue {
		t.Helper()
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
		must(t, err)
		return out.Item
	}

	t.Run("conditional put: attribute_not_exists, ALL_OLD on refusal", func(t *testing.T) {
		db, mon, _ := newTables(t)
		e := build(t, expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(topology.AttrEventID))))
		in := func(v int64) *dynamodb.PutItemInput {
			return &dynamodb.PutItemInput{TableName: aws.String(mon), Item: map[string]types.AttributeValue{topology.AttrEventID: s("a"), "v": n(v)},
				ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(),
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}
		}
		_, err := db.PutItem(ctx, in(1))
		must(t, err)
		_, err = db.PutItem(ctx, in(2))
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			t.Fatalf("second put: %v, want ConditionalCheckFailedException", err)
		}
		if !reflect.DeepEqual(ccf.Item["v"], n(1)) {
			t.Fatalf("ALL_OLD item = %v, want v=1", ccf.Item)
		}
		if got := get(t, db, mon, mkey("a")); !reflect.DeepEqual(got["v"], n(1)) {
			t.Fatalf("item = %v, want unchanged", got)
		}
	})

	t.Run("update: SET, arithmetic, REMOVE, ALL_NEW, conditions on numbers, IN, missing attributes", func(t *testing.T) {
		db, mon, _ := newTables(t)
		put(t, db, mon, map[string]types.AttributeValue{topology.AttrEventID: s("a"), "state": s("watching"), "n": n(9), "gone": s("x"), "hint": n(5)})
		cond := expression.And(
			expression.Name("state").In(expression.Value("pending"), expression.Value("watching")),
			expression.Name("n").LessThan(expression.Value(10)), // numeric, not "9" < "10" as strings
			expression.Or(expression.AttributeNotExists(expression.Name("missing")), expression.Name("missing").Equal(expression.Value(1))),
			expression.Name("other").NotEqual(expression.Value("z")), // a missing attribute is <> anything
		)
		upd := expression.Set(expression.Name("state"), expression.Value("leased")).
			Set(expression.Name("n"), expression.Name("n").Plus(expression.Value(1))).
			Set(expression.Name("hint"), expression.Name("n")).
			Remove(expression.Name("gone")).Remove(expression.Name("absent"))
		e := build(t, expression.NewBuilder().WithCondition(cond).WithUpdate(upd))
		out, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(mon), Key: mkey("a"),
			ConditionExpression: e.Condition(), UpdateExpression: e.Update(), ExpressionAttributeNames: e.Names(),
			ExpressionAttributeValues: e.Values(), ReturnValues: types.ReturnValueAllNew})
		must(t, err)
		want := map[string]types.AttributeValue{topology.AttrEventID: s("a"), "state": s("leased"), "n": n(10), "hint": n(9)}
		if !reflect.DeepEqual(out.Attributes, want) {
			t.Fatalf("ALL_NEW = %v, want %v", out.Attributes, want)
		}
		// The same condition now fails (n = 10, state leased): ALL_OLD.
		_, err = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(mon), Key: mkey("a"),
			ConditionExpression: e.Condition(), UpdateExpression: e.Update(), ExpressionAttributeNames: e.Names(),
			ExpressionAttributeValues: e.Values(), ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) || !reflect.DeepEqual(ccf.Item, want) {
			t.Fatalf("refused update: %v (item %v), want ConditionalCheckFailed with ALL_OLD", err, ccf)
		}
		// A conditional update of a missing item is refused without an item.
		e2 := build(t, expression.NewBuilder().WithCondition(expression.AttributeExists(expression.Name(topology.AttrEventID))).
			WithUpdate(expression.Set(expression.Name("x"), expression.Value(1))))
		_, err = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(mon), Key: mkey("nope"),
			ConditionExpression: e2.Condition(), UpdateExpression: e2.Update(), ExpressionAttributeNames: e2.Names(),
			ExpressionAttributeValues: e2.Values(), ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
		if !errors.As(err, &ccf) || len(ccf.Item) != 0 {
			t.Fatalf("update of a missing item: %v, want ConditionalCheckFailed without an item", err)
		}
		if get(t, db, mon, mkey("nope")) != nil {
			t.Fatal("a refused update created the item")
		}
	})

	t.Run("the key cannot be updated; an unused placeholder is refused", func(t *testing.T) {
		db, mon, _ := newTables(t)
		put(t, db, mon, map[string]types.AttributeValue{topology.AttrEventID: s("a")})
		e := build(t, expression.NewBuilder().WithUpdate(expression.Set(expression.Name(topology.AttrEventID), expression.Value("b"))))
		_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(mon), Key: mkey("a"), UpdateExpression: e.Update(),
			ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()})
		if apiCode(err) != "ValidationException" {
			t.Fatalf("key update: %v, want ValidationException", err)
		}
		_, err = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(mon), Key: mkey("a"), UpdateExpression: aws.String("SET #a = :a"),
			ExpressionAttributeNames: map[string]string{"#a": "x", "#unused": "y"}, ExpressionAttributeValues: map[string]types.AttributeValue{":a": n(1)}})
		if apiCode(err) != "ValidationException" {
			t.Fatalf("unused name: %v, want ValidationException", err)
		}
	})

	t.Run("items above 400 KB are refused", func(t *testing.T) {
		db, mon, _ := newTables(t)
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(mon), Item: map[string]types.AttributeValue{
			topology.AttrEventID: s("a"), "blob": &types.AttributeValueMemberB{Value: make([]byte, 410*1024)}}})
		if apiCode(err) != "ValidationException" {
			t.Fatalf("put of 410 KB: %v, want ValidationException", err)
		}
		put(t, db, mon, map[string]types.AttributeValue{topology.AttrEventID: s("a"), "blob": &types.AttributeValueMemberB{Value: make([]byte, 390*1024)}})
	})

	t.Run("sparse index: entries follow their key attributes; pages with Limit and ExclusiveStartKey", func(t *testing.T) {
		db, mon, _ := newTables(t)
		// Shard 3: six entries, two with equal wake_ms (ordered by the
		// table key); one without wake_ms (absent); one in shard 4.
		for i, ms := range []int64{50, 10, 30, 30, 20, 40} {
			put(t, db, mon, map[string]types.AttributeValue{topology.AttrEventID: s(fmt.Sprintf("e%d", i)),
				topology.AttrWakeShard: n(3), topology.AttrWakeMS: n(ms), "payload": s("p")})
		}
		put(t, db, mon, map[string]types.AttributeValue{topology.AttrEventID: s("nows"), topology.AttrWakeShard: n(3)})
		put(t, db, mon, map[string]types.AttributeValue{topology.AttrEventID: s("other"), topology.AttrWakeShard: n(4), topology.AttrWakeMS: n(1)})
		// Removing the sort key takes e5 out of the index.
		e := build(t, expression.NewBuilder().WithUpdate(expression.Remove(expression.Name(topology.AttrWakeMS))))
		_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(mon), Key: mkey("e5"), UpdateExpression: e.Update(), ExpressionAttributeNames: e.Names()})
		must(t, err)
		kc := build(t, expression.NewBuilder().WithKeyCondition(expression.Key(topology.AttrWakeShard).Equal(expression.Value(3)).
			And(expression.Key(topology.AttrWakeMS).LessThanEqual(expression.Value(45)))))
		in := &dynamodb.QueryInput{TableName: aws.String(mon), IndexName: aws.String(topology.IndexWake),
			KeyConditionExpression: kc.KeyCondition(), ExpressionAttributeNames: kc.Names(), ExpressionAttributeValues: kc.Values(),
			ScanIndexForward: aws.Bool(true), Limit: aws.Int32(2)}
		var ids []string
		var order []int64
		pages := 0
		for {
			out, err := db.Query(ctx, in)
			must(t, err)
			pages++
			for _, it := range out.Items {
				if _, ok := it["payload"]; ok {
					t.Fatalf("a KEYS_ONLY index returned %v", it)
				}
				ids = append(ids, it[topology.AttrEventID].(*types.AttributeValueMemberS).Value)
				ms, err := strconv.ParseInt(it[topology.AttrWakeMS].(*types.AttributeValueMemberN).Value, 10, 64)
				must(t, err)
				order = append(order, ms)
			}
			if len(out.LastEvaluatedKey) == 0 {
				break
			}
			if len(out.LastEvaluatedKey) != 3 {
				t.Fatalf("LastEvaluatedKey = %v, want the table key and the index key", out.LastEvaluatedKey)
			}
			in.ExclusiveStartKey = out.LastEvaluatedKey
		}
		// In wake_ms order; the two entries at 30 in some order (DynamoDB
		// promises none among equal index keys), each exactly once.
		if want := []int64{10, 20, 30, 30}; !reflect.DeepEqual(order, want) {
			t.Fatalf("wake_ms order = %v (%v), want %v", order, ids, want)
		}
		if ids[0] != "e1" || ids[1] != "e4" || !(ids[2] == "e2" && ids[3] == "e3" || ids[2] == "e3" && ids[3] == "e2") {
			t.Fatalf("wake order = %v, want e1 e4 and then e2, e3 in either order", ids)
		}
		// Four entries in pages of two: the second page stops at Limit
		// and returns a key; the third is empty.
		if pages != 3 {
			t.Fatalf("%d pages, want 3", pages)
		}
		in.ConsistentRead, in.ExclusiveStartKey = aws.Bool(true), nil
		if _, err := db.Query(ctx, in); apiCode(err) != "ValidationException" {
			t.Fatalf("consistent read of a GSI: %v, want ValidationException", err)
		}
	})

	t.Run("a key condition without the partition key is refused", func(t *testing.T) {
		db, mon, _ := newTables(t)
		kc := build(t, expression.NewBuilder().WithKeyCondition(expression.Key(topology.AttrWakeMS).LessThanEqual(expression.Value(45))))
		_, err := db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(mon), IndexName: aws.String(topology.IndexWake),
			KeyConditionExpression: kc.KeyCondition(), ExpressionAttributeNames: kc.Names(), ExpressionAttributeValues: kc.Values()})
		if apiCode(err) != "ValidationException" {
			t.Fatalf("query without the partition key: %v, want ValidationException", err)
		}
	})

	t.Run("query of a collection, projected index query, batch get", func(t *testing.T) {
		db, mon, rel := newTables(t)
		for _, sk := range []string{"b", "a", "c"} {
			put(t, db, rel, map[string]types.AttributeValue{topology.AttrPK: s("event#x"), topology.AttrSK: s(sk), "v": s(sk)})
		}
		put(t, db, rel, map[string]types.AttributeValue{topology.AttrPK: s("event#y"), topology.AttrSK: s("a")})
		kc := build(t, expression.NewBuilder().WithKeyCondition(expression.Key(topology.AttrPK).Equal(expression.Value("event#x"))))
		out, err := db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(rel), KeyConditionExpression: kc.KeyCondition(),
			ExpressionAttributeNames: kc.Names(), ExpressionAttributeValues: kc.Values(), ConsistentRead: aws.Bool(true)})
		must(t, err)
		var sks []string
		for _, it := range out.Items {
			sks = append(sks, it[topology.AttrSK].(*types.AttributeValueMemberS).Value)
		}
		if want := []string{"a", "b", "c"}; !reflect.DeepEqual(sks, want) || len(out.LastEvaluatedKey) != 0 {
			t.Fatalf("collection = %v (more %v), want %v", sks, out.LastEvaluatedKey, want)
		}

		put(t, db, mon, map[string]types.AttributeValue{topology.AttrEventID: s("a"), topology.AttrAttentionShard: n(1), topology.AttrAttentionMS: n(7), "state": s("failed")})
		put(t, db, mon, map[string]types.AttributeValue{topology.AttrEventID: s("b"), "state": s("leased"), "x": s("y")})
		pe := build(t, expression.NewBuilder().WithKeyCondition(expression.Key(topology.AttrAttentionShard).Equal(expression.Value(1))).
			WithProjection(expression.NamesList(expression.Name(topology.AttrEventID))))
		qo, err := db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(mon), IndexName: aws.String(topology.IndexAttention),
			KeyConditionExpression: pe.KeyCondition(), ProjectionExpression: pe.Projection(), Select: types.SelectSpecificAttributes,
			ExpressionAttributeNames: pe.Names(), ExpressionAttributeValues: pe.Values()})
		must(t, err)
		if want := []map[string]types.AttributeValue{{topology.AttrEventID: s("a")}}; !reflect.DeepEqual(qo.Items, want) {
			t.Fatalf("projected index query = %v, want %v", qo.Items, want)
		}

		bp := build(t, expression.NewBuilder().WithProjection(expression.NamesList(expression.Name(topology.AttrEventID), expression.Name("state"))))
		bo, err := db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{mon: {
			Keys: []map[string]types.AttributeValue{mkey("a"), mkey("b"), mkey("missing")}, ConsistentRead: aws.Bool(true),
			ProjectionExpression: bp.Projection(), ExpressionAttributeNames: bp.Names()}}})
		must(t, err)
		got := map[string]string{}
		for _, it := range bo.Responses[mon] {
			if len(it) != 2 {
				t.Fatalf("batch item %v, want two projected attributes", it)
			}
			got[it[topology.AttrEventID].(*types.AttributeValueMemberS).Value] = it["state"].(*types.AttributeValueMemberS).Value
		}
		if want := map[string]string{"a": "failed", "b": "leased"}; !reflect.DeepEqual(got, want) || len(bo.UnprocessedKeys) != 0 {
			t.Fatalf("batch get = %v (unprocessed %v), want %v", got, bo.UnprocessedKeys, want)
		}
		_, err = db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{mon: {
			Keys: []map[string]types.AttributeValue{mkey("a"), mkey("a")}}}})
		if apiCode(err) != "ValidationException" {
			t.Fatalf("duplicate keys: %v, want ValidationException", err)
		}
	})

	t.Run("transaction: all or nothing, reasons per item", func(t *testing.T) {
		db, _, rel := newTables(t)
		item := func(sk string, v int64) map[string]types.AttributeValue {
			return map[string]types.AttributeValue{topology.AttrPK: s("event#t"), topology.AttrSK: s(sk), "v": n(v)}
		}
		put(t, db, rel, item("b", 1))
		fresh := build(t, expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(topology.AttrPK))))
		versioned := build(t, expression.NewBuilder().WithCondition(expression.Name("v").Equal(expression.Value(7))))
		_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(rel), Item: item("a", 1), ConditionExpression: fresh.Condition(), ExpressionAttributeNames: fresh.Names()}},
			{Put: &types.Put{TableName: aws.String(rel), Item: item("b", 8), ConditionExpression: versioned.Condition(),
				ExpressionAttributeNames: versioned.Names(), ExpressionAttributeValues: versioned.Values()}},
		}})
		var canceled *types.TransactionCanceledException
		if !errors.As(err, &canceled) || len(canceled.CancellationReasons) != 2 ||
			aws.ToString(canceled.CancellationReasons[0].Code) != "None" ||
			aws.ToString(canceled.CancellationReasons[1].Code) != "ConditionalCheckFailed" {
			t.Fatalf("transaction: %v, want TransactionCanceled [None, ConditionalCheckFailed]", err)
		}
		if get(t, db, rel, map[string]types.AttributeValue{topology.AttrPK: s("event#t"), topology.AttrSK: s("a")}) != nil {
			t.Fatal("a cancelled transaction wrote its first item")
		}
		versioned = build(t, expression.NewBuilder().WithCondition(expression.Name("v").Equal(expression.Value(1))))
		_, err = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(rel), Item: item("a", 1), ConditionExpression: fresh.Condition(), ExpressionAttributeNames: fresh.Names()}},
			{Put: &types.Put{TableName: aws.String(rel), Item: item("b", 2), ConditionExpression: versioned.Condition(),
				ExpressionAttributeNames: versioned.Names(), ExpressionAttributeValues: versioned.Values()}},
		}})
		must(t, err)
		if got := get(t, db, rel, map[string]types.AttributeValue{topology.AttrPK: s("event#t"), topology.AttrSK: s("b")}); !reflect.DeepEqual(got["v"], n(2)) {
			t.Fatalf("after the transaction b = %v", got)
		}
		_, err = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(rel), Item: item("c", 1)}},
			{Put: &types.Put{TableName: aws.String(rel), Item: item("c", 2)}},
		}})
		if apiCode(err) != "ValidationException" {
			t.Fatalf("two writes of one item: %v, want ValidationException", err)
		}
	})

	t.Run("index key attributes must have their declared type", func(t *testing.T) {
		db, mon, _ := newTables(t)
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(mon), Item: map[string]types.AttributeValue{
			topology.AttrEventID: s("a"), topology.AttrWakeShard: s("3"), topology.AttrWakeMS: n(1)}})
		if apiCode(err) != "ValidationException" || !strings.Contains(strings.ToLower(err.Error()), "type") {
			t.Fatalf("index key of the wrong type: %v, want ValidationException", err)
		}
	})
}
