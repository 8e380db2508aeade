// Package meter counts what localeflow asks of AWS, for the cost model.
//
// A Meter installs two SDK middlewares on any client (DynamoDB, SQS,
// EventBridge):
//
//   - in the Deserialize step, next to the transport, it counts every HTTP
//     attempt by service and operation (retries included: AWS bills each);
//   - in the Initialize step, on DynamoDB calls, it sets
//     ReturnConsumedCapacity=INDEXES when the caller did not ask for it and
//     adds up the read and write capacity units the answers report; a
//     conditional write that fails reports no capacity, so those are
//     counted separately (ConditionFailures) — AWS still bills them as
//     writes. For PutEvents it counts entries (EventBridge bills per event,
//     not per request), for SendMessageBatch the messages.
//
// Reads are counted at AWS's minimum: DynamoDB Local reports 0 units for
// a Query that returns nothing, while AWS bills "the minimum number of
// read capacity units for that type of read operation" (DynamoDB API
// reference, Query; the same minimum applies to GetItem and Scan): 1 unit
// for a strongly consistent read, 0.5 for an eventually consistent one (a
// Query or Scan of a global secondary index is always eventually
// consistent). A successful GetItem, Query or Scan whose answer reports
// less is counted at that minimum, and each such correction is counted
// apart (MinimumCorrections), so a reader sees what was corrected.
package meter

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/smithy-go/middleware"
)

// Meter accumulates counts; the zero value is not usable, use New.
type Meter struct {
	mu                sync.Mutex
	requests          map[string]int64 // "Service.Operation"
	readUnits         float64
	writeUnits        float64
	conditionFailures int64
	minCorrections    int64
	events            int64
	calls             int64
	indexUnits        float64
	byLabel           map[string]*LabelCount
}

// LabelCount is what the DynamoDB calls of one label (Label) cost.
type LabelCount struct {
	Calls      int64
	ReadUnits  float64
	WriteUnits float64
}

// New returns an empty meter.
func New() *Meter { return &Meter{requests: map[string]int64{}, byLabel: map[string]*LabelCount{}} }

// Install adds the meter to a client's stack (an APIOptions entry).
func (m *Meter) Install(stack *middleware.Stack) error {
	if err := stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("localeflowMeterAttempts", m.countAttempt), middleware.After); err != nil {
		return err
	}
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("localeflowMeterCapacity", m.capacity), middleware.After)
}

func (m *Meter) countAttempt(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
	key := awsmiddleware.GetServiceID(ctx) + "." + awsmiddleware.GetOperationName(ctx)
	m.mu.Lock()
	m.requests[key]++
	m.mu.Unlock()
	return next.HandleDeserialize(ctx, in)
}

