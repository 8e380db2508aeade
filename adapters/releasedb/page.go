package releasedb

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/topology"
)

// CodeCursorInvalid refuses a page cursor this store did not make.
const CodeCursorInvalid = release.CodeStoreCursorInvalid

// sparseIndex names a sharded sparse index and its key attributes.
type sparseIndex struct{ name, shardAttr, msAttr string }

var wakeIndex = sparseIndex{topology.IndexWake, topology.AttrWakeShard, topology.AttrWakeMS}

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
//
// The first read of every shard from the cursor's on (the cursor's shard
// resuming at its key, the later ones from their start) is issued at once,
// in parallel, before the results are taken in shard order: an empty or
// small sweep waits for one round trip instead of one per shard. Entries
// and cursors are exactly those of reading shard after shard: a read made
// with a larger Limit than the sequential read would have had is cut to
// that Limit, and the cursor is then its last entry, which is the
// LastEvaluatedKey DynamoDB returns when a Query stops at its Limit. A
// shard read ahead but not reached because the page filled is discarded
// (at most WakeShards-1 extra Queries per full page).
func (s *Store) page(ctx context.Context, ix sparseIndex, toMS int64, encoded string, limit int) ([]indexKey, string, error) {
	if limit <= 0 {
		return nil, "", core.Fail(release.CodeStorePageInvalid)
	}
	cur, err := decodeCursor(encoded)
	if err != nil {
		return nil, "", err
	}
	ahead := s.readAhead(ctx, ix, toMS, cur, min(limit, 1000))
	var out []indexKey
	for cur.Shard < topology.WakeShards && len(out) < limit {
		want := min(limit-len(out), 1000)
		r, ok := ahead[cur.Shard]
		if ok && r.from == cur {
			delete(ahead, cur.Shard)
		} else {
			r = s.readShard(ctx, ix, toMS, cur, want)
		}
		if r.err != nil {
			return nil, "", r.err
		}
		keys, last, more := r.keys, r.last, r.more
		if len(keys) >= want {
			keys, last, more = keys[:want], keys[want-1], true
		}
		out = append(out, keys...)
		if !more {
			cur = cursor{Shard: cur.Shard + 1}
			continue
		}
		cur = cursor{Shard: cur.Shard, PK: last.PK, SK: last.SK, MS: last.MS}
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

// shardRead is one Query of one shard of a sparse index: the entries, and
// the LastEvaluatedKey when there is one (more).
type shardRead struct {
	from cursor
	keys []indexKey
	last indexKey
	more bool
	err  error
}

// readAhead issues the first read of every shard from cur's on in
// parallel (at most WakeShards Queries in flight) and waits for all.
func (s *Store) readAhead(ctx context.Context, ix sparseIndex, toMS int64, cur cursor, limit int) map[int]shardRead {
	reads := make([]shardRead, topology.WakeShards)
	var wg sync.WaitGroup
	for shard := cur.Shard; shard < topology.WakeShards; shard++ {
		from := cursor{Shard: shard}
		if shard == cur.Shard {
			from = cur
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			reads[shard] = s.readShard(ctx, ix, toMS, from, limit)
		}()
	}
	wg.Wait()
	out := make(map[int]shardRead, topology.WakeShards-cur.Shard)
	for shard := cur.Shard; shard < topology.WakeShards; shard++ {
		out[shard] = reads[shard]
	}
	return out
}

// readShard is one Query of shard from.Shard of ix, starting after from's
// key when it has one. It is one page by hand, not the SDK's paginator:
// the position between pages is the sweep's cursor (encoded in the page
// token the caller keeps), and the shards' pages are read ahead in
// parallel and cut to the sequential read's Limit.
func (s *Store) readShard(ctx context.Context, ix sparseIndex, toMS int64, from cursor, limit int) shardRead {
	r := shardRead{from: from}
	expr, err := expression.NewBuilder().WithKeyCondition(
		expression.Key(ix.shardAttr).Equal(expression.Value(from.Shard)).
			And(expression.Key(ix.msAttr).LessThanEqual(expression.Value(toMS))),
	).Build()
	if err != nil {
		r.err = core.Wrap(CodeUnavailable, false, err)
		return r
	}
	in := &dynamodb.QueryInput{
		TableName: aws.String(s.table), IndexName: aws.String(ix.name),
		KeyConditionExpression:    expr.KeyCondition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ScanIndexForward:          aws.Bool(true),
		Limit:                     aws.Int32(int32(limit)),
	}
	if from.PK != "" {
		in.ExclusiveStartKey = map[string]types.AttributeValue{
			topology.AttrPK: &types.AttributeValueMemberS{Value: from.PK},
			topology.AttrSK: &types.AttributeValueMemberS{Value: from.SK},
			ix.shardAttr:    number(int64(from.Shard)),
			ix.msAttr:       number(from.MS),
		}
	}
	resp, err := s.db.Query(ctx, in)
	if err != nil {
		r.err = core.Wrap(CodeUnavailable, true, fmt.Errorf("%s shard %d: %w", ix.name, from.Shard, err))
		return r
	}
	for _, item := range resp.Items {
		k, ok := entryOf(item, ix)
		if !ok {
			r.err = core.Wrap(release.CodeRecordInvalid, false, fmt.Errorf("%s shard %d: entry without its keys", ix.name, from.Shard))
			return r
		}
		r.keys = append(r.keys, k)
	}
	if len(resp.LastEvaluatedKey) == 0 {
		return r
	}
	k, ok := entryOf(resp.LastEvaluatedKey, ix)
	if !ok {
		r.err = core.Wrap(CodeUnavailable, false, fmt.Errorf("%s shard %d: last evaluated key without its keys", ix.name, from.Shard))
		return r
	}
	r.last, r.more = k, true
	return r
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
