package releasedb

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/dev/localtest"
	"github.com/localeflow/localeflow/topology"
)

// newTable creates a fresh release table as topology defines it and
// deletes it when t ends.
func newTable(t testing.TB) (*dynamodb.Client, string) {
	t.Helper()
	db, spec := localtest.Table(t, func(topo topology.Topology) topology.Table { return topo.Release })
	return db, spec.Name
}

func TestConformanceDynamoDB(t *testing.T) {
	localtest.Require(t)
	releasetest.Run(t, func(t *testing.T) release.Store {
		db, table := newTable(t)
		return New(db, table)
	})
}

// countingDB counts Query calls.
type countingDB struct {
	DynamoDBAPI
	queries int
}

func (c *countingDB) Query(ctx context.Context, in *dynamodb.QueryInput, opt ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	c.queries++
	return c.DynamoDBAPI.Query(ctx, in, opt...)
}

func TestLoadIsOneQuery(t *testing.T) {
	db, table := newTable(t)
	counting := &countingDB{DynamoDBAPI: db}
	s := New(counting, table)
	ctx := context.Background()
	for _, r := range releasetest.SampleRecords("evt-q") {
		if err := s.Put(ctx, r, 0); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := s.Load(ctx, "evt-q")
	if err != nil {
		t.Fatal(err)
	}
	if counting.queries != 1 || snap.Plan == nil || snap.Delivery == nil || len(snap.Evidence) != 3 {
		t.Fatalf("%d queries, snapshot %+v", counting.queries, snap)
	}
}

// TestSparseIndexes checks that only records that can wake sit in the wake
// index, only failed ones in the attention index, and that a record leaves
// the index in the write that ends its waiting.
func TestSparseIndexes(t *testing.T) {
	db, table := newTable(t)
	s := New(db, table)
	ctx := context.Background()
	for _, r := range releasetest.SampleRecords("evt-ix") {
		if err := s.Put(ctx, r, 0); err != nil {
			t.Fatal(err)
		}
	}
	// SampleRecords: one leased, one failed and one parked evidence
	// record, one retry_wait delivery, a never-claimed job, a failed job
	// (attention: its release waits on upstream), the approval that
	// completed the plan, a blocked marker.
	leased := "evidence#blun-l10n-evidence-" + strings.Repeat("e", 64)
	waitIndex(t, db, table, topology.IndexWake, []string{"delivery", leased, "job#job-1", "approval#job-1"})
	waitIndex(t, db, table, topology.IndexAttention, []string{"evidence#req-failed", "job#job-2", "blocked"})
	snap, err := s.Load(ctx, "evt-ix")
	if err != nil {
		t.Fatal(err)
	}
	d := *snap.Delivery
	d.Status, d.LastErrorCode, d.Version = release.StateSucceeded, "", d.Version+1
	if err := s.Put(ctx, &d, d.Version-1); err != nil {
		t.Fatal(err)
	}
	waitIndex(t, db, table, topology.IndexWake, []string{leased, "job#job-1", "approval#job-1"})
}

func waitIndex(t *testing.T, db *dynamodb.Client, table, index string, want []string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got []string
		for shard := 0; shard < topology.WakeShards; shard++ {
			name := topology.AttrWakeShard
			switch index {
			case topology.IndexAttention:
				name = topology.AttrAttentionShard
			}
			out, err := db.Query(context.Background(), &dynamodb.QueryInput{
				TableName:                 aws.String(table),
				IndexName:                 aws.String(index),
				KeyConditionExpression:    aws.String("#s = :s"),
				ExpressionAttributeNames:  map[string]string{"#s": name},
				ExpressionAttributeValues: map[string]types.AttributeValue{":s": &types.AttributeValueMemberN{Value: fmt.Sprint(shard)}},
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range out.Items {
				got = append(got, it[topology.AttrSK].(*types.AttributeValueMemberS).Value)
			}
		}
		if sameSet(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("index %s holds %v, want %v", index, got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]int{}
	for _, s := range a {
		m[s]++
	}
	for _, s := range b {
		m[s]--
	}
	for _, n := range m {
		if n != 0 {
			return false
		}
	}
	return true
}

// TestLargestResultFits stores a result at the size limit the parser
// allows: DynamoDB must accept it.
func TestLargestResultFits(t *testing.T) {
	db, table := newTable(t)
	s := New(db, table)
	rec := &release.ResultRecord{EventID: "evt-big", PlanID: "plan-" + strings.Repeat("p", 200), JobID: "job-" + strings.Repeat("j", 250),
		ResultSHA256: strings.Repeat("a", 64), ResultJSON: strings.Repeat("x", release.MaxTextBytes), Version: 1}
	if err := s.Put(context.Background(), rec, 0); err != nil {
		t.Fatalf("largest allowed result refused: %v", err)
	}
}

func TestDueDynamoDB(t *testing.T) {
	localtest.Require(t)
	releasetest.RunDue(t, func(t *testing.T) interface {
		release.Store
		release.DueFinder
	} {
		db, table := newTable(t)
		return New(db, table)
	})
}

// foreign puts and reads items of another storage format
// (releasetest.Foreign) on DynamoDB.
type foreign struct {
	*Store
	db    *dynamodb.Client
	table string
}

// foreignItem is rec's item as a store of another storage format would
// write it: schema_version set to schemaVersion (0: the attribute left
// out).
func foreignItem(rec release.Record, schemaVersion int) (map[string]types.AttributeValue, error) {
	item, err := Item(rec)
	if err != nil {
		return nil, err
	}
	delete(item, release.AttrSchemaVersion)
	if schemaVersion != 0 {
		item[release.AttrSchemaVersion] = number(int64(schemaVersion))
	}
	return item, nil
}

func (f foreign) PutForeign(ctx context.Context, rec release.Record, schemaVersion int) error {
	item, err := foreignItem(rec, schemaVersion)
	if err != nil {
		return err
	}
	_, err = f.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(f.table), Item: item})
	return err
}

func (f foreign) Stored(ctx context.Context, eventID, sk string) (any, error) {
	out, err := f.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(f.table), ConsistentRead: aws.Bool(true), Key: map[string]types.AttributeValue{
		topology.AttrPK: &types.AttributeValueMemberS{Value: PK(eventID)}, topology.AttrSK: &types.AttributeValueMemberS{Value: sk},
	}})
	if err != nil || out.Item == nil {
		return nil, err
	}
	return out.Item, nil
}

