// Package dynamofake is a small in-memory DynamoDB: the operations, and the
// parts of the expression language, that localeflow's DynamoDB adapters
// (adapters/monitordb, adapters/releasedb, adapters/batchget) use —
// GetItem, PutItem and UpdateItem with condition expressions and
// ReturnValuesOnConditionCheckFailure, SET/REMOVE updates, Query of the
// table and of sparse KEYS_ONLY global secondary indexes with Limit,
// ExclusiveStartKey and LastEvaluatedKey, BatchGetItem with projections,
// TransactWriteItems of conditional Puts with cancellation reasons, and the
// 400 KB item limit. Tables are created from topology, as bootstrap creates
// them on DynamoDB Local and AWS.
//
// The deterministic simulation (dev/proof/sim) runs the real adapters on
// it. It is trusted exactly as far as its conformance suites go, each run
// on DynamoDB Local (integration) and on this fake (unit):
// conformance_test.go here (the operations and expressions above), and the
// adapters' own port suites (adapters/monitordb, adapters/releasedb).
//
// Not modelled: the eventual consistency of global secondary indexes (an
// index answers from the table as it is now), the 1 MB page limit of Query,
// throttling and unprocessed keys (the simulation injects failures at the
// call boundary instead), TTL deletion, capacity accounting (consumed
// capacity is never returned), nested document paths.
package dynamofake

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/localeflow/localeflow/topology"
)

// MaxItemBytes is DynamoDB's item size limit (400 KB).
const MaxItemBytes = 400 * 1024

// DB is the fake. Its methods have the signatures of *dynamodb.Client's,
// so it satisfies every adapter's DynamoDBAPI interface.
type DB struct {
	mu     sync.Mutex
	tables map[string]*table
}

type table struct {
	spec  topology.Table
	items map[string]map[string]types.AttributeValue
}

// New returns an empty fake holding tables.
func New(tables ...topology.Table) *DB {
	db := &DB{tables: map[string]*table{}}
	for _, t := range tables {
		db.tables[t.Name] = &table{spec: t, items: map[string]map[string]types.AttributeValue{}}
	}
	return db
}

func validation(format string, args ...any) error {
	return &smithy.GenericAPIError{Code: "ValidationException", Message: fmt.Sprintf(format, args...), Fault: smithy.FaultClient}
}

func (db *DB) table(name *string) (*table, error) {
	t, ok := db.tables[aws.ToString(name)]
	if !ok {
		return nil, &types.ResourceNotFoundException{Message: aws.String("Requested resource not found")}
	}
	return t, nil
}

// keyOf is the storage key of a request's Key (exactly the table's key
// attributes, of their declared types).
func (t *table) keyOf(key map[string]types.AttributeValue) (string, error) {
	want := 1
	if t.spec.Sort != nil {
		want = 2
	}
	if len(key) != want {
		return "", validation("The provided key element does not match the schema")
	}
	pk, err := keyPart(key, t.spec.Partition)
	if err != nil {
		return "", err
	}
	if t.spec.Sort == nil {
		return pk, nil
	}
	sk, err := keyPart(key, *t.spec.Sort)
	if err != nil {
		return "", err
	}
	return pk + "\x00" + sk, nil
}

func keyPart(item map[string]types.AttributeValue, k topology.Key) (string, error) {
	v, ok := item[k.Name]
	if !ok {
		return "", validation("The provided key element does not match the schema")
	}
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		if k.Type == topology.KeyString && v.Value != "" {
			return "S" + v.Value, nil
		}
	case *types.AttributeValueMemberN:
		if k.Type == topology.KeyNumber {
			return "N" + canonical(v), nil
		}
	}
	return "", validation("The provided key element does not match the schema")
}

// keyAttributes is the table key part of item.
func (t *table) keyAttributes(item map[string]types.AttributeValue) map[string]types.AttributeValue {
	out := map[string]types.AttributeValue{t.spec.Partition.Name: item[t.spec.Partition.Name]}
	if t.spec.Sort != nil {
		out[t.spec.Sort.Name] = item[t.spec.Sort.Name]
	}
	return out
}

