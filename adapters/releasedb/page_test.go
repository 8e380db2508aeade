package releasedb

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/topology"
)

// indexEntry is one entry of a sparse index held by indexDB.
type indexEntry struct {
	shard  int
	ms     int64
	pk, sk string
}

// indexDB answers Queries of the sparse indexes from memory as DynamoDB
// does: entries of one shard with ms ≤ the bound in (ms, table key) order,
// after ExclusiveStartKey, at most Limit of them, with a LastEvaluatedKey
// whenever the Query stopped at its Limit (even if nothing follows) or at
// cut entries (standing in for the 1 MB page limit). It counts Queries and
// the most in flight at once; with gate > 0 a Query waits (up to 2 s) until
// gate Queries are in flight.
type indexDB struct {
	DynamoDBAPI
	entries map[string][]indexEntry
	cut     int
	gate    int32

	queries, inFlight, maxInFlight atomic.Int32
	mu                             sync.Mutex
	arrived                        chan struct{}
}

var keyCond = regexp.MustCompile(`^\((#\d+) = (:\d+)\) AND \((#\d+) <= (:\d+)\)$`)

func attrNumber(av types.AttributeValue) int64 {
	n, _ := strconv.ParseInt(av.(*types.AttributeValueMemberN).Value, 10, 64)
	return n
}

func (d *indexDB) Query(ctx context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	d.queries.Add(1)
	now := d.inFlight.Add(1)
	defer d.inFlight.Add(-1)
	for {
		m := d.maxInFlight.Load()
		if now <= m || d.maxInFlight.CompareAndSwap(m, now) {
			break
		}
	}
	if d.gate > 0 {
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
			case <-time.After(2 * time.Second):
			}
		}
	}
	m := keyCond.FindStringSubmatch(aws.ToString(in.KeyConditionExpression))
	if m == nil {
		return nil, fmt.Errorf("indexDB: key condition %q", aws.ToString(in.KeyConditionExpression))
	}
	ix := sparseIndex{name: aws.ToString(in.IndexName), shardAttr: in.ExpressionAttributeNames[m[1]], msAttr: in.ExpressionAttributeNames[m[3]]}
	shard, toMS := int(attrNumber(in.ExpressionAttributeValues[m[2]])), attrNumber(in.ExpressionAttributeValues[m[4]])
	var after *indexEntry
	if in.ExclusiveStartKey != nil {
		k, ok := entryOf(in.ExclusiveStartKey, ix)
		if !ok || int(attrNumber(in.ExclusiveStartKey[ix.shardAttr])) != shard {
			return nil, fmt.Errorf("indexDB: bad ExclusiveStartKey %v", in.ExclusiveStartKey)
		}
		after = &indexEntry{shard: shard, ms: k.MS, pk: k.PK, sk: k.SK}
	}
	limit := int(aws.ToInt32(in.Limit))
	out := &dynamodb.QueryOutput{}
	for _, e := range d.entries[ix.name] {
		if e.shard != shard || e.ms > toMS || (after != nil && !entryLess(*after, e)) {
			continue
		}
		out.Items = append(out.Items, map[string]types.AttributeValue{
			topology.AttrPK: &types.AttributeValueMemberS{Value: e.pk},
			topology.AttrSK: &types.AttributeValueMemberS{Value: e.sk},
			ix.shardAttr:    number(int64(e.shard)),
			ix.msAttr:       number(e.ms),
		})
		if len(out.Items) == limit || (d.cut > 0 && len(out.Items) == d.cut) {
			out.LastEvaluatedKey = out.Items[len(out.Items)-1]
			break
		}
	}
	return out, nil
}

func entryLess(a, b indexEntry) bool {
	if a.ms != b.ms {
		return a.ms < b.ms
	}
	if a.pk != b.pk {
		return a.pk < b.pk
	}
	return a.sk < b.sk
}

// randomIndex fills the wake index with n entries,
// spread over the shards with the given weights (a zero weight leaves a
// shard empty), some of them after the time bound 1,000.
func randomIndex(r *rand.Rand, n int, weights []int) map[string][]indexEntry {
	total := 0
	for _, w := range weights {
		total += w
	}
	out := map[string][]indexEntry{}
	for _, ix := range []sparseIndex{wakeIndex} {
		var es []indexEntry
		for i := range n {
			pick, shard := r.IntN(total), 0
			for pick >= weights[shard] {
				pick -= weights[shard]
				shard++
			}
			sk := "delivery"
			if r.IntN(2) == 0 {
				sk = fmt.Sprintf("%sjob-%d", "approval#", i)
			}
			es = append(es, indexEntry{shard: shard, ms: int64(r.IntN(1100)), pk: fmt.Sprintf("%sevt-%04d", PKPrefix, r.IntN(n)), sk: sk})
		}
		sort.Slice(es, func(i, j int) bool { return entryLess(es[i], es[j]) })
		out[ix.name] = es
	}
	return out
}

