package releasedb

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/topology"
)

// CodeUnavailable is the retryable code of any DynamoDB failure other than
// a refused condition.
const CodeUnavailable = "release.store.unavailable"

// PKPrefix prefixes the event id in the partition key.
const PKPrefix = "event#"

const attrVersion = "v"

// DynamoDBAPI is the part of *dynamodb.Client the store uses.
type DynamoDBAPI interface {
	PutItem(ctx context.Context, params *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	Query(ctx context.Context, params *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	TransactWriteItems(ctx context.Context, params *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

var (
	_ DynamoDBAPI   = (*dynamodb.Client)(nil)
	_ release.Store = (*Store)(nil)
)

// Store keeps release records in one DynamoDB table.
type Store struct {
	db        DynamoDBAPI
	table     string
	retention time.Duration
}

// New returns a store on table whose content-free records expire after
// release.DefaultRetention (see WithRetention).
func New(db DynamoDBAPI, table string) *Store {
	return &Store{db: db, table: table, retention: release.DefaultRetention}
}

// WithRetention returns the store writing expires_at (the table's TTL
// attribute) = release.ExpiresAt(record, d) on every record it writes;
// d ≤ 0 writes none.
func (s *Store) WithRetention(d time.Duration) *Store {
	c := *s
	c.retention = d
	return &c
}

// Shard is the wake and attention index partition of the record
// keyed eventID and sk: core.Shard keyed by both.
func Shard(eventID, sk string) int { return core.Shard(topology.WakeShards, eventID, sk) }

// PK is the partition key of an event's collection.
func PK(eventID string) string { return PKPrefix + eventID }

// Item is the DynamoDB item of rec, index keys and schema_version
// (release.SchemaVersion) included.
func Item(rec release.Record) (map[string]types.AttributeValue, error) {
	eventID, sk := rec.Key()
	form, err := release.StoredForm(rec)
	if err != nil {
		return nil, err
	}
	item, err := attributevalue.MarshalMap(form)
	if err != nil {
		return nil, fmt.Errorf("releasedb: marshal %s: %w", sk, err)
	}
	item[topology.AttrPK] = &types.AttributeValueMemberS{Value: PK(eventID)}
	item[topology.AttrSK] = &types.AttributeValueMemberS{Value: sk}
	item[release.AttrSchemaVersion] = number(release.SchemaVersion)
	shard := Shard(eventID, sk)
	wakeMS, wakes, attentionMS, attention := release.Wake(rec)
	if wakes {
		item[topology.AttrWakeShard] = number(int64(shard))
		item[topology.AttrWakeMS] = number(wakeMS)
	}
	if attention {
		item[topology.AttrAttentionShard] = number(int64(shard))
		item[topology.AttrAttentionMS] = number(attentionMS)
	}
	return item, nil
}

func number(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: fmt.Sprint(n)}
}

// conditionalPut is the item and condition of one versioned write. The item
// carries expires_at when the record needs nothing more
// (release.ExpiresAt): a later write recomputes it, so a record that wakes
// or needs attention again loses it. The condition on an existing record
// also requires its schema_version to be release.SchemaVersion: an item of
// another format is never overwritten (the write is a conflict).
func (s *Store) conditionalPut(rec release.Record, prev int64) (map[string]types.AttributeValue, expression.Expression, error) {
	eventID, _ := rec.Key()
	if !core.ValidToken(eventID) || rec.RecordVersion() != prev+1 {
		return nil, expression.Expression{}, core.Fail(release.CodeRecordInvalid)
	}
	item, err := Item(rec)
	if core.CodeOf(err) != "" {
		return nil, expression.Expression{}, err
	}
	if err != nil {
		return nil, expression.Expression{}, core.Wrap(release.CodeRecordInvalid, false, err)
	}
	if at, ok := release.ExpiresAt(rec, s.retention); ok {
		item[topology.AttrExpiresAt] = number(at)
	}
	cond := expression.AttributeNotExists(expression.Name(topology.AttrPK))
	if prev != 0 {
		cond = expression.Name(attrVersion).Equal(expression.Value(prev)).
			And(expression.Name(release.AttrSchemaVersion).Equal(expression.Value(release.SchemaVersion)))
	}
	expr, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return nil, expression.Expression{}, core.Wrap(release.CodeRecordInvalid, false, err)
	}
	return item, expr, nil
}

// Put implements release.Store.
func (s *Store) Put(ctx context.Context, rec release.Record, prev int64) error {
	eventID, sk := rec.Key()
	item, expr, err := s.conditionalPut(rec, prev)
	if err != nil {
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(s.table),
		Item:                      item,
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	})
	if err != nil {
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			return core.Wrap(release.CodeStoreConflict, true, fmt.Errorf("put %s %s: %w", eventID, sk, err))
		}
		return core.Wrap(CodeUnavailable, true, fmt.Errorf("put %s %s: %w", eventID, sk, err))
	}
	return nil
}

