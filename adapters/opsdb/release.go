package opsdb

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/adapters/batchget"
	"github.com/localeflow/localeflow/adapters/releasedb"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/health"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/topology"
)

// DynamoDBCensusAPI is the part of *dynamodb.Client an index census uses.
type DynamoDBCensusAPI interface {
	Query(ctx context.Context, params *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	BatchGetItem(ctx context.Context, params *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

var (
	_ DynamoDBCensusAPI    = (*dynamodb.Client)(nil)
	_ health.ReleaseCensus = (*ReleaseReader)(nil)
)

// ReleaseReader reads the open and failed evidence and delivery records of
// the release table.
type ReleaseReader struct {
	db    DynamoDBCensusAPI
	table string
}

// NewReleaseReader returns a reader of table (topology.Release.Name).
func NewReleaseReader(db DynamoDBCensusAPI, table string) (*ReleaseReader, error) {
	if db == nil || table == "" {
		return nil, errors.New("opsdb: NewReleaseReader needs a client and a table name")
	}
	return &ReleaseReader{db: db, table: table}, nil
}

func unavailable(op string, err error) error {
	return core.Wrap(health.CodeUnavailable, true, fmt.Errorf("opsdb %s: %w", op, err))
}

type releaseKey struct{ pk, sk string }

// ReleaseCensus implements health.ReleaseCensus.
func (r *ReleaseReader) ReleaseCensus(ctx context.Context) ([]health.ReleaseRecord, error) {
	keys, err := indexKeys(ctx, r.db, r.table, func(item map[string]types.AttributeValue) (releaseKey, bool) {
		pk, ok1 := stringAttr(item, topology.AttrPK)
		sk, ok2 := stringAttr(item, topology.AttrSK)
		return releaseKey{pk, sk}, ok1 && ok2
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].pk != keys[j].pk {
			return keys[i].pk < keys[j].pk
		}
		return keys[i].sk < keys[j].sk
	})
	avKeys := make([]map[string]types.AttributeValue, len(keys))
	for i, k := range keys {
		avKeys[i] = map[string]types.AttributeValue{
			topology.AttrPK: &types.AttributeValueMemberS{Value: k.pk},
			topology.AttrSK: &types.AttributeValueMemberS{Value: k.sk},
		}
	}
	items, err := batchGet(ctx, r.db, r.table, avKeys)
	if err != nil {
		return nil, err
	}
	var out []health.ReleaseRecord
	for _, item := range items {
		if !hasIndexKeys(item) {
			// Finished since the index was read (the index lags writes).
			continue
		}
		out = append(out, DecodeRelease(item))
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].EventID != out[j].EventID {
			return out[i].EventID < out[j].EventID
		}
		return out[i].SortKey < out[j].SortKey
	})
	return out, nil
}