// validItem checks an item about to be stored: its index key attributes,
// when present, have their declared types, and it fits 400 KB.
func (t *table) validItem(item map[string]types.AttributeValue) error {
	for _, ix := range t.spec.Indexes {
		for _, k := range []topology.Key{ix.Partition, ix.Sort} {
			v, ok := item[k.Name]
			if !ok {
				continue
			}
			_, isS := v.(*types.AttributeValueMemberS)
			_, isN := v.(*types.AttributeValueMemberN)
			if (k.Type == topology.KeyString && !isS) || (k.Type == topology.KeyNumber && !isN) {
				return validation("One or more parameter values were invalid: Type mismatch for Index Key %s", k.Name)
			}
		}
	}
	for name, v := range item {
		if s, ok := v.(*types.AttributeValueMemberS); ok && s.Value == "" && t.isKey(name) {
			return validation("One or more parameter values are not valid. A value specified for a secondary index key is not supported. The AttributeValue for a key attribute cannot contain an empty string value. Key: %s", name)
		}
	}
	if ItemSize(item) > MaxItemBytes {
		return validation("Item size has exceeded the maximum allowed size")
	}
	return nil
}

func (t *table) isKey(name string) bool {
	if name == t.spec.Partition.Name || t.spec.Sort != nil && name == t.spec.Sort.Name {
		return true
	}
	for _, ix := range t.spec.Indexes {
		if name == ix.Partition.Name || name == ix.Sort.Name {
			return true
		}
	}
	return false
}

func clone(item map[string]types.AttributeValue) map[string]types.AttributeValue {
	if item == nil {
		return nil
	}
	out := make(map[string]types.AttributeValue, len(item))
	for k, v := range item {
		out[k] = v
	}
	return out
}

// conditionHolds parses and evaluates a condition expression on item
// (empty when there is none).
func conditionHolds(expr *string, item map[string]types.AttributeValue, p *parser) (bool, error) {
	if expr == nil {
		return true, nil
	}
	q, err := newParser(*expr, p.names, p.values, &usage{names: p.usedNames, values: p.usedValues})
	if err != nil {
		return false, validation("Invalid ConditionExpression: %v", err)
	}
	c, err := q.condition()
	if err == nil {
		err = q.done()
	}
	if err != nil {
		return false, validation("Invalid ConditionExpression: %v", err)
	}
	if item == nil {
		item = map[string]types.AttributeValue{}
	}
	return c.eval(item)
}

func conditionFailed(item map[string]types.AttributeValue, allOld bool) error {
	e := &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")}
	if allOld && item != nil {
		e.Item = clone(item)
	}
	return e
}

// GetItem implements the DynamoDB operation.
func (db *DB) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	t, err := db.table(in.TableName)
	if err != nil {
		return nil, err
	}
	k, err := t.keyOf(in.Key)
	if err != nil {
		return nil, err
	}
	use := newUsage()
	proj, err := projection(in.ProjectionExpression, in.ExpressionAttributeNames, use)
	if err != nil {
		return nil, err
	}
	if err := use.check(in.ExpressionAttributeNames, nil); err != nil {
		return nil, validation("%v", err)
	}
	item, ok := t.items[k]
	if !ok {
		return &dynamodb.GetItemOutput{}, nil
	}
	return &dynamodb.GetItemOutput{Item: project(item, proj)}, nil
}

func projection(expr *string, names map[string]string, use *usage) ([]string, error) {
	if expr == nil {
		return nil, nil
	}
	p, err := newParser(*expr, names, nil, use)
	if err != nil {
		return nil, validation("Invalid ProjectionExpression: %v", err)
	}
	out, err := p.projection()
	if err != nil {
		return nil, validation("Invalid ProjectionExpression: %v", err)
	}
	return out, nil
}

func project(item map[string]types.AttributeValue, names []string) map[string]types.AttributeValue {
	if names == nil {
		return clone(item)
	}
	out := map[string]types.AttributeValue{}
	for _, n := range names {
		if v, ok := item[n]; ok {
			out[n] = v
		}
	}
	return out
}