// PutAll implements release.Store with one TransactWriteItems of
// conditional Puts: a refused condition cancels the whole transaction and
// becomes release.ErrConflict. A transaction conflicting with another
// in-flight transaction on the same items is retryable unavailability.
func (s *Store) PutAll(ctx context.Context, writes ...release.Write) error {
	if err := release.ValidWrites(writes); err != nil {
		return err
	}
	items := make([]types.TransactWriteItem, 0, len(writes))
	for _, w := range writes {
		item, expr, err := s.conditionalPut(w.Rec, w.Prev)
		if err != nil {
			return err
		}
		items = append(items, types.TransactWriteItem{Put: &types.Put{
			TableName:                 aws.String(s.table),
			Item:                      item,
			ConditionExpression:       expr.Condition(),
			ExpressionAttributeNames:  expr.Names(),
			ExpressionAttributeValues: expr.Values(),
		}})
	}
	eventID, _ := writes[0].Rec.Key()
	_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err == nil {
		return nil
	}
	var canceled *types.TransactionCanceledException
	if errors.As(err, &canceled) {
		for _, r := range canceled.CancellationReasons {
			if aws.ToString(r.Code) == "ConditionalCheckFailed" {
				return core.Wrap(release.CodeStoreConflict, true, fmt.Errorf("put %d records of %s: %w", len(writes), eventID, err))
			}
		}
	}
	return core.Wrap(CodeUnavailable, true, fmt.Errorf("put %d records of %s: %w", len(writes), eventID, err))
}

// Load implements release.Store with one consistent Query of the event's
// collection.
func (s *Store) Load(ctx context.Context, eventID string) (release.Snapshot, error) {
	return s.query(ctx, eventID, expression.Key(topology.AttrPK).Equal(expression.Value(PK(eventID))))
}

// LoadState implements release.Store with one consistent Query of the
// collection's sort keys below "result#": every record but the texts
// (source# and result# sort after every other kind).
func (s *Store) LoadState(ctx context.Context, eventID string) (release.Snapshot, error) {
	return s.query(ctx, eventID, expression.Key(topology.AttrPK).Equal(expression.Value(PK(eventID))).
		And(expression.Key(topology.AttrSK).LessThan(expression.Value(release.SKResultPrefix))))
}

// LoadPrefix implements release.Store with one consistent Query of the
// collection's sort keys that begin with prefix.
func (s *Store) LoadPrefix(ctx context.Context, eventID, prefix string) (release.Snapshot, error) {
	if prefix == "" {
		return release.Snapshot{}, core.Fail(release.CodeRecordInvalid)
	}
	return s.query(ctx, eventID, expression.Key(topology.AttrPK).Equal(expression.Value(PK(eventID))).
		And(expression.Key(topology.AttrSK).BeginsWith(prefix)))
}

