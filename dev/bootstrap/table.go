package bootstrap

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/topology"
)

// activePoll is how often a table's status is re-read while it is being
// created; DynamoDB Local and LocalStack answer ACTIVE at once, AWS takes
// seconds.
const activePoll = 250 * time.Millisecond

// CreateTableInput builds the CreateTable request of t: on-demand billing,
// every key attribute defined once, each index projecting only keys.
func CreateTableInput(t topology.Table) *dynamodb.CreateTableInput {
	var defs []types.AttributeDefinition
	seen := map[string]bool{}
	define := func(k topology.Key) {
		if seen[k.Name] {
			return
		}
		seen[k.Name] = true
		defs = append(defs, types.AttributeDefinition{
			AttributeName: aws.String(k.Name),
			AttributeType: types.ScalarAttributeType(k.Type),
		})
	}
	define(t.Partition)
	schema := []types.KeySchemaElement{{AttributeName: aws.String(t.Partition.Name), KeyType: types.KeyTypeHash}}
	if t.Sort != nil {
		define(*t.Sort)
		schema = append(schema, types.KeySchemaElement{AttributeName: aws.String(t.Sort.Name), KeyType: types.KeyTypeRange})
	}
	var gsis []types.GlobalSecondaryIndex
	for _, ix := range t.Indexes {
		define(ix.Partition)
		define(ix.Sort)
		projection := types.ProjectionTypeAll
		if ix.KeysOnly {
			projection = types.ProjectionTypeKeysOnly
		}
		gsis = append(gsis, types.GlobalSecondaryIndex{
			IndexName: aws.String(ix.Name),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(ix.Partition.Name), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(ix.Sort.Name), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: projection},
		})
	}
	return &dynamodb.CreateTableInput{
		TableName:              aws.String(t.Name),
		AttributeDefinitions:   defs,
		KeySchema:              schema,
		GlobalSecondaryIndexes: gsis,
		BillingMode:            types.BillingModePayPerRequest,
	}
}

// ApplyTable creates table t as topology defines it (or checks an existing
// one against the definition), waits until it is active and sets its TTL.
func ApplyTable(ctx context.Context, db DynamoDBAPI, t topology.Table) error {
	_, err := db.CreateTable(ctx, CreateTableInput(t))
	if err != nil && !hasCode(err, "ResourceInUseException") {
		return fmt.Errorf("bootstrap: create table %s: %w", t.Name, err)
	}
	desc, err := waitTableActive(ctx, db, t.Name)
	if err != nil {
		return err
	}
	if err := checkTable(desc, t); err != nil {
		return err
	}
	if t.TTLAttribute != "" {
		return applyTTL(ctx, db, t)
	}
	return nil
}

// waitTableActive polls until the table and all its indexes are ACTIVE or
// ctx ends.
func waitTableActive(ctx context.Context, db DynamoDBAPI, name string) (*types.TableDescription, error) {
	for {
		out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		if err != nil {
			return nil, fmt.Errorf("bootstrap: describe table %s: %w", name, err)
		}
		if tableActive(out.Table) {
			return out.Table, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("bootstrap: table %s not active: %w", name, ctx.Err())
		case <-time.After(activePoll):
		}
	}
}

func tableActive(d *types.TableDescription) bool {
	if d == nil || d.TableStatus != types.TableStatusActive {
		return false
	}
	for _, g := range d.GlobalSecondaryIndexes {
		if g.IndexStatus != "" && g.IndexStatus != types.IndexStatusActive {
			return false
		}
	}
	return true
}

// checkTable refuses an existing table whose keys or indexes differ from
// the topology: using it would make local behaviour drift from AWS.
func checkTable(d *types.TableDescription, t topology.Table) error {
	want := CreateTableInput(t)
	if !sameKeys(d.KeySchema, want.KeySchema) {
		return fmt.Errorf("bootstrap: table %s exists with a different key schema", t.Name)
	}
	defined := map[string]types.ScalarAttributeType{}
	for _, a := range d.AttributeDefinitions {
		defined[aws.ToString(a.AttributeName)] = a.AttributeType
	}
	for _, a := range want.AttributeDefinitions {
		if defined[aws.ToString(a.AttributeName)] != a.AttributeType {
			return fmt.Errorf("bootstrap: table %s: attribute %s has a different type", t.Name, aws.ToString(a.AttributeName))
		}
	}
	if len(d.GlobalSecondaryIndexes) != len(want.GlobalSecondaryIndexes) {
		return fmt.Errorf("bootstrap: table %s has %d indexes, want %d", t.Name, len(d.GlobalSecondaryIndexes), len(want.GlobalSecondaryIndexes))
	}
	for _, w := range want.GlobalSecondaryIndexes {
		if !hasIndex(d.GlobalSecondaryIndexes, w) {
			return fmt.Errorf("bootstrap: table %s: index %s missing or different", t.Name, aws.ToString(w.IndexName))
		}
	}
	return nil
}

func hasIndex(have []types.GlobalSecondaryIndexDescription, w types.GlobalSecondaryIndex) bool {
	for _, g := range have {
		if aws.ToString(g.IndexName) != aws.ToString(w.IndexName) {
			continue
		}
		return sameKeys(g.KeySchema, w.KeySchema) &&
			g.Projection != nil && g.Projection.ProjectionType == w.Projection.ProjectionType
	}
	return false
}

func sameKeys(a, b []types.KeySchemaElement) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if aws.ToString(a[i].AttributeName) != aws.ToString(b[i].AttributeName) || a[i].KeyType != b[i].KeyType {
			return false
		}
	}
	return true
}

func applyTTL(ctx context.Context, db DynamoDBAPI, t topology.Table) error {
	out, err := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(t.Name)})
	if err != nil {
		return fmt.Errorf("bootstrap: describe TTL of %s: %w", t.Name, err)
	}
	if d := out.TimeToLiveDescription; d != nil && aws.ToString(d.AttributeName) == t.TTLAttribute &&
		(d.TimeToLiveStatus == types.TimeToLiveStatusEnabled || d.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
		return nil
	}
	_, err = db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(t.Name),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(t.TTLAttribute),
			Enabled:       aws.Bool(true),
		},
	})
	if err != nil {
		return fmt.Errorf("bootstrap: enable TTL %s on %s: %w", t.TTLAttribute, t.Name, err)
	}
	return nil
}

// DestroyTable deletes a table; a missing table is not an error.
func DestroyTable(ctx context.Context, db DynamoDBAPI, name string) error {
	_, err := db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	if err != nil && !hasCode(err, "ResourceNotFoundException") {
		return fmt.Errorf("bootstrap: delete table %s: %w", name, err)
	}
	return nil
}