// PutItem implements the DynamoDB operation.
func (db *DB) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	t, err := db.table(in.TableName)
	if err != nil {
		return nil, err
	}
	k, err := t.keyOf(t.keyAttributes(in.Item))
	if err != nil {
		return nil, err
	}
	if err := t.validItem(in.Item); err != nil {
		return nil, err
	}
	old := t.items[k]
	p := &parser{names: in.ExpressionAttributeNames, values: in.ExpressionAttributeValues, usedNames: map[string]bool{}, usedValues: map[string]bool{}}
	ok, err := conditionHolds(in.ConditionExpression, old, p)
	if err != nil {
		return nil, err
	}
	if err := (&usage{p.usedNames, p.usedValues}).check(in.ExpressionAttributeNames, in.ExpressionAttributeValues); err != nil {
		return nil, validation("%v", err)
	}
	if !ok {
		return nil, conditionFailed(old, in.ReturnValuesOnConditionCheckFailure == types.ReturnValuesOnConditionCheckFailureAllOld)
	}
	t.items[k] = clone(in.Item)
	out := &dynamodb.PutItemOutput{}
	if in.ReturnValues == types.ReturnValueAllOld && old != nil {
		out.Attributes = clone(old)
	}
	return out, nil
}

// UpdateItem implements the DynamoDB operation (an update of a missing
// item creates it from its key, as DynamoDB does).
func (db *DB) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	t, err := db.table(in.TableName)
	if err != nil {
		return nil, err
	}
	k, err := t.keyOf(in.Key)
	if err != nil {
		return nil, err
	}
	if in.UpdateExpression == nil {
		return nil, validation("UpdateExpression is required")
	}
	use := newUsage()
	p, err := newParser(*in.UpdateExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues, use)
	if err != nil {
		return nil, validation("Invalid UpdateExpression: %v", err)
	}
	u, err := p.update()
	if err != nil {
		return nil, validation("Invalid UpdateExpression: %v", err)
	}
	for _, a := range u.set {
		if t.isTableKey(a.path) {
			return nil, validation("One or more parameter values were invalid: Cannot update attribute %s. This attribute is part of the key", a.path)
		}
	}
	for _, r := range u.remove {
		if t.isTableKey(r) {
			return nil, validation("One or more parameter values were invalid: Cannot update attribute %s. This attribute is part of the key", r)
		}
	}
	old := t.items[k]
	ok, err := conditionHolds(in.ConditionExpression, old, p)
	if err != nil {
		return nil, err
	}
	if err := use.check(in.ExpressionAttributeNames, in.ExpressionAttributeValues); err != nil {
		return nil, validation("%v", err)
	}
	if !ok {
		return nil, conditionFailed(old, in.ReturnValuesOnConditionCheckFailure == types.ReturnValuesOnConditionCheckFailureAllOld)
	}
	base := old
	if base == nil {
		base = clone(in.Key)
	}
	next, err := u.apply(base)
	if err != nil {
		return nil, validation("%v", err)
	}
	if err := t.validItem(next); err != nil {
		return nil, err
	}
	t.items[k] = next
	out := &dynamodb.UpdateItemOutput{}
	switch in.ReturnValues {
	case types.ReturnValueAllNew:
		out.Attributes = clone(next)
	case types.ReturnValueAllOld:
		out.Attributes = clone(old)
	case types.ReturnValueNone, "":
	default:
		return nil, validation("ReturnValues %s is not supported by the fake", in.ReturnValues)
	}
	return out, nil
}

func (t *table) isTableKey(name string) bool {
	return name == t.spec.Partition.Name || t.spec.Sort != nil && name == t.spec.Sort.Name
}

