package releasedb

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/topology"
)

var _ release.DueFinder = (*Store)(nil)

type wakeKey struct {
	PK     string `dynamodbav:"pk"`
	SK     string `dynamodbav:"sk"`
	WakeMS int64  `dynamodbav:"wake_ms"`
}

// Due implements release.DueFinder: one paginated KEYS_ONLY Query per shard
// of the sparse wake index (wake_shard = s AND wake_ms BETWEEN from AND to),
// in parallel, merged in wake order. The index is eventually consistent; a
// stale candidate only costs a step that finds nothing to do.
func (s *Store) Due(ctx context.Context, fromMS, toMS int64, limit int) ([]release.DueItem, error) {
	if limit <= 0 || toMS < fromMS {
		return nil, nil
	}
	results := make([][]wakeKey, topology.WakeShards)
	errs := make([]error, topology.WakeShards)
	var wg sync.WaitGroup
	for shard := range topology.WakeShards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[shard], errs[shard] = s.dueShard(ctx, shard, fromMS, toMS, limit)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var all []wakeKey
	for _, r := range results {
		all = append(all, r...)
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].WakeMS != all[j].WakeMS {
			return all[i].WakeMS < all[j].WakeMS
		}
		return all[i].PK < all[j].PK
	})
	out := make([]release.DueItem, 0, min(limit, len(all)))
	for _, k := range all[:min(limit, len(all))] {
		eventID, ok := strings.CutPrefix(k.PK, PKPrefix)
		if !ok || !core.ValidToken(eventID) {
			return nil, core.Fail("release.store.record_invalid")
		}
		out = append(out, release.DueItem{EventID: eventID, Delivery: k.SK == release.SKDelivery, WakeMS: k.WakeMS})
	}
	return out, nil
}

func (s *Store) dueShard(ctx context.Context, shard int, fromMS, toMS int64, limit int) ([]wakeKey, error) {
	expr, err := expression.NewBuilder().WithKeyCondition(
		expression.Key(topology.AttrWakeShard).Equal(expression.Value(shard)).
			And(expression.Key(topology.AttrWakeMS).Between(expression.Value(fromMS), expression.Value(toMS))),
	).Build()
	if err != nil {
		return nil, core.Wrap(CodeUnavailable, false, err)
	}
	in := &dynamodb.QueryInput{
		TableName: aws.String(s.table), IndexName: aws.String(topology.IndexWake),
		KeyConditionExpression:    expr.KeyCondition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ScanIndexForward:          aws.Bool(true),
	}
	var keys []wakeKey
	for len(keys) < limit {
		in.Limit = aws.Int32(int32(min(limit-len(keys), 1000)))
		out, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, core.Wrap(CodeUnavailable, true, fmt.Errorf("due shard %d: %w", shard, err))
		}
		var page []wakeKey
		if err := attributevalue.UnmarshalListOfMaps(out.Items, &page); err != nil {
			return nil, core.Wrap("release.store.record_invalid", false, fmt.Errorf("due shard %d: %w", shard, err))
		}
		keys = append(keys, page...)
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	return keys, nil
}
