package monitordb

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/dev/bootstrap"
	"github.com/localeflow/localeflow/dev/localtest"
	"github.com/localeflow/localeflow/topology"
)

func TestVerify(t *testing.T) {
	ctx := context.Background()
	db, name := newTable(t)
	want := topology.New(localtest.UniquePrefix(t)).Monitor
	want.Name = name
	if err := Verify(ctx, db, want); err != nil {
		t.Fatalf("Verify of the topology's table: %v", err)
	}
	// A table lacking the attention index was made for another schema.
	other := want
	other.Name = want.Name + "-other"
	other.Indexes = want.Indexes[:1]
	if _, err := db.CreateTable(ctx, bootstrap.CreateTableInput(other)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(other.Name)}); err != nil {
			t.Errorf("delete %s: %v", other.Name, err)
		}
	})
	want.Name = other.Name
	if err := Verify(ctx, db, want); !core.HasCode(err, monitor.CodeSchemaAltered) {
		t.Fatalf("Verify of a table without the attention index = %v", err)
	}
	want.Name = "no-such-table"
	if err := Verify(ctx, db, want); !core.HasCode(err, monitor.CodeStoreUnavailable) {
		t.Fatalf("Verify of a missing table = %v", err)
	}
}

// fakeDescribe answers DescribeTable with a fixed description.
type fakeDescribe struct{ d *types.TableDescription }

func (f fakeDescribe) DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return &dynamodb.DescribeTableOutput{Table: f.d}, nil
}

func TestVerifyBackfillingIndex(t *testing.T) {
	want := topology.New("unit").Monitor
	in := bootstrap.CreateTableInput(want)
	d := &types.TableDescription{TableStatus: types.TableStatusActive, KeySchema: in.KeySchema}
	for _, g := range in.GlobalSecondaryIndexes {
		d.GlobalSecondaryIndexes = append(d.GlobalSecondaryIndexes, types.GlobalSecondaryIndexDescription{
			IndexName: g.IndexName, KeySchema: g.KeySchema, Projection: g.Projection, IndexStatus: types.IndexStatusActive})
	}
	if err := Verify(context.Background(), fakeDescribe{d}, want); err != nil {
		t.Fatalf("Verify = %v", err)
	}
	d.GlobalSecondaryIndexes[0].IndexStatus = types.IndexStatusCreating
	if err := Verify(context.Background(), fakeDescribe{d}, want); !core.HasCode(err, monitor.CodeDatabaseIntegrity) {
		t.Fatalf("Verify with a backfilling index = %v", err)
	}
	d.GlobalSecondaryIndexes[0].IndexStatus = types.IndexStatusActive
	d.GlobalSecondaryIndexes[1].Projection = &types.Projection{ProjectionType: types.ProjectionTypeAll}
	if err := Verify(context.Background(), fakeDescribe{d}, want); !core.HasCode(err, monitor.CodeSchemaAltered) {
		t.Fatalf("Verify with an ALL projection = %v", err)
	}
}
