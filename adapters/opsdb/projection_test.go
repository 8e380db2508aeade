package opsdb_test

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/adapters/opsdb"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/topology"
)

// censusDB lists one delivery key in the wake index and records the
// BatchGetItem requests.
type censusDB struct {
	mu      sync.Mutex
	gets    []types.KeysAndAttributes
	queries []*dynamodb.QueryInput
}

func (d *censusDB) Query(_ context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	d.mu.Lock()
	d.queries = append(d.queries, in)
	d.mu.Unlock()
	out := &dynamodb.QueryOutput{}
	if *in.IndexName == topology.IndexWake && strings.Contains(*in.KeyConditionExpression, "#") {
		for _, v := range in.ExpressionAttributeValues {
			if n, ok := v.(*types.AttributeValueMemberN); ok && n.Value == "0" {
				out.Items = []map[string]types.AttributeValue{{
					topology.AttrPK: &types.AttributeValueMemberS{Value: "event#evt-1"},
					topology.AttrSK: &types.AttributeValueMemberS{Value: release.SKDelivery},
				}}
			}
		}
	}
	return out, nil
}

func (d *censusDB) BatchGetItem(_ context.Context, in *dynamodb.BatchGetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, ka := range in.RequestItems {
		d.gets = append(d.gets, ka)
	}
	return &dynamodb.BatchGetItemOutput{}, nil
}

// TestReleaseCensusProjectsOnlyContentFreeAttributes: the census read whole
// release items (any attribute, texts included, was readable by the health
// role); it now projects onto topology.ReleaseCensusAttributes.
func TestReleaseCensusProjectsOnlyContentFreeAttributes(t *testing.T) {
	db := &censusDB{}
	r, err := opsdb.NewReleaseReader(db, "t-release")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReleaseCensus(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(db.gets) != 1 {
		t.Fatalf("%d BatchGetItem requests, want 1", len(db.gets))
	}
	ka := db.gets[0]
	if ka.ProjectionExpression == nil {
		t.Fatal("BatchGetItem without a projection reads every attribute")
	}
	var got []string
	for _, ref := range strings.Split(*ka.ProjectionExpression, ",") {
		got = append(got, ka.ExpressionAttributeNames[strings.TrimSpace(ref)])
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(topology.ReleaseCensusAttributes))
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("projection %v, want %v", got, want)
	}
}

// TestReleaseCensusIndexQueriesProjectKeys: the census queried the release
// indexes without a projection; each query now reads only the table key
// (pk, sk) with Select SPECIFIC_ATTRIBUTES, as the health role's
// dynamodb:Attributes condition on the indexes requires.
func TestReleaseCensusIndexQueriesProjectKeys(t *testing.T) {
	db := &censusDB{}
	r, err := opsdb.NewReleaseReader(db, "t-release")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReleaseCensus(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(db.queries) != 2*topology.WakeShards {
		t.Fatalf("%d index queries, want %d", len(db.queries), 2*topology.WakeShards)
	}
	for _, q := range db.queries {
		if q.ProjectionExpression == nil || q.Select != types.SelectSpecificAttributes {
			t.Fatalf("query of %s without a projection (select %q)", *q.IndexName, q.Select)
		}
		var got []string
		for _, ref := range strings.Split(*q.ProjectionExpression, ",") {
			got = append(got, q.ExpressionAttributeNames[strings.TrimSpace(ref)])
		}
		slices.Sort(got)
		if want := []string{topology.AttrPK, topology.AttrSK}; !reflect.DeepEqual(got, want) {
			t.Fatalf("query of %s projects %v, want %v", *q.IndexName, got, want)
		}
	}
}

// TestReleaseCensusAttributesCoverEvidenceAndDelivery: every attribute of
// the records the census decodes (every kind the wake and attention indexes
// list) is projected, and no text attribute is.
func TestReleaseCensusAttributesCoverEvidenceAndDelivery(t *testing.T) {
	allowed := map[string]bool{}
	for _, a := range topology.ReleaseCensusAttributes {
		allowed[a] = true
	}
	for _, rec := range []any{release.EvidenceRecord{}, release.DeliveryRecord{}, release.JobRecord{}, release.ApprovalRecord{}, release.BlockedRecord{}} {
		for _, name := range tagNames(reflect.TypeOf(rec)) {
			if name == "token" || name == "body" || name == "sig" {
				// The approval token, and the compact layout's signed
				// body and signature it is rebuilt from: never read by
				// health (docs/design.md "Compact approvals").
				continue
			}
			if !allowed[name] {
				t.Errorf("%T attribute %q is not in the census projection", rec, name)
			}
		}
	}
	for _, rec := range []any{release.SourceRecord{}, release.ResultRecord{}, release.ApprovalRecord{}} {
		for _, name := range tagNames(reflect.TypeOf(rec)) {
			if allowed[name] && (name == "text" || name == "result_json" || name == "token" || name == "sig") {
				t.Errorf("content attribute %q of %T is readable by health", name, rec)
			}
		}
	}
}

func tagNames(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			out = append(out, tagNames(f.Type)...)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("dynamodbav"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}