// sequentialPage is how page read the index before its shards were read
// in parallel: one Query after the other, shard after shard. It is the
// reference the parallel reads must match exactly.
func sequentialPage(ctx context.Context, s *Store, ix sparseIndex, toMS int64, encoded string, limit int) ([]indexKey, string, error) {
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
			return nil, "", err
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
			return nil, "", err
		}
		for _, item := range resp.Items {
			k, _ := entryOf(item, ix)
			out = append(out, k)
		}
		if len(resp.LastEvaluatedKey) == 0 {
			cur = cursor{Shard: cur.Shard + 1}
			continue
		}
		k, _ := entryOf(resp.LastEvaluatedKey, ix)
		cur = cursor{Shard: cur.Shard, PK: k.PK, SK: k.SK, MS: k.MS}
	}
	if cur.Shard >= topology.WakeShards {
		return out, "", nil
	}
	next, err := cur.encode()
	return out, next, err
}

// pageAll pages through ix with read and returns every page and cursor.
func pageAll(t *testing.T, read func(cursor string) ([]indexKey, string, error)) []string {
	t.Helper()
	var pages []string
	cursor := ""
	for range 10_000 {
		keys, next, err := read(cursor)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, fmt.Sprintf("%v -> %q", keys, next))
		if next == "" {
			return pages
		}
		cursor = next
	}
	t.Fatal("paging does not end")
	return nil
}

