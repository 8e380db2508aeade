package releasedb

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/topology"
)

// CodeCursorInvalid refuses a page cursor this store did not make.
const CodeCursorInvalid = "release.store.cursor_invalid"

// sparseIndex names a sharded sparse index and its key attributes.
type sparseIndex struct{ name, shardAttr, msAttr string }

var (
	wakeIndex   = sparseIndex{topology.IndexWake, topology.AttrWakeShard, topology.AttrWakeMS}
	outboxIndex = sparseIndex{topology.IndexOutbox, topology.AttrOutboxShard, topology.AttrOutboxMS}
)

// cursor is where paging through a sparse index stands: the shard, and
// the index's LastEvaluatedKey in it (none: the shard's first page).
type cursor struct {
	Shard int    `json:"s"`
	PK    string `json:"pk,omitempty"`
	SK    string `json:"sk,omitempty"`
	MS    int64  `json:"ms,omitempty"`
}

func (c cursor) encode() (string, error) {
	raw, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("releasedb: encode cursor: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(raw), nil
}

func decodeCursor(s string) (cursor, error) {
	if s == "" {
		return cursor{}, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	var c cursor
	if err == nil {
		err = json.Unmarshal(raw, &c)
	}
	if err != nil || c.Shard < 0 || c.Shard >= topology.WakeShards || (c.PK == "") != (c.SK == "") ||
		(c.PK != "" && !strings.HasPrefix(c.PK, PKPrefix)) {
		return cursor{}, core.Fail(CodeCursorInvalid)
	}
	return c, nil
}

// indexKey is one index entry: the item's table keys and index time.
type indexKey struct {
	PK, SK string
	MS     int64
}

// page reads up to limit entries of ix with time at most toMS, shard by
// shard in time order, resuming after cur; the next cursor is "" once
// every shard is read. One Query per shard page: the cost follows what is
// in the index, not what the table holds.
func (s *Store) page(ctx context.Context, ix sparseIndex, toMS int64, encoded string, limit int) ([]indexKey, string, error) {
	if limit <= 0 {
		return nil, "", core.Fail("release.store.page_invalid")
	}
	cur, err := decodeCursor(encoded)
	if err != nil {
		return nil, "", err
	}
	var out []indexKey
	for cur.Shard < topology.WakeShards && len(out) < limit {
		expr, err := expression.NewBuilder().WithKeyCondition(
			expression.Key(ix.shardAttr).Equal(expression.Value(cur.Shard)).
				And(expression.Key(ix.msAttr).LessThanEqual(expression.Value(toMS))),
		).Build()
		if err != nil {
			return nil, "", core.Wrap(CodeUnavailable, false, err)
		}
		in := &dynamodb.QueryInput{
			TableName: aws.String(s.table), IndexName: aws.String(ix.name),
			KeyConditionExpression:    expr.KeyCondition(),
			ExpressionAttributeNames:  expr.Names(),
			ExpressionAttributeValues: expr.Values(),
			ScanIndexForward:          aws.Bool(true),
			Limit:                     aws.Int32(int32(min(limit-len(out), 1000))),
		}
		if cur.PK != "" {
			in.ExclusiveStartKey = map[string]types.AttributeValue{
				topology.AttrPK: &types.AttributeValueMemberS{Value: cur.PK},
				topology.AttrSK: &types.AttributeValueMemberS{Value: cur.SK},
				ix.shardAttr:    number(int64(cur.Shard)),
				ix.msAttr:       number(cur.MS),
			}
		}
		resp, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, "", core.Wrap(CodeUnavailable, true, fmt.Errorf("%s shard %d: %w", ix.name, cur.Shard, err))
		}
		for _, item := range resp.Items {
			k, ok := entryOf(item, ix)
			if !ok {
				return nil, "", core.Wrap(release.CodeRecordInvalid, false, fmt.Errorf("%s shard %d: entry without its keys", ix.name, cur.Shard))
			}
			out = append(out, k)
		}
		if len(resp.LastEvaluatedKey) == 0 {
			cur = cursor{Shard: cur.Shard + 1}
			continue
		}
		k, ok := entryOf(resp.LastEvaluatedKey, ix)
		if !ok {
			return nil, "", core.Wrap(CodeUnavailable, false, fmt.Errorf("%s shard %d: last evaluated key without its keys", ix.name, cur.Shard))
		}
		cur = cursor{Shard: cur.Shard, PK: k.PK, SK: k.SK, MS: k.MS}
	}
	if cur.Shard >= topology.WakeShards {
		return out, "", nil
	}
	next, err := cur.encode()
	if err != nil {
		return nil, "", err
	}
	return out, next, nil
}

func entryOf(item map[string]types.AttributeValue, ix sparseIndex) (indexKey, bool) {
	pk, ok1 := item[topology.AttrPK].(*types.AttributeValueMemberS)
	sk, ok2 := item[topology.AttrSK].(*types.AttributeValueMemberS)
	ms, ok3 := item[ix.msAttr].(*types.AttributeValueMemberN)
	if !ok1 || !ok2 || !ok3 {
		return indexKey{}, false
	}
	n, err := strconv.ParseInt(ms.Value, 10, 64)
	if err != nil {
		return indexKey{}, false
	}
	return indexKey{PK: pk.Value, SK: sk.Value, MS: n}, true
}

func eventOf(pk string) (string, error) {
	eventID, ok := strings.CutPrefix(pk, PKPrefix)
	if !ok || !core.ValidToken(eventID) {
		return "", core.Fail(release.CodeRecordInvalid)
	}
	return eventID, nil
}

var _ release.OutboxFinder = (*Store)(nil)

// Owed implements release.OutboxFinder with the sparse outbox index.
func (s *Store) Owed(ctx context.Context, toMS int64, cursor string, limit int) (release.OwedPage, error) {
	keys, next, err := s.page(ctx, outboxIndex, toMS, cursor, limit)
	if err != nil {
		return release.OwedPage{}, err
	}
	out := release.OwedPage{Next: next}
	for _, k := range keys {
		eventID, err := eventOf(k.PK)
		jobID, ok := strings.CutPrefix(k.SK, release.SKApprovalPrefix)
		if err != nil || !ok {
			return release.OwedPage{}, core.Fail(release.CodeRecordInvalid)
		}
		out.Items = append(out.Items, release.OwedItem{EventID: eventID, JobID: jobID, OutboxMS: k.MS})
	}
	return out, nil
}
