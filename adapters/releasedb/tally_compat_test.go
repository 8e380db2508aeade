package releasedb

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"

	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

// previousPlan is the plan record as the previous coordinator version
// decodes it: without the tallied attribute.
type previousPlan struct {
	Event         release.Event     `dynamodbav:"event"`
	PlanID        string            `dynamodbav:"plan_id"`
	Jobs          []release.PlanJob `dynamodbav:"jobs"`
	PayloadSHA256 string            `dynamodbav:"payload_sha256"`
	ReceivedMS    int64             `dynamodbav:"received_ms"`
	Seal          string            `dynamodbav:"seal"`
	SealKey       string            `dynamodbav:"seal_key,omitempty"`
	Version       int64             `dynamodbav:"v"`
}

// Deploys (docs/design.md "Release reads": the tally): the previous
// version decodes a tallied plan item (the attribute is ignored), and the
// tally's sort key is outside every range it reads by kind: above the
// state's ("result#" and up is left out of LoadState), no text key, no
// prefix of another kind.
func TestPreviousVersionReadsAroundTheTally(t *testing.T) {
	for _, rec := range releasetest.SampleRecords("evt-1") {
		p, ok := rec.(*release.PlanRecord)
		if !ok {
			continue
		}
		if !p.Tallied {
			t.Fatal("the sample plan is not tallied")
		}
		item, err := Item(p)
		if err != nil {
			t.Fatal(err)
		}
		var old previousPlan
		if err := attributevalue.UnmarshalMap(item, &old); err != nil || old.PlanID != p.PlanID || len(old.Jobs) != len(p.Jobs) || old.Seal != p.Seal {
			t.Fatalf("previous version's decode: %+v %v", old, err)
		}
	}
	sk := release.SKTally
	if sk < release.SKResultPrefix || release.IsTextKey(sk) {
		t.Fatalf("tally key %q inside the state's range or a text key", sk)
	}
	for _, prefix := range []string{release.SKJobPrefix, release.SKSourcePrefix, release.SKResultPrefix, release.SKEvidencePrefix,
		release.SKApprovalPrefix, release.SKAckPrefix, release.SKPlan, release.SKDelivery, release.SKBlocked} {
		if len(sk) >= len(prefix) && sk[:len(prefix)] == prefix {
			t.Fatalf("tally key %q starts with %q", sk, prefix)
		}
	}
}