// An item of another schema_version, or without one, is refused by every
// read and left unmodified by every write, on DynamoDB Local.
func TestSchemaDynamoDB(t *testing.T) {
	localtest.Require(t)
	releasetest.RunSchema(t, func(t *testing.T) releasetest.Foreign {
		db, table := newTable(t)
		return foreign{Store: New(db, table), db: db, table: table}
	})
}

// expiring reads back the TTL attribute the store wrote.
type expiring struct {
	*Store
	db    *dynamodb.Client
	table string
}

func (e expiring) ExpiresAt(ctx context.Context, eventID, sk string) (int64, bool, error) {
	out, err := e.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(e.table), ConsistentRead: aws.Bool(true), Key: map[string]types.AttributeValue{
		topology.AttrPK: &types.AttributeValueMemberS{Value: PK(eventID)}, topology.AttrSK: &types.AttributeValueMemberS{Value: sk},
	}})
	if err != nil {
		return 0, false, err
	}
	if len(out.Item) == 0 {
		return 0, false, fmt.Errorf("no item %s %s", eventID, sk)
	}
	n, ok := out.Item[topology.AttrExpiresAt].(*types.AttributeValueMemberN)
	if !ok {
		return 0, false, nil
	}
	var at int64
	_, err = fmt.Sscan(n.Value, &at)
	return at, true, err
}

func TestRetentionDynamoDB(t *testing.T) {
	localtest.Require(t)
	releasetest.RunRetention(t, func(t *testing.T, retention time.Duration) releasetest.Expiring {
		db, table := newTable(t)
		return expiring{Store: New(db, table).WithRetention(retention), db: db, table: table}
	})
}

// Malformed approval rows on DynamoDB Local (written around the store,
// as a bad write or a tampering would leave them): every read of the
// release fails with release.CodeStoredApprovalInvalid, none panics; the
// well-formed compact row reads with its token.
func TestMalformedApprovalRowsDynamoDB(t *testing.T) {
	db, table := newTable(t)
	s := New(db, table)
	ctx := context.Background()
	put := func(item map[string]types.AttributeValue) {
		t.Helper()
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	put(compactItem(t, "evt-1"))
	snap, err := s.LoadState(ctx, "evt-1")
	if a := snap.Approvals["job-2"]; err != nil || a == nil || a.Token != release.BuildToken([]byte(a.Body), a.Sig) {
		t.Fatalf("good row: %+v %v", snap.Approvals, err)
	}
	for name, alter := range malformedApprovals {
		it := compactItem(t, "evt-1")
		alter(it)
		put(it)
		for read, load := range map[string]func() (release.Snapshot, error){
			"Load":       func() (release.Snapshot, error) { return s.Load(ctx, "evt-1") },
			"LoadState":  func() (release.Snapshot, error) { return s.LoadState(ctx, "evt-1") },
			"LoadKeys":   func() (release.Snapshot, error) { return s.LoadKeys(ctx, "evt-1", release.SKApprovalPrefix+"job-2") },
			"LoadPrefix": func() (release.Snapshot, error) { return s.LoadPrefix(ctx, "evt-1", release.SKApprovalPrefix) },
		} {
			if _, err := load(); !core.HasCode(err, release.CodeStoredApprovalInvalid) {
				t.Errorf("%s, %s: %v, want %s", name, read, err, release.CodeStoredApprovalInvalid)
			}
		}
	}
}

// textExpiring is the store with the text expiry the coordinator's
// handler uses.
type textExpiring struct {
	*Store
	TextExpirer
}

func TestTextExpiryDynamoDB(t *testing.T) {
	localtest.Require(t)
	releasetest.RunTextExpiry(t, func(t *testing.T) releasetest.TextExpiring {
		db, table := newTable(t)
		return textExpiring{Store: New(db, table), TextExpirer: TextExpirer{DB: db, Table: table}}
	})
}
