package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/adapters/releasedb"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/dev/localtest"
	"github.com/localeflow/localeflow/topology"
)

// TestAckOfFailedJobExpiresTexts (issue 25, finding 4): a release whose
// job failed and which the operator acknowledges is never delivered or
// blocked, so its texts never expired while its content-free records
// (acknowledged) did after 90 days. The acknowledgement ends the release:
// its texts expire LOCALEFLOW_TEXT_RETENTION later.
func TestAckOfFailedJobExpiresTexts(t *testing.T) {
	localtest.Require(t)
	topo := localtest.Topology(t)
	db := localtest.DynamoDB(t)
	ctx := context.Background()
	rel := releasedb.New(db, topo.Release.Name)
	const ev = "evt-ack-texts"
	sha := strings.Repeat("a", 64)
	for _, rec := range []release.Record{
		&release.JobRecord{EventID: ev, PlanID: "plan-1", JobID: "job-1", Status: release.JobFailed, ErrorCode: "mt.failed",
			PayloadSHA256: sha, ReceivedMS: base, Version: 1},
		&release.SourceRecord{EventID: ev, JobID: "job-1", SourceSHA256: sha, Text: "Hallo", Version: 1},
	} {
		if err := rel.Put(ctx, rec, 0); err != nil {
			t.Fatal(err)
		}
	}
	expiry := func() (int64, bool) {
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(topo.Release.Name), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{
				topology.AttrPK: &types.AttributeValueMemberS{Value: releasedb.PK(ev)},
				topology.AttrSK: &types.AttributeValueMemberS{Value: release.SKSourcePrefix + "job-1"},
			}})
		if err != nil || out.Item == nil {
			t.Fatalf("source text: %v", err)
		}
		n, ok := out.Item[topology.AttrExpiresAt].(*types.AttributeValueMemberN)
		if !ok {
			return 0, false
		}
		v, _ := strconv.ParseInt(n.Value, 10, 64)
		return v, true
	}
	if _, ok := expiry(); ok {
		t.Fatal("texts expire before the release ends")
	}
	env := map[string]string{"LOCALEFLOW_TEXT_RETENTION": "48h"}
	before := time.Now()
	if r := runCLI(env, "--prefix="+topo.Prefix, "ack", ev, "--release", "--reason", "job will not run again (TICKET-9)"); r.code != exitOK {
		t.Fatalf("ack: %+v", r)
	}
	at, ok := expiry()
	if !ok || at < before.Add(48*time.Hour).Unix() || at > time.Now().Add(48*time.Hour).Unix()+1 {
		t.Fatalf("texts expire at %d (set %v), want 48h after the acknowledgement", at, ok)
	}
}