// Query implements the DynamoDB operation on the table or one of its
// global secondary indexes.
func (db *DB) Query(_ context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	t, err := db.table(in.TableName)
	if err != nil {
		return nil, err
	}
	part, sort := t.spec.Partition, t.spec.Sort
	var ix *topology.Index
	if in.IndexName != nil {
		for i := range t.spec.Indexes {
			if t.spec.Indexes[i].Name == *in.IndexName {
				ix = &t.spec.Indexes[i]
			}
		}
		if ix == nil {
			return nil, validation("The table does not have the specified index: %s", *in.IndexName)
		}
		if aws.ToBool(in.ConsistentRead) {
			return nil, validation("Consistent reads are not supported on global secondary indexes")
		}
		part, sort = ix.Partition, &ix.Sort
	}
	if in.KeyConditionExpression == nil {
		return nil, validation("Either the KeyConditions or KeyConditionExpression parameter must be specified in the request.")
	}
	if in.Limit != nil && *in.Limit <= 0 {
		return nil, validation("Limit must be at least 1")
	}
	use := newUsage()
	p, err := newParser(*in.KeyConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues, use)
	if err != nil {
		return nil, validation("Invalid KeyConditionExpression: %v", err)
	}
	kc, err := p.condition()
	if err == nil {
		err = p.done()
	}
	if err != nil {
		return nil, validation("Invalid KeyConditionExpression: %v", err)
	}
	if err := validKeyCondition(kc, part, sort); err != nil {
		return nil, err
	}
	proj, err := projection(in.ProjectionExpression, in.ExpressionAttributeNames, use)
	if err != nil {
		return nil, err
	}
	if err := use.check(in.ExpressionAttributeNames, in.ExpressionAttributeValues); err != nil {
		return nil, validation("%v", err)
	}
	if in.Select == types.SelectSpecificAttributes && proj == nil {
		return nil, validation("SPECIFIC_ATTRIBUTES needs a ProjectionExpression")
	}
	// The index's entries: items holding both of its key attributes.
	type entry struct {
		item  map[string]types.AttributeValue
		order []types.AttributeValue
	}
	var entries []entry
	for _, item := range t.items {
		if _, ok := item[part.Name]; !ok {
			continue
		}
		if sort != nil {
			if _, ok := item[sort.Name]; !ok {
				continue
			}
		}
		ok, err := kc.eval(item)
		if err != nil {
			return nil, validation("%v", err)
		}
		if !ok {
			continue
		}
		entries = append(entries, entry{item: item, order: t.order(item, sort)})
	}
	less := func(a, b []types.AttributeValue) int {
		for i := range a {
			if r, _ := compare(a[i], b[i]); r != 0 {
				return r
			}
		}
		return 0
	}
	slices.SortFunc(entries, func(a, b entry) int { return less(a.order, b.order) })
	if in.ScanIndexForward != nil && !*in.ScanIndexForward {
		slices.Reverse(entries)
	}
	if len(in.ExclusiveStartKey) > 0 {
		start, err := t.startOrder(in.ExclusiveStartKey, part, sort, ix != nil)
		if err != nil {
			return nil, err
		}
		forward := in.ScanIndexForward == nil || *in.ScanIndexForward
		i := 0
		for i < len(entries) {
			r := less(entries[i].order, start)
			if forward && r > 0 || !forward && r < 0 {
				break
			}
			i++
		}
		entries = entries[i:]
	}
	out := &dynamodb.QueryOutput{}
	limit := len(entries)
	if in.Limit != nil && int(*in.Limit) < limit {
		limit = int(*in.Limit)
	}
	for _, e := range entries[:limit] {
		item := e.item
		if ix != nil && ix.KeysOnly {
			keys := t.keyAttributes(item)
			keys[ix.Partition.Name], keys[ix.Sort.Name] = item[ix.Partition.Name], item[ix.Sort.Name]
			item = keys
		}
		out.Items = append(out.Items, project(item, proj))
	}
	out.Count = int32(len(out.Items))
	out.ScannedCount = out.Count
	// DynamoDB returns a LastEvaluatedKey whenever it stopped at Limit,
	// even when nothing follows.
	if in.Limit != nil && limit == int(*in.Limit) && limit > 0 {
		last := entries[limit-1].item
		lek := t.keyAttributes(last)
		if ix != nil {
			lek[ix.Partition.Name], lek[ix.Sort.Name] = last[ix.Partition.Name], last[ix.Sort.Name]
		}
		out.LastEvaluatedKey = lek
	}
	return out, nil
}

// order is the position of item in a Query's order: the sort key (of the
// index or the table), then a hash of the table key. DynamoDB does not
// promise an order among index entries with equal keys (DynamoDB Local's
// is neither insertion nor key order), only a stable one that
// ExclusiveStartKey resumes; hashing keeps the fake from ordering ties the
// way a reader might wrongly assume.
func (t *table) order(item map[string]types.AttributeValue, sort *topology.Key) []types.AttributeValue {
	var o []types.AttributeValue
	if sort != nil {
		o = append(o, item[sort.Name])
	}
	h := fnv.New64a()
	for _, k := range []string{t.spec.Partition.Name, t.sortName()} {
		if k != "" {
			h.Write([]byte(canonical(item[k])))
			h.Write([]byte{0})
		}
	}
	o = append(o, &types.AttributeValueMemberN{Value: strconv.FormatUint(h.Sum64(), 10)})
	// The table key itself last: a total order even if two hashes met.
	o = append(o, item[t.spec.Partition.Name])
	if t.spec.Sort != nil {
		o = append(o, item[t.spec.Sort.Name])
	}
	return o
}