// TestParallelShardReadsPageLikeSequentialReads: the pages (entries, in
// order) and cursors of the parallel shard reads are exactly those of
// reading shard after shard, for page sizes from 1 to above the 1,000 a
// Query returns, with empty shards, one crowded shard, and responses cut
// short as by the 1 MB limit.
func TestParallelShardReadsPageLikeSequentialReads(t *testing.T) {
	ctx := context.Background()
	shapes := []struct {
		name    string
		n       int
		weights []int
	}{
		{"even", 60, []int{1, 1, 1, 1, 1, 1, 1, 1}},
		{"gaps", 60, []int{0, 3, 0, 0, 1, 0, 5, 0}},
		{"last-only", 30, []int{0, 0, 0, 0, 0, 0, 0, 1}},
		{"empty", 0, []int{1, 1, 1, 1, 1, 1, 1, 1}},
		{"crowded", 2600, []int{0, 1, 0, 20, 0, 0, 1, 0}},
	}
	for seed, shape := range shapes {
		for _, cut := range []int{0, 4} {
			db := &indexDB{entries: randomIndex(rand.New(rand.NewPCG(uint64(seed), 17)), shape.n, shape.weights), cut: cut}
			s := New(db, "release")
			for _, limit := range []int{1, 2, 3, 7, 13, 500, 1000, 1500, 5000} {
				if (shape.n < 1000 && limit > 1000) || (shape.n >= 1000 && limit < 500) {
					continue // nothing new to see, or thousands of pages
				}
				for _, ix := range []sparseIndex{wakeIndex} {
					want := pageAll(t, func(c string) ([]indexKey, string, error) { return sequentialPage(ctx, s, ix, 1000, c, limit) })
					got := pageAll(t, func(c string) ([]indexKey, string, error) { return s.page(ctx, ix, 1000, c, limit) })
					if len(got) != len(want) {
						t.Fatalf("%s cut %d limit %d %s: %d pages, sequential reads give %d", shape.name, cut, limit, ix.name, len(got), len(want))
					}
					for i := range want {
						if got[i] != want[i] {
							t.Fatalf("%s cut %d limit %d %s page %d:\n got %s\nwant %s", shape.name, cut, limit, ix.name, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}

// TestEmptySweepReadsItsShardsConcurrently: a sweep over empty indexes
// issues its 8 wake-index Queries concurrently, not one after another
// (the coordinator's cold start waited for 8 + 8 round trips), and still
// exactly one Query per shard.
func TestEmptySweepReadsItsShardsConcurrently(t *testing.T) {
	db := &indexDB{entries: map[string][]indexEntry{}, gate: topology.WakeShards, arrived: make(chan struct{})}
	s := New(db, "release")
	start := time.Now()
	page, err := s.Due(context.Background(), 1000, "", 500)
	if err != nil || len(page.Items) != 0 || page.Next != "" {
		t.Fatalf("due = %+v, %v", page, err)
	}
	if got := db.maxInFlight.Load(); got != topology.WakeShards {
		t.Fatalf("at most %d shard Queries in flight at once, want %d", got, topology.WakeShards)
	}
	if got := db.queries.Load(); got != topology.WakeShards {
		t.Fatalf("%d Queries for an empty index, want %d", got, topology.WakeShards)
	}
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Fatalf("the empty sweep took %v: its Queries waited for each other", elapsed)
	}
}

// TestParallelReadErrorsComeInShardOrder: a failing shard read is reported
// as reading shard after shard would report it (the first failing shard
// reached), and a failure in a shard the page never reaches is not.
func TestParallelReadErrorsComeInShardOrder(t *testing.T) {
	ctx := context.Background()
	entries := map[string][]indexEntry{wakeIndex.name: {
		{shard: 0, ms: 1, pk: PKPrefix + "evt-a", sk: "delivery"},
		{shard: 0, ms: 2, pk: PKPrefix + "evt-b", sk: "delivery"},
	}}
	fail := &failingShardDB{indexDB: &indexDB{entries: entries}, failShards: map[int]bool{3: true, 5: true}}
	s := New(fail, "release")
	keys, next, err := s.page(ctx, wakeIndex, 1000, "", 2)
	if err != nil || len(keys) != 2 || next == "" {
		t.Fatalf("page that fills in shard 0 = %v %q %v; a failure in an unread shard must not count", keys, next, err)
	}
	_, _, err = s.page(ctx, wakeIndex, 1000, "", 10)
	if err == nil || !core.HasCode(err, CodeUnavailable) || !regexp.MustCompile(`shard 3:`).MatchString(err.Error()) {
		t.Fatalf("error %v, want %s from shard 3", err, CodeUnavailable)
	}
}

type failingShardDB struct {
	*indexDB
	failShards map[int]bool
}

func (d *failingShardDB) Query(ctx context.Context, in *dynamodb.QueryInput, opt ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	for _, v := range in.ExpressionAttributeValues {
		if n, ok := v.(*types.AttributeValueMemberN); ok {
			if shard, err := strconv.Atoi(n.Value); err == nil && shard < topology.WakeShards && d.failShards[shard] {
				return nil, fmt.Errorf("shard %d unavailable", shard)
			}
		}
	}
	return d.indexDB.Query(ctx, in, opt...)
}

// TestParallelShardReadsOnDynamoDB: on DynamoDB Local the parallel reads
// page the wake index exactly as sequential reads do (DynamoDB returns a
// LastEvaluatedKey when a Query stops at its Limit, which the cut reads
// rely on).
func TestParallelShardReadsOnDynamoDB(t *testing.T) {
	db, table := newTable(t)
	s := New(db, table)
	ctx := context.Background()
	const ms = 1_764_460_800_000
	for i := range 40 {
		e := releasetest.SampleEvidence(fmt.Sprintf("evt-par-%02d", i), "req-1")
		e.NextAttemptMS = ms + int64(i%7)*10
		if err := s.Put(ctx, e, 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, limit := range []int{1, 3, 5, 40, 500} {
		var got, want []string
		for range 50 {
			entries := 0
			want = pageAll(t, func(c string) ([]indexKey, string, error) {
				keys, next, err := sequentialPage(ctx, s, wakeIndex, ms+1000, c, limit)
				entries += len(keys)
				return keys, next, err
			})
			got = pageAll(t, func(c string) ([]indexKey, string, error) { return s.page(ctx, wakeIndex, ms+1000, c, limit) })
			if fmt.Sprint(got) == fmt.Sprint(want) && entries == 40 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("limit %d:\n got %v\nwant %v", limit, got, want)
		}
	}
}

// BenchmarkEmptySweepListing is what the coordinator's scheduled sweep
// reads when nothing is due: the wake index, 8 shards, on DynamoDB
// Local. It reports the wall time of one listing
// with the store's page (each index's shards read at once, parallel-ms)
// and with shard-after-shard reads as before (sequential-ms); the two
// alternate in every iteration, after 10 uncounted warm-up rounds, so
// both see the same machine load.
func BenchmarkEmptySweepListing(b *testing.B) {
	db, table := newTable(b)
	s := New(db, table)
	ctx := context.Background()
	listing := func(page func(ix sparseIndex) ([]indexKey, string, error)) time.Duration {
		start := time.Now()
		for _, ix := range []sparseIndex{wakeIndex} {
			if keys, next, err := page(ix); err != nil || len(keys) != 0 || next != "" {
				b.Fatalf("listing: %d keys, %q, %v", len(keys), next, err)
			}
		}
		return time.Since(start)
	}
	parallel := func(ix sparseIndex) ([]indexKey, string, error) { return s.page(ctx, ix, 1000, "", 500) }
	sequential := func(ix sparseIndex) ([]indexKey, string, error) { return sequentialPage(ctx, s, ix, 1000, "", 500) }
	for range 10 {
		listing(parallel)
		listing(sequential)
	}
	var par, seq time.Duration
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			par += listing(parallel)
			seq += listing(sequential)
		} else {
			seq += listing(sequential)
			par += listing(parallel)
		}
	}
	b.ReportMetric(float64(par.Microseconds())/1000/float64(b.N), "parallel-ms")
	b.ReportMetric(float64(seq.Microseconds())/1000/float64(b.N), "sequential-ms")
}
