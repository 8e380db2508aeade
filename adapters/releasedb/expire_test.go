package releasedb

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/topology"
)

// TestExpireTextsSetsTheTTLAttribute: the release table's TTL attribute was
// declared but never set, so texts stayed forever; ExpireTexts sets it on
// the event's source and result records and on nothing else (not on a
// text item of another schema_version, left as it is).
func TestExpireTextsSetsTheTTLAttribute(t *testing.T) {
	db, table := newTable(t)
	s := New(db, table)
	ctx := context.Background()
	recs := []release.Record{
		&release.SourceRecord{EventID: "evt-ttl", JobID: "job-1", SourceSHA256: "a", Text: "Preise", Version: 1},
		&release.ResultRecord{EventID: "evt-ttl", PlanID: "plan-1", JobID: "job-1", ResultSHA256: "b", ResultJSON: "{}", Version: 1},
		&release.JobRecord{EventID: "evt-ttl", PlanID: "plan-1", JobID: "job-1", Status: "succeeded", PayloadSHA256: "c", Version: 1},
		&release.SourceRecord{EventID: "evt-other", JobID: "job-1", SourceSHA256: "a", Text: "Preise", Version: 1},
	}
	for _, r := range recs {
		if err := s.Put(ctx, r, 0); err != nil {
			t.Fatal(err)
		}
	}
	v2 := &release.SourceRecord{EventID: "evt-ttl", JobID: "job-2", SourceSHA256: "a", Text: "Preise", Version: 1}
	if err := (foreign{Store: s, db: db, table: table}).PutForeign(ctx, v2, 2); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 8, 1, 0, 0, 0, time.UTC)
	if err := (TextExpirer{DB: db, Table: table}).ExpireTexts(ctx, "evt-ttl", at); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"event#evt-ttl/source#job-1": strconv.FormatInt(at.Unix(), 10), "event#evt-ttl/result#job-1": strconv.FormatInt(at.Unix(), 10),
		"event#evt-ttl/job#job-1": "", "event#evt-other/source#job-1": "", "event#evt-ttl/source#job-2": "",
	}
	out, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Items) != len(want) {
		t.Fatalf("%d items", len(out.Items))
	}
	for _, item := range out.Items {
		key := item[topology.AttrPK].(*types.AttributeValueMemberS).Value + "/" + item[topology.AttrSK].(*types.AttributeValueMemberS).Value
		got := ""
		if n, ok := item[topology.AttrExpiresAt].(*types.AttributeValueMemberN); ok {
			got = n.Value
		}
		if got != want[key] {
			t.Errorf("%s: %s = %q, want %q", key, topology.AttrExpiresAt, got, want[key])
		}
		if key == "event#evt-ttl/source#job-2" {
			continue // of schema version 2: never decodes
		}
		if _, err := Decode(item); err != nil {
			t.Errorf("%s no longer decodes: %v", key, err)
		}
	}
	// Idempotent.
	if err := (TextExpirer{DB: db, Table: table}).ExpireTexts(ctx, "evt-ttl", at); err != nil {
		t.Fatal(err)
	}
}
