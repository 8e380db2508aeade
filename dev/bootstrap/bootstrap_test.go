package bootstrap

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/topology"
)

func TestCreateTableInput(t *testing.T) {
	topo := topology.New("unit")
	tests := []struct {
		name        string
		table       topology.Table
		wantKeys    []string
		wantAttrs   map[string]types.ScalarAttributeType
		wantIndexes int
	}{
		{
			name:     "monitor: hash key only",
			table:    topo.Monitor,
			wantKeys: []string{"event_id/HASH"},
			wantAttrs: map[string]types.ScalarAttributeType{
				"event_id": "S", "wake_shard": "N", "wake_ms": "N", "attention_shard": "N", "attention_ms": "N",
			},
			wantIndexes: 2, // wake, attention (owed outcomes stay in the wake index)
		},
		{
			name:     "release: hash and range key",
			table:    topo.Release,
			wantKeys: []string{"pk/HASH", "sk/RANGE"},
			wantAttrs: map[string]types.ScalarAttributeType{
				"pk": "S", "sk": "S", "wake_shard": "N", "wake_ms": "N", "attention_shard": "N", "attention_ms": "N",
			},
			wantIndexes: 2, // wake, attention
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := CreateTableInput(tt.table)
			if in.BillingMode != types.BillingModePayPerRequest {
				t.Errorf("billing mode %q, want PAY_PER_REQUEST", in.BillingMode)
			}
			var keys []string
			for _, k := range in.KeySchema {
				keys = append(keys, aws.ToString(k.AttributeName)+"/"+string(k.KeyType))
			}
			if strings.Join(keys, ",") != strings.Join(tt.wantKeys, ",") {
				t.Errorf("key schema %v, want %v", keys, tt.wantKeys)
			}
			// Every attribute is defined exactly once, even though both
			// indexes and nothing else share names.
			got := map[string]types.ScalarAttributeType{}
			for _, a := range in.AttributeDefinitions {
				name := aws.ToString(a.AttributeName)
				if _, dup := got[name]; dup {
					t.Errorf("attribute %s defined twice", name)
				}
				got[name] = a.AttributeType
			}
			if len(got) != len(tt.wantAttrs) {
				t.Errorf("attributes %v, want %v", got, tt.wantAttrs)
			}
			for name, typ := range tt.wantAttrs {
				if got[name] != typ {
					t.Errorf("attribute %s type %q, want %q", name, got[name], typ)
				}
			}
			if len(in.GlobalSecondaryIndexes) != len(tt.table.Indexes) || len(tt.table.Indexes) < 2 {
				t.Fatalf("%d indexes, want %d", len(in.GlobalSecondaryIndexes), len(tt.table.Indexes))
			}
			for _, g := range in.GlobalSecondaryIndexes {
				if g.Projection.ProjectionType != types.ProjectionTypeKeysOnly {
					t.Errorf("index %s projection %q, want KEYS_ONLY", aws.ToString(g.IndexName), g.Projection.ProjectionType)
				}
			}
		})
	}
}

func TestCheckTableRefusesDrift(t *testing.T) {
	spec := topology.New("unit").Release
	in := CreateTableInput(spec)
	matching := func() *types.TableDescription {
		d := &types.TableDescription{KeySchema: in.KeySchema, AttributeDefinitions: in.AttributeDefinitions}
		for _, g := range in.GlobalSecondaryIndexes {
			d.GlobalSecondaryIndexes = append(d.GlobalSecondaryIndexes, types.GlobalSecondaryIndexDescription{
				IndexName: g.IndexName, KeySchema: g.KeySchema, Projection: g.Projection,
			})
		}
		return d
	}
	tests := []struct {
		name    string
		mutate  func(*types.TableDescription)
		wantErr string
	}{
		{"identical", func(*types.TableDescription) {}, ""},
		{"no sort key", func(d *types.TableDescription) { d.KeySchema = d.KeySchema[:1] }, "key schema"},
		{"index missing", func(d *types.TableDescription) { d.GlobalSecondaryIndexes = d.GlobalSecondaryIndexes[:1] }, "indexes"},
		{"index projects all", func(d *types.TableDescription) {
			d.GlobalSecondaryIndexes[0].Projection = &types.Projection{ProjectionType: types.ProjectionTypeAll}
		}, "index wake"},
		{"attribute type", func(d *types.TableDescription) {
			defs := append([]types.AttributeDefinition(nil), d.AttributeDefinitions...)
			for i := range defs {
				if aws.ToString(defs[i].AttributeName) == "wake_ms" {
					defs[i].AttributeType = types.ScalarAttributeTypeS
				}
			}
			d.AttributeDefinitions = defs
		}, "wake_ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := matching()
			tt.mutate(d)
			err := checkTable(d, spec)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error %v, want one mentioning %q", err, tt.wantErr)
			}
		})
	}
}

func TestRedrivePolicy(t *testing.T) {
	got, err := redrivePolicy("arn:aws:sqs:us-east-1:000000000000:x-dlq", 5)
	if err != nil {
		t.Fatal(err)
	}
	var decoded map[string]any
	if err := json.Unmarshal([]byte(got), &decoded); err != nil {
		t.Fatalf("policy %q is not JSON: %v", got, err)
	}
	if decoded["deadLetterTargetArn"] != "arn:aws:sqs:us-east-1:000000000000:x-dlq" || decoded["maxReceiveCount"] != float64(5) {
		t.Fatalf("policy %s", got)
	}
}

func TestApplyRejectsBadInput(t *testing.T) {
	good := topology.New("unit")
	bad := good
	bad.Prefix = "Bad Prefix"
	tests := []struct {
		name    string
		clients Clients
		topo    topology.Topology
	}{
		{"missing clients", Clients{}, good},
		{"invalid prefix", Clients{DynamoDB: nilDynamo{}, SQS: nilSQS{}, EventBridge: nilEventBridge{}}, bad},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Apply(context.Background(), tt.clients, tt.topo); err == nil {
				t.Fatal("Apply accepted bad input")
			}
		})
	}
	if err := Destroy(context.Background(), Clients{}, good); err == nil {
		t.Fatal("Destroy accepted missing clients")
	}
}

// The nil* types satisfy the client interfaces without implementing
// anything: Apply must refuse bad input before calling any of them.
type (
	nilDynamo      struct{ DynamoDBAPI }
	nilSQS         struct{ SQSAPI }
	nilEventBridge struct{ EventBridgeAPI }
)