func (t *table) sortName() string {
	if t.spec.Sort == nil {
		return ""
	}
	return t.spec.Sort.Name
}

// startOrder is the order of an ExclusiveStartKey, which must hold the
// table key (and, on an index, the index key) and nothing else.
func (t *table) startOrder(esk map[string]types.AttributeValue, part topology.Key, sort *topology.Key, onIndex bool) ([]types.AttributeValue, error) {
	need := map[string]topology.Key{t.spec.Partition.Name: t.spec.Partition}
	if t.spec.Sort != nil {
		need[t.spec.Sort.Name] = *t.spec.Sort
	}
	if onIndex {
		need[part.Name] = part
		need[sort.Name] = *sort
	}
	if len(esk) != len(need) {
		return nil, validation("The provided starting key is invalid: The provided key element does not match the schema")
	}
	for name, k := range need {
		if _, err := keyPart(esk, k); err != nil {
			return nil, validation("The provided starting key is invalid: The provided key element does not match the schema")
		}
		_ = name
	}
	return t.order(esk, sort), nil
}

// validKeyCondition: an equality on the partition key, and at most one
// condition (=, <, <=, >, >=, BETWEEN, begins_with) on the sort key.
func validKeyCondition(c *cond, part topology.Key, sort *topology.Key) error {
	var parts []*cond
	var flatten func(c *cond) error
	flatten = func(c *cond) error {
		switch c.op {
		case "and":
			if err := flatten(c.sub[0]); err != nil {
				return err
			}
			return flatten(c.sub[1])
		case "cmp", "between", "fn":
			parts = append(parts, c)
			return nil
		}
		return validation("Invalid operator used in KeyConditionExpression: %s", strings.ToUpper(c.op))
	}
	if err := flatten(c); err != nil {
		return err
	}
	onPart, onSort := 0, 0
	for _, p := range parts {
		path := p.args[0].path
		if path == "" || p.args[len(p.args)-1].path != "" && p.op != "fn" {
			return validation("Invalid KeyConditionExpression: a key condition compares a key attribute with a value")
		}
		switch {
		case path == part.Name && p.op == "cmp" && p.cmp == "=":
			onPart++
		case sort != nil && path == sort.Name && (p.op == "between" || p.op == "fn" && p.fn == "begins_with" ||
			p.op == "cmp" && p.cmp != "<>"):
			onSort++
		default:
			return validation("Query condition missed key schema element or used an unsupported operator on %s", path)
		}
	}
	if onPart != 1 || onSort > 1 {
		return validation("Query condition missed key schema element: %s", part.Name)
	}
	return nil
}

// BatchGetItem implements the DynamoDB operation (every key is processed).
func (db *DB) BatchGetItem(_ context.Context, in *dynamodb.BatchGetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	n := 0
	out := &dynamodb.BatchGetItemOutput{Responses: map[string][]map[string]types.AttributeValue{}}
	for name, ka := range in.RequestItems {
		t, err := db.table(aws.String(name))
		if err != nil {
			return nil, err
		}
		use := newUsage()
		proj, err := projection(ka.ProjectionExpression, ka.ExpressionAttributeNames, use)
		if err != nil {
			return nil, err
		}
		if err := use.check(ka.ExpressionAttributeNames, nil); err != nil {
			return nil, validation("%v", err)
		}
		seen := map[string]bool{}
		for _, key := range ka.Keys {
			n++
			k, err := t.keyOf(key)
			if err != nil {
				return nil, err
			}
			if seen[k] {
				return nil, validation("Provided list of item keys contains duplicates")
			}
			seen[k] = true
			if item, ok := t.items[k]; ok {
				out.Responses[name] = append(out.Responses[name], project(item, proj))
			}
		}
	}
	if n == 0 || n > 100 {
		return nil, validation("Too many items requested for the BatchGetItem call")
	}
	return out, nil
}

