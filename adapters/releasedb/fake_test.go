package releasedb

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/dev/dynamofake"
	"github.com/localeflow/localeflow/topology"
)

// The release store's conformance suites (the ones the *DynamoDB tests run
// on DynamoDB Local) on the in-memory DynamoDB the simulation uses: the
// fake is trusted exactly as far as these suites.

func newFakeStore() (*Store, *dynamofake.DB, string) {
	spec := topology.New("fake").Release
	db := dynamofake.New(spec)
	return New(db, spec.Name), db, spec.Name
}

func TestConformanceOnFake(t *testing.T) {
	releasetest.Run(t, func(t *testing.T) release.Store {
		s, _, _ := newFakeStore()
		return s
	})
}

func TestDueOnFake(t *testing.T) {
	releasetest.RunDue(t, func(t *testing.T) interface {
		release.Store
		release.DueFinder
	} {
		s, _, _ := newFakeStore()
		return s
	})
}

// fakeForeign is foreign (store_test.go) on the fake.
type fakeForeign struct {
	*Store
	db    *dynamofake.DB
	table string
}

func (f fakeForeign) PutForeign(ctx context.Context, rec release.Record, schemaVersion int) error {
	item, err := foreignItem(rec, schemaVersion)
	if err != nil {
		return err
	}
	_, err = f.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(f.table), Item: item})
	return err
}

func (f fakeForeign) Stored(_ context.Context, eventID, sk string) (any, error) {
	item := f.db.Raw(f.table, map[string]types.AttributeValue{
		topology.AttrPK: &types.AttributeValueMemberS{Value: PK(eventID)}, topology.AttrSK: &types.AttributeValueMemberS{Value: sk},
	})
	if item == nil {
		return nil, nil
	}
	return item, nil
}

func TestSchemaOnFake(t *testing.T) {
	releasetest.RunSchema(t, func(t *testing.T) releasetest.Foreign {
		s, db, table := newFakeStore()
		return fakeForeign{Store: s, db: db, table: table}
	})
}

// fakeExpiring reads back the TTL attribute the store wrote to the fake.
type fakeExpiring struct {
	*Store
	db    *dynamofake.DB
	table string
}

func (e fakeExpiring) ExpiresAt(_ context.Context, eventID, sk string) (int64, bool, error) {
	item := e.db.Raw(e.table, map[string]types.AttributeValue{
		topology.AttrPK: &types.AttributeValueMemberS{Value: PK(eventID)}, topology.AttrSK: &types.AttributeValueMemberS{Value: sk},
	})
	if item == nil {
		return 0, false, fmt.Errorf("no item %s %s", eventID, sk)
	}
	n, ok := item[topology.AttrExpiresAt].(*types.AttributeValueMemberN)
	if !ok {
		return 0, false, nil
	}
	var at int64
	_, err := fmt.Sscan(n.Value, &at)
	return at, true, err
}

func TestRetentionOnFake(t *testing.T) {
	releasetest.RunRetention(t, func(t *testing.T, retention time.Duration) releasetest.Expiring {
		s, db, table := newFakeStore()
		return fakeExpiring{Store: s.WithRetention(retention), db: db, table: table}
	})
}