// LoadKeys implements release.Store with one consistent Query per key
// (pk = :pk AND sk = :sk; billed as a GetItem of that item would be, and
// the coordinator's role allows Query, not GetItem, on the table).
func (s *Store) LoadKeys(ctx context.Context, eventID string, sortKeys ...string) (release.Snapshot, error) {
	if !core.ValidToken(eventID) {
		return release.Snapshot{}, core.Fail(release.CodeEventIDInvalid)
	}
	if len(sortKeys) > release.MaxLoadKeys {
		return release.Snapshot{}, core.Fail(release.CodeRecordInvalid)
	}
	snap := release.NewSnapshot()
	for _, sk := range sortKeys {
		if release.NewRecord(sk) == nil {
			return release.Snapshot{}, core.Fail(release.CodeRecordInvalid)
		}
		one, err := s.query(ctx, eventID, expression.Key(topology.AttrPK).Equal(expression.Value(PK(eventID))).
			And(expression.Key(topology.AttrSK).Equal(expression.Value(sk))))
		if err != nil {
			return release.Snapshot{}, err
		}
		one.Each(snap.Add)
	}
	return snap, nil
}

func (s *Store) query(ctx context.Context, eventID string, key expression.KeyConditionBuilder) (release.Snapshot, error) {
	if !core.ValidToken(eventID) {
		return release.Snapshot{}, core.Fail(release.CodeEventIDInvalid)
	}
	expr, err := expression.NewBuilder().WithKeyCondition(key).Build()
	if err != nil {
		return release.Snapshot{}, core.Wrap(CodeUnavailable, false, err)
	}
	snap := release.NewSnapshot()
	input := &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    expr.KeyCondition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ConsistentRead:            aws.Bool(true),
	}
	for pages := dynamodb.NewQueryPaginator(s.db, input); pages.HasMorePages(); {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return release.Snapshot{}, core.Wrap(CodeUnavailable, true, fmt.Errorf("query %s: %w", eventID, err))
		}
		for _, item := range out.Items {
			rec, err := Decode(item)
			if err != nil {
				return release.Snapshot{}, err
			}
			snap.Add(rec)
		}
	}
	return snap, nil
}

// Decode returns the record an item of the release table holds (the kind
// is chosen by its sort key), checking that the keys match the record and
// completing it as the store's reads do (release.OpenStored: an approval
// of either layout comes back with its token and ids).
func Decode(item map[string]types.AttributeValue) (release.Record, error) {
	rec, err := DecodeProjected(item)
	if err != nil {
		return nil, err
	}
	eventID, _ := rec.Key()
	if err := release.OpenStored(rec, eventID); err != nil {
		return nil, err
	}
	return rec, nil
}

// DecodeProjected is Decode of an item read through a projection that
// leaves out the approval's body and signature (the health census,
// topology.ReleaseCensusAttributes): the schema version and the keys are
// checked, an approval is not completed (its token and payload ids stay
// empty).
func DecodeProjected(item map[string]types.AttributeValue) (release.Record, error) {
	skAttr, ok := item[topology.AttrSK].(*types.AttributeValueMemberS)
	if !ok {
		return nil, core.Fail(release.CodeRecordInvalid)
	}
	if err := CheckSchema(item); err != nil {
		return nil, err
	}
	rec := release.NewRecord(skAttr.Value)
	if rec == nil {
		return nil, core.Fail(release.CodeRecordInvalid)
	}
	if err := attributevalue.UnmarshalMap(item, rec); err != nil {
		return nil, core.Wrap(release.CodeRecordInvalid, false, fmt.Errorf("decode %s: %w", skAttr.Value, err))
	}
	if eventID, sk := rec.Key(); sk != skAttr.Value || itemPK(item) != PK(eventID) {
		return nil, core.Fail(release.CodeRecordInvalid)
	}
	return rec, nil
}

// CheckSchema refuses an item whose schema_version is missing or not
// release.SchemaVersion (release.CodeSchemaUnsupported).
func CheckSchema(item map[string]types.AttributeValue) error {
	n, ok := item[release.AttrSchemaVersion].(*types.AttributeValueMemberN)
	if !ok || n.Value != strconv.Itoa(release.SchemaVersion) {
		return core.Fail(release.CodeSchemaUnsupported)
	}
	return nil
}

func itemPK(item map[string]types.AttributeValue) string {
	if s, ok := item[topology.AttrPK].(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}
