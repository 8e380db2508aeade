package monitordb

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/internal/localtest"
	"github.com/localeflow/localeflow/topology"
)

// newTable creates a fresh monitor table (only the table: these tests need
// no queues) named from topology.New(unique prefix).Monitor, and deletes
// it when t ends. It returns the client and the table name.
func newTable(t testing.TB) (*dynamodb.Client, string) {
	t.Helper()
	localtest.Require(t)
	db := localtest.DynamoDB(t)
	table := topology.New(localtest.UniquePrefix(t)).Monitor
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := db.CreateTable(ctx, createTableInput(table)); err != nil {
		t.Fatalf("create table %s: %v", table.Name, err)
	}
	t.Cleanup(func() {
		if _, err := db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table.Name)}); err != nil {
			t.Errorf("delete table %s: %v", table.Name, err)
		}
	})
	return db, table.Name
}

// createTableInput mirrors the topology definition (bootstrap does the same
// for whole stacks).
func createTableInput(t topology.Table) *dynamodb.CreateTableInput {
	defs := []types.AttributeDefinition{{AttributeName: aws.String(t.Partition.Name), AttributeType: types.ScalarAttributeType(t.Partition.Type)}}
	seen := map[string]bool{t.Partition.Name: true}
	var gsis []types.GlobalSecondaryIndex
	for _, ix := range t.Indexes {
		for _, k := range []topology.Key{ix.Partition, ix.Sort} {
			if !seen[k.Name] {
				seen[k.Name] = true
				defs = append(defs, types.AttributeDefinition{AttributeName: aws.String(k.Name), AttributeType: types.ScalarAttributeType(k.Type)})
			}
		}
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
		KeySchema:              []types.KeySchemaElement{{AttributeName: aws.String(t.Partition.Name), KeyType: types.KeyTypeHash}},
		GlobalSecondaryIndexes: gsis,
		BillingMode:            types.BillingModePayPerRequest,
	}
}