func (m *Meter) capacity(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	write := askCapacity(in.Parameters)
	label := Label(in.Parameters)
	m.mu.Lock()
	m.calls++
	m.mu.Unlock()
	if p, ok := in.Parameters.(*eventbridge.PutEventsInput); ok {
		m.mu.Lock()
		m.events += int64(len(p.Entries))
		m.mu.Unlock()
	}
	out, meta, err := next.HandleInitialize(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	var tcx *types.TransactionCanceledException
	m.mu.Lock()
	defer m.mu.Unlock()
	if errors.As(err, &ccf) || errors.As(err, &tcx) {
		m.conditionFailures++
	}
	lc := m.label(label)
	var reportedReads float64
	for _, c := range consumed(out.Result) {
		if c.ReadCapacityUnits != nil {
			m.readUnits += *c.ReadCapacityUnits
			lc.ReadUnits += *c.ReadCapacityUnits
			reportedReads += *c.ReadCapacityUnits
		}
		if c.WriteCapacityUnits != nil {
			m.writeUnits += *c.WriteCapacityUnits
			lc.WriteUnits += *c.WriteCapacityUnits
		}
		for _, ix := range c.GlobalSecondaryIndexes {
			if ix.CapacityUnits != nil {
				m.indexUnits += *ix.CapacityUnits
			}
		}
		if c.ReadCapacityUnits == nil && c.WriteCapacityUnits == nil && c.CapacityUnits != nil {
			// TOTAL reports only CapacityUnits: the operation says which.
			if write {
				m.writeUnits += *c.CapacityUnits
				lc.WriteUnits += *c.CapacityUnits
			} else {
				m.readUnits += *c.CapacityUnits
				lc.ReadUnits += *c.CapacityUnits
				reportedReads += *c.CapacityUnits
			}
		}
	}
	if least, index, ok := readMinimum(in.Parameters); ok && err == nil && reportedReads < least {
		d := least - reportedReads
		m.readUnits += d
		lc.ReadUnits += d
		if index {
			m.indexUnits += d
		}
		m.minCorrections++
	}
	return out, meta, err
}

// readMinimum is the read units AWS bills at least for one successful
// single read request (GetItem, Query, Scan): 1 strongly consistent, 0.5
// eventually consistent; a read of a global secondary index (IndexName
// set) is always eventually consistent (index reports whether it is one).
// ok is false for other operations. BatchGetItem and transactions are
// not corrected (the project does not use them to read).
func readMinimum(p any) (least float64, index, ok bool) {
	units := func(consistent *bool, indexName *string) (float64, bool, bool) {
		if indexName != nil {
			return 0.5, true, true
		}
		if aws.ToBool(consistent) {
			return 1, false, true
		}
		return 0.5, false, true
	}
	switch in := p.(type) {
	case *dynamodb.GetItemInput:
		return units(in.ConsistentRead, nil)
	case *dynamodb.QueryInput:
		return units(in.ConsistentRead, in.IndexName)
	case *dynamodb.ScanInput:
		return units(in.ConsistentRead, in.IndexName)
	}
	return 0, false, false
}

// askCapacity asks for consumed capacity on DynamoDB inputs and reports
// whether the operation writes.
func askCapacity(p any) (write bool) {
	const total = types.ReturnConsumedCapacityIndexes
	switch p.(type) {
	case *dynamodb.PutItemInput, *dynamodb.UpdateItemInput, *dynamodb.DeleteItemInput,
		*dynamodb.BatchWriteItemInput, *dynamodb.TransactWriteItemsInput:
		write = true
	}
	switch in := p.(type) {
	case *dynamodb.GetItemInput:
		if in.ReturnConsumedCapacity == "" {
			in.ReturnConsumedCapacity = total
		}
	case *dynamodb.PutItemInput:
		if in.ReturnConsumedCapacity == "" {
			in.ReturnConsumedCapacity = total
		}
	case *dynamodb.UpdateItemInput:
		if in.ReturnConsumedCapacity == "" {
			in.ReturnConsumedCapacity = total
		}
	case *dynamodb.DeleteItemInput:
		if in.ReturnConsumedCapacity == "" {
			in.ReturnConsumedCapacity = total
		}
	case *dynamodb.QueryInput:
		if in.ReturnConsumedCapacity == "" {
			in.ReturnConsumedCapacity = total
		}
	case *dynamodb.ScanInput:
		if in.ReturnConsumedCapacity == "" {
			in.ReturnConsumedCapacity = total
		}
	case *dynamodb.BatchGetItemInput:
		if in.ReturnConsumedCapacity == "" {
			in.ReturnConsumedCapacity = total
		}
	case *dynamodb.BatchWriteItemInput:
		if in.ReturnConsumedCapacity == "" {
			in.ReturnConsumedCapacity = total
		}
	case *dynamodb.TransactWriteItemsInput:
		if in.ReturnConsumedCapacity == "" {
			in.ReturnConsumedCapacity = total
		}
	}
	return write
}

func consumed(result any) []types.ConsumedCapacity {
	one := func(c *types.ConsumedCapacity) []types.ConsumedCapacity {
		if c == nil {
			return nil
		}
		return []types.ConsumedCapacity{*c}
	}
	switch out := result.(type) {
	case *dynamodb.GetItemOutput:
		return one(out.ConsumedCapacity)
	case *dynamodb.PutItemOutput:
		return one(out.ConsumedCapacity)
	case *dynamodb.UpdateItemOutput:
		return one(out.ConsumedCapacity)
	case *dynamodb.DeleteItemOutput:
		return one(out.ConsumedCapacity)
	case *dynamodb.QueryOutput:
		return one(out.ConsumedCapacity)
	case *dynamodb.ScanOutput:
		return one(out.ConsumedCapacity)
	case *dynamodb.BatchGetItemOutput:
		return out.ConsumedCapacity
	case *dynamodb.BatchWriteItemOutput:
		return out.ConsumedCapacity
	case *dynamodb.TransactWriteItemsOutput:
		return out.ConsumedCapacity
	}
	return nil
}

// Snapshot is what a meter counted.
type Snapshot struct {
	// Requests by "Service.Operation" (e.g. "DynamoDB.UpdateItem").
	Requests          map[string]int64
	ReadUnits         float64
	WriteUnits        float64
	ConditionFailures int64
	// MinimumCorrections counts the reads (GetItem, Query, Scan) whose
	// answer reported fewer units than AWS bills at least (1 strongly
	// consistent, 0.5 eventually consistent): each is counted at that
	// minimum in ReadUnits (see the package doc).
	MinimumCorrections int64
	// Events is the number of PutEvents entries.
	Events int64
	// Calls counts SDK operation calls; Attempts() - Calls are the SDK's
	// own retries.
	Calls int64
	// IndexUnits is the part of the units spent on global secondary
	// indexes (included in ReadUnits/WriteUnits).
	IndexUnits float64
	// ByLabel splits the DynamoDB calls and units by Label.
	ByLabel map[string]LabelCount
}

// Attempts is the number of HTTP attempts of every service.
func (s Snapshot) Attempts() int64 {
	var n int64
	for _, v := range s.Requests {
		n += v
	}
	return n
}

// Snapshot returns the counts so far.
func (m *Meter) Snapshot() Snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := Snapshot{Requests: make(map[string]int64, len(m.requests)), ReadUnits: m.readUnits, WriteUnits: m.writeUnits,
		ConditionFailures: m.conditionFailures, MinimumCorrections: m.minCorrections, Events: m.events, Calls: m.calls, IndexUnits: m.indexUnits}
	for k, v := range m.requests {
		s.Requests[k] = v
	}
	s.ByLabel = make(map[string]LabelCount, len(m.byLabel))
	for k, v := range m.byLabel {
		s.ByLabel[k] = *v
	}
	return s
}