// TransactWriteItems implements the DynamoDB operation for Put and
// ConditionCheck actions: every condition is evaluated first; one refused
// cancels the whole transaction with a reason per action.
func (db *DB) TransactWriteItems(_ context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if len(in.TransactItems) == 0 || len(in.TransactItems) > 100 {
		return nil, validation("Member must have length less than or equal to 100 and at least 1")
	}
	type write struct {
		t    *table
		k    string
		item map[string]types.AttributeValue
	}
	var writes []write
	reasons := make([]types.CancellationReason, len(in.TransactItems))
	failed := false
	seen := map[string]bool{}
	for i, ti := range in.TransactItems {
		var (
			tableName *string
			key       map[string]types.AttributeValue
			condition *string
			names     map[string]string
			values    map[string]types.AttributeValue
			allOld    bool
			put       map[string]types.AttributeValue
		)
		switch {
		case ti.Put != nil && ti.Update == nil && ti.Delete == nil && ti.ConditionCheck == nil:
			tableName, condition, names, values, put = ti.Put.TableName, ti.Put.ConditionExpression, ti.Put.ExpressionAttributeNames, ti.Put.ExpressionAttributeValues, ti.Put.Item
			allOld = ti.Put.ReturnValuesOnConditionCheckFailure == types.ReturnValuesOnConditionCheckFailureAllOld
		case ti.ConditionCheck != nil && ti.Put == nil && ti.Update == nil && ti.Delete == nil:
			tableName, key, condition, names, values = ti.ConditionCheck.TableName, ti.ConditionCheck.Key, ti.ConditionCheck.ConditionExpression, ti.ConditionCheck.ExpressionAttributeNames, ti.ConditionCheck.ExpressionAttributeValues
			allOld = ti.ConditionCheck.ReturnValuesOnConditionCheckFailure == types.ReturnValuesOnConditionCheckFailureAllOld
		default:
			return nil, validation("the fake supports Put and ConditionCheck transaction items only")
		}
		t, err := db.table(tableName)
		if err != nil {
			return nil, err
		}
		if put != nil {
			key = t.keyAttributes(put)
		}
		k, err := t.keyOf(key)
		if err != nil {
			return nil, err
		}
		if seen[t.spec.Name+"\x01"+k] {
			return nil, validation("Transaction request cannot include multiple operations on one item")
		}
		seen[t.spec.Name+"\x01"+k] = true
		if put != nil {
			if err := t.validItem(put); err != nil {
				return nil, err
			}
		}
		old := t.items[k]
		p := &parser{names: names, values: values, usedNames: map[string]bool{}, usedValues: map[string]bool{}}
		ok, err := conditionHolds(condition, old, p)
		if err != nil {
			return nil, err
		}
		if err := (&usage{p.usedNames, p.usedValues}).check(names, values); err != nil {
			return nil, validation("%v", err)
		}
		reasons[i] = types.CancellationReason{Code: aws.String("None")}
		if !ok {
			failed = true
			reasons[i] = types.CancellationReason{Code: aws.String("ConditionalCheckFailed"), Message: aws.String("The conditional request failed")}
			if allOld && old != nil {
				reasons[i].Item = clone(old)
			}
		}
		if put != nil {
			writes = append(writes, write{t: t, k: k, item: clone(put)})
		}
	}
	if failed {
		codes := make([]string, len(reasons))
		for i, r := range reasons {
			codes[i] = aws.ToString(r.Code)
		}
		return nil, &types.TransactionCanceledException{
			Message:             aws.String("Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(codes, ", ") + "]"),
			CancellationReasons: reasons,
		}
	}
	for _, w := range writes {
		w.t.items[w.k] = w.item
	}
	return &dynamodb.TransactWriteItemsOutput{}, nil
}

// Raw returns a copy of the stored item of key (nil when there is none),
// bypassing everything: for tests and the simulation's tampering.
func (db *DB) Raw(tableName string, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	db.mu.Lock()
	defer db.mu.Unlock()
	t, ok := db.tables[tableName]
	if !ok {
		return nil
	}
	k, err := t.keyOf(key)
	if err != nil {
		return nil
	}
	return clone(t.items[k])
}

// SetRaw stores item as is, bypassing every condition and check.
func (db *DB) SetRaw(tableName string, item map[string]types.AttributeValue) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	t, ok := db.tables[tableName]
	if !ok {
		return fmt.Errorf("dynamofake: no table %s", tableName)
	}
	k, err := t.keyOf(t.keyAttributes(item))
	if err != nil {
		return err
	}
	t.items[k] = clone(item)
	return nil
}

// Len is the number of items of a table.
func (db *DB) Len(tableName string) int {
	db.mu.Lock()
	defer db.mu.Unlock()
	if t, ok := db.tables[tableName]; ok {
		return len(t.items)
	}
	return 0
}

func sortedKeys(m map[string]types.AttributeValue) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sortedStrings(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return out
}
