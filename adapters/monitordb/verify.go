package monitordb

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/topology"
)

// DynamoDBDescribeAPI is the part of *dynamodb.Client Verify uses.
type DynamoDBDescribeAPI interface {
	DescribeTable(ctx context.Context, params *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

var _ DynamoDBDescribeAPI = (*dynamodb.Client)(nil)

// Verify checks, once at cold start (the poller's, before it handles
// anything), that the table is the one the store was written for: key
// schema and every sparse KEYS_ONLY index (wake, attention, outbox) as in
// topology.Monitor (else lifecycle_monitor.schema_altered), and the table
// and its indexes ACTIVE (else lifecycle_monitor.database_integrity: an
// index still backfilling would silently hide due items).
func Verify(ctx context.Context, db DynamoDBDescribeAPI, want topology.Table) error {
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(want.Name)})
	if err != nil {
		return unavailable("verify", err)
	}
	d := out.Table
	if d == nil || len(d.KeySchema) != 1 || aws.ToString(d.KeySchema[0].AttributeName) != want.Partition.Name ||
		d.KeySchema[0].KeyType != types.KeyTypeHash {
		return core.Wrap(monitor.CodeSchemaAltered, false, fmt.Errorf("monitordb: table %s key schema differs", want.Name))
	}
	for _, ix := range want.Indexes {
		g, ok := findIndex(d.GlobalSecondaryIndexes, ix.Name)
		if !ok || len(g.KeySchema) != 2 ||
			aws.ToString(g.KeySchema[0].AttributeName) != ix.Partition.Name || g.KeySchema[0].KeyType != types.KeyTypeHash ||
			aws.ToString(g.KeySchema[1].AttributeName) != ix.Sort.Name || g.KeySchema[1].KeyType != types.KeyTypeRange ||
			g.Projection == nil || g.Projection.ProjectionType != types.ProjectionTypeKeysOnly {
			return core.Wrap(monitor.CodeSchemaAltered, false, fmt.Errorf("monitordb: table %s index %s missing or different", want.Name, ix.Name))
		}
		if g.IndexStatus != "" && g.IndexStatus != types.IndexStatusActive {
			return core.Wrap(monitor.CodeDatabaseIntegrity, true, fmt.Errorf("monitordb: index %s is %s", ix.Name, g.IndexStatus))
		}
	}
	if d.TableStatus != types.TableStatusActive && d.TableStatus != types.TableStatusUpdating {
		return core.Wrap(monitor.CodeDatabaseIntegrity, true, fmt.Errorf("monitordb: table %s is %s", want.Name, d.TableStatus))
	}
	return nil
}

func findIndex(have []types.GlobalSecondaryIndexDescription, name string) (types.GlobalSecondaryIndexDescription, bool) {
	for _, g := range have {
		if aws.ToString(g.IndexName) == name {
			return g, true
		}
	}
	return types.GlobalSecondaryIndexDescription{}, false
}