// Reset clears every count.
func (m *Meter) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests = map[string]int64{}
	m.byLabel = map[string]*LabelCount{}
	m.readUnits, m.writeUnits, m.conditionFailures, m.events, m.calls, m.indexUnits = 0, 0, 0, 0, 0, 0
	m.minCorrections = 0
}

// Service sums the requests of one service ("DynamoDB", "SQS",
// "EventBridge").
func (s Snapshot) Service(name string) int64 {
	var n int64
	for k, v := range s.Requests {
		if len(k) > len(name) && k[:len(name)] == name && k[len(name)] == '.' {
			n += v
		}
	}
	return n
}

// Operations lists the counted operations in order.
func (s Snapshot) Operations() []string {
	ops := make([]string, 0, len(s.Requests))
	for k := range s.Requests {
		ops = append(ops, k)
	}
	sort.Strings(ops)
	return ops
}

// label returns the count of one label (m.mu held); calls counted once
// per call.
func (m *Meter) label(l string) *LabelCount {
	if l == "" {
		return &LabelCount{}
	}
	lc := m.byLabel[l]
	if lc == nil {
		lc = &LabelCount{}
		m.byLabel[l] = lc
	}
	lc.Calls++
	return lc
}

// Label names a DynamoDB call for the cost breakdown: the operation and
// the kinds of the items it names (the sort key up to its first '#'), or
// the index it reads; "" for other services.
func Label(p any) string {
	kind := func(item map[string]types.AttributeValue) string {
		sk, ok := item["sk"].(*types.AttributeValueMemberS)
		if !ok {
			return "?"
		}
		k, _, _ := strings.Cut(sk.Value, "#")
		return k
	}
	switch in := p.(type) {
	case *dynamodb.PutItemInput:
		return "PutItem " + kind(in.Item)
	case *dynamodb.UpdateItemInput:
		return "UpdateItem " + kind(in.Key)
	case *dynamodb.DeleteItemInput:
		return "DeleteItem " + kind(in.Key)
	case *dynamodb.GetItemInput:
		return "GetItem " + kind(in.Key)
	case *dynamodb.ScanInput:
		if in.IndexName != nil {
			return "Scan index " + *in.IndexName
		}
		return "Scan table"
	case *dynamodb.TransactWriteItemsInput:
		var kinds []string
		for _, it := range in.TransactItems {
			switch {
			case it.Put != nil:
				kinds = append(kinds, "put:"+kind(it.Put.Item))
			case it.Update != nil:
				kinds = append(kinds, "update:"+kind(it.Update.Key))
			case it.Delete != nil:
				kinds = append(kinds, "delete:"+kind(it.Delete.Key))
			case it.ConditionCheck != nil:
				kinds = append(kinds, "check:"+kind(it.ConditionCheck.Key))
			}
		}
		sort.Strings(kinds)
		return "TransactWriteItems " + strings.Join(kinds, "+")
	case *dynamodb.QueryInput:
		if in.IndexName != nil {
			return "Query index " + *in.IndexName
		}
		l := "Query table"
		cond := aws.ToString(in.KeyConditionExpression)
		skKind := ""
		for _, v := range in.ExpressionAttributeValues {
			if s, ok := v.(*types.AttributeValueMemberS); ok && !strings.HasPrefix(s.Value, "event#") {
				skKind, _, _ = strings.Cut(s.Value, "#")
			}
		}
		switch {
		case strings.Contains(cond, "<"):
			l += " sk<"
		case strings.Contains(cond, "begins_with"):
			l += " prefix " + skKind
		case skKind != "":
			l += " one " + skKind
		}
		return l
	case *dynamodb.BatchGetItemInput:
		return "BatchGetItem"
	case *dynamodb.BatchWriteItemInput:
		return "BatchWriteItem"
	}
	return ""
}