// indexKeys queries every shard of the wake and attention indexes (16
// paginated KEYS_ONLY queries, in parallel) and returns the distinct
// table keys key extracts.
func indexKeys[K comparable](ctx context.Context, db DynamoDBCensusAPI, table string, key func(map[string]types.AttributeValue) (K, bool)) ([]K, error) {
	type job struct{ index, shardAttr string }
	var jobs []struct {
		job
		shard int
	}
	for _, j := range []job{{topology.IndexWake, topology.AttrWakeShard}, {topology.IndexAttention, topology.AttrAttentionShard}} {
		for shard := range topology.WakeShards {
			jobs = append(jobs, struct {
				job
				shard int
			}{j, shard})
		}
	}
	results := make([][]K, len(jobs))
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = queryShard(ctx, db, table, j.index, j.shardAttr, j.shard, key)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	seen := map[K]bool{}
	var out []K
	for _, r := range results {
		for _, k := range r {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	return out, nil
}

func queryShard[K any](ctx context.Context, db DynamoDBCensusAPI, table, index, shardAttr string, shard int, key func(map[string]types.AttributeValue) (K, bool)) ([]K, error) {
	// Projected onto the table key (the health role's dynamodb:Attributes
	// condition on the indexes allows only keys).
	expr, err := expression.NewBuilder().
		WithKeyCondition(expression.Key(shardAttr).Equal(expression.Value(shard))).
		WithProjection(expression.NamesList(expression.Name(topology.AttrPK), expression.Name(topology.AttrSK))).
		Build()
	if err != nil {
		return nil, fmt.Errorf("opsdb: build expression: %w", err)
	}
	in := &dynamodb.QueryInput{
		TableName: aws.String(table), IndexName: aws.String(index),
		KeyConditionExpression:    expr.KeyCondition(),
		ProjectionExpression:      expr.Projection(),
		Select:                    types.SelectSpecificAttributes,
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	}
	var out []K
	for pages := dynamodb.NewQueryPaginator(db, in); pages.HasMorePages(); {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, unavailable("census "+index, err)
		}
		for _, item := range page.Items {
			k, ok := key(item)
			if !ok {
				return nil, core.Wrap(health.CodeUnavailable, false, fmt.Errorf("opsdb: index %s entry without its table key", index))
			}
			out = append(out, k)
		}
	}
	return out, nil
}

// census projects the release items the census reads onto
// topology.ReleaseCensusAttributes: the health role may read nothing else
// (its dynamodb:Attributes condition), so texts never reach it.
var census = func() expression.Expression {
	names := make([]expression.NameBuilder, len(topology.ReleaseCensusAttributes))
	for i, a := range topology.ReleaseCensusAttributes {
		names[i] = expression.Name(a)
	}
	expr, err := expression.NewBuilder().WithProjection(expression.NamesList(names[0], names[1:]...)).Build()
	if err != nil {
		panic(err)
	}
	return expr
}()

// batchGet reads keys with strongly consistent BatchGetItem calls
// (batchget.Items), projected onto the census attributes. Keys whose item
// no longer exists are absent from the result.
func batchGet(ctx context.Context, db DynamoDBCensusAPI, table string, keys []map[string]types.AttributeValue) ([]map[string]types.AttributeValue, error) {
	items, err := batchget.Items(ctx, db, batchget.Input{Table: table, Keys: keys, Read: types.KeysAndAttributes{
		ConsistentRead: aws.Bool(true), ProjectionExpression: census.Projection(), ExpressionAttributeNames: census.Names(),
	}})
	if err != nil {
		return nil, unavailable("census get", err)
	}
	return items, nil
}

func stringAttr(item map[string]types.AttributeValue, name string) (string, bool) {
	v, ok := item[name].(*types.AttributeValueMemberS)
	if !ok {
		return "", false
	}
	return v.Value, true
}

func numberAttr(item map[string]types.AttributeValue, name string) (int64, bool, bool) {
	av, present := item[name]
	if !present {
		return 0, false, true
	}
	v, ok := av.(*types.AttributeValueMemberN)
	if !ok {
		return 0, true, false
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	return n, true, err == nil
}

func hasIndexKeys(item map[string]types.AttributeValue) bool {
	for _, a := range []string{topology.AttrWakeShard, topology.AttrWakeMS, topology.AttrAttentionShard, topology.AttrAttentionMS} {
		if _, ok := item[a]; ok {
			return true
		}
	}
	return false
}

// DecodeRelease decodes an index entry of the release table (evidence,
// delivery, a waking job or approval, a blocked release)
// with adapters/releasedb.DecodeProjected (the store's own decoding and key
// check, of the census projection).
// It never fails: an item that does not decode, is of another kind, or
// whose index keys disagree with its state comes back Corrupt.
func DecodeRelease(item map[string]types.AttributeValue) health.ReleaseRecord {
	pk, _ := stringAttr(item, topology.AttrPK)
	sk, _ := stringAttr(item, topology.AttrSK)
	eventID, _ := strings.CutPrefix(pk, releasedb.PKPrefix)
	out := health.ReleaseRecord{EventID: eventID, SortKey: sk, Corrupt: true}
	// The census projection never holds an approval's token, body or
	// signature.
	rec, err := releasedb.DecodeProjected(item)
	if err != nil || !core.ValidToken(eventID) {
		return out
	}
	switch r := rec.(type) {
	case *release.EvidenceRecord:
		out.Evidence = r
	case *release.DeliveryRecord:
		out.Delivery = r
	case *release.JobRecord:
		out.Job = r
	case *release.ApprovalRecord:
		out.Approval = r
	case *release.BlockedRecord:
		out.Blocked = r
	default:
		return out
	}
	out.Corrupt = !releaseIndexKeysAgree(item, rec)
	return out
}

// releaseIndexKeysAgree checks the sparse index attributes (wake,
// attention) the way adapters/releasedb.Item writes them.
func releaseIndexKeysAgree(item map[string]types.AttributeValue, rec release.Record) bool {
	eventID, sk := rec.Key()
	shard := int64(releasedb.Shard(eventID, sk))
	wakeMS, wakes, attentionMS, attention := release.Wake(rec)
	return pairAgrees(item, topology.AttrWakeShard, topology.AttrWakeMS, wakes, shard, wakeMS) &&
		pairAgrees(item, topology.AttrAttentionShard, topology.AttrAttentionMS, attention, shard, attentionMS)
}

func pairAgrees(item map[string]types.AttributeValue, shardAttr, msAttr string, want bool, shard, ms int64) bool {
	s, sPresent, sOK := numberAttr(item, shardAttr)
	m, mPresent, mOK := numberAttr(item, msAttr)
	if !sOK || !mOK || sPresent != want || mPresent != want {
		return false
	}
	return !want || (s == shard && m == ms)
}
