package meter

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/adapters/awsclient"
	"github.com/localeflow/localeflow/dev/localtest"
	"github.com/localeflow/localeflow/topology"
)

// TestDynamoDBLocalEmptyReads: what DynamoDB Local reports for reads that
// find nothing, and what the meter counts for them. AWS bills such a read
// its type's minimum (1 unit strongly consistent, 0.5 eventually
// consistent; DynamoDB API reference, Query: "Queries that do not return
// results consume the minimum number of read capacity units for that type
// of read operation"). DynamoDB Local reports 0 for an empty Query: the
// meter counts it at the minimum, once corrected. What Local reports for
// a GetItem of a missing item is logged (and counted at least at the
// minimum too).
func TestDynamoDBLocalEmptyReads(t *testing.T) {
	_, spec := localtest.Table(t, func(topo topology.Topology) topology.Table { return topo.Release })
	m := New()
	c := awsclient.DynamoDB(localtest.Config(t), func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, m.Install) })
	ctx := context.Background()
	table := aws.String(spec.Name)
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: table, Item: map[string]types.AttributeValue{
		topology.AttrPK: s("event#evt-1"), topology.AttrSK: s("plan"), "v": n("1")}}); err != nil {
		t.Fatal(err)
	}
	reported := func(cc *types.ConsumedCapacity) float64 {
		if cc == nil || cc.CapacityUnits == nil {
			return -1
		}
		return *cc.CapacityUnits
	}
	one := func(pk, sk string, consistent bool) *dynamodb.QueryInput {
		return &dynamodb.QueryInput{TableName: table, KeyConditionExpression: aws.String("pk = :pk AND sk = :sk"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": s(pk), ":sk": s(sk)}, ConsistentRead: aws.Bool(consistent)}
	}
	cases := []struct {
		name string
		read func() (float64, error)
		// want is what the meter counts; corrected whether it corrected.
		want      float64
		corrected bool
		// local is what DynamoDB Local reports (-1: not asserted).
		local float64
	}{
		{"empty Query, strongly consistent", func() (float64, error) {
			out, err := c.Query(ctx, one("event#evt-1", "job#none", true))
			return reported(out.ConsumedCapacity), err
		}, 1, true, 0},
		{"empty Query, eventually consistent", func() (float64, error) {
			out, err := c.Query(ctx, one("event#evt-1", "job#none", false))
			return reported(out.ConsumedCapacity), err
		}, 0.5, true, 0},
		{"empty index Query", func() (float64, error) {
			out, err := c.Query(ctx, &dynamodb.QueryInput{TableName: table, IndexName: aws.String(topology.IndexWake),
				KeyConditionExpression:    aws.String("wake_shard = :s AND wake_ms <= :t"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":s": n("0"), ":t": n("1")}})
			return reported(out.ConsumedCapacity), err
		}, 0.5, true, 0},
		{"Query of one small item, strongly consistent", func() (float64, error) {
			out, err := c.Query(ctx, one("event#evt-1", "plan", true))
			return reported(out.ConsumedCapacity), err
		}, 1, false, 1},
	}
	for _, tc := range cases {
		m.Reset()
		got, err := tc.read()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		snap := m.Snapshot()
		t.Logf("%s: DynamoDB Local reports %v, the meter counts %v (%d corrected)", tc.name, got, snap.ReadUnits, snap.MinimumCorrections)
		if tc.local >= 0 && got != tc.local {
			t.Errorf("%s: DynamoDB Local reports %v, want %v", tc.name, got, tc.local)
		}
		if snap.ReadUnits != tc.want || (snap.MinimumCorrections == 1) != tc.corrected {
			t.Errorf("%s: meter counts %v (%d corrected), want %v (corrected %v)", tc.name, snap.ReadUnits, snap.MinimumCorrections, tc.want, tc.corrected)
		}
	}
	// GetItem of a missing item: whatever Local reports, the meter counts
	// at least the minimum.
	for _, consistent := range []bool{true, false} {
		m.Reset()
		out, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: table, ConsistentRead: aws.Bool(consistent),
			Key: map[string]types.AttributeValue{topology.AttrPK: s("event#evt-1"), topology.AttrSK: s("job#none")}})
		if err != nil {
			t.Fatal(err)
		}
		snap := m.Snapshot()
		least := 0.5
		if consistent {
			least = 1
		}
		t.Logf("GetItem of a missing item (consistent %v): DynamoDB Local reports %v, the meter counts %v (%d corrected)",
			consistent, reported(out.ConsumedCapacity), snap.ReadUnits, snap.MinimumCorrections)
		if snap.ReadUnits < least || snap.ReadUnits != max(least, reported(out.ConsumedCapacity)) {
			t.Errorf("GetItem (consistent %v): meter counts %v", consistent, snap.ReadUnits)
		}
	}
}
