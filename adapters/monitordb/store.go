package monitordb

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/localeflow/localeflow/adapters/batchget"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/topology"
)

// DynamoDBAPI is the part of *dynamodb.Client the store uses.
type DynamoDBAPI interface {
	GetItem(ctx context.Context, params *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, params *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, params *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Query(ctx context.Context, params *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	BatchGetItem(ctx context.Context, params *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

var (
	_ DynamoDBAPI   = (*dynamodb.Client)(nil)
	_ monitor.Store = (*Store)(nil)
)

// Store is the DynamoDB monitor.Store.
type Store struct {
	db    DynamoDBAPI
	table string
	// capacity, when set, asks DynamoDB for consumed capacity and adds it
	// up (benchmarks).
	capacity *capacityMeter
	// retention, when positive, is how long a finished record that needs
	// no attention is kept: its finishing write sets expires_at (the
	// table's TTL attribute, epoch seconds) to the write's time plus
	// retention. Zero keeps every record.
	retention time.Duration
}

// WithRetention returns s with the retention of finished records (see
// Store.retention); 0 keeps them forever.
func (s *Store) WithRetention(d time.Duration) *Store {
	c := *s
	c.retention = d
	return &c
}

// New returns a store on table (topology.Monitor.Name of the deployment).
func New(db DynamoDBAPI, table string) (*Store, error) {
	if db == nil || table == "" {
		return nil, errors.New("monitordb: New needs a client and a table name")
	}
	return &Store{db: db, table: table}, nil
}

// Shard is the wake and attention index partition of the record of
// eventID: core.Shard keyed by the event id alone.
func Shard(eventID string) int { return core.Shard(topology.WakeShards, eventID) }

// unavailable wraps an SDK failure: retryable, nothing changed — except
// DynamoDB's ValidationException (an item above the size limit, a
// malformed request), which the same request would get again:
// lifecycle_monitor.store_rejected, not retryable.
func unavailable(op string, err error) error {
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "ValidationException" {
		return core.Wrap(monitor.CodeStoreRejected, false, fmt.Errorf("monitordb %s: %w", op, err))
	}
	return core.Wrap(monitor.CodeStoreUnavailable, true, fmt.Errorf("monitordb %s: %w", op, err))
}

func conditionFailed(err error) (*types.ConditionalCheckFailedException, bool) {
	var ccf *types.ConditionalCheckFailedException
	return ccf, errors.As(err, &ccf)
}

func key(eventID string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrEventID: &types.AttributeValueMemberS{Value: eventID}}
}

func build(b expression.Builder) (expression.Expression, error) {
	expr, err := b.Build()
	if err != nil {
		// Expressions are built from constants; failing here is a bug.
		return expression.Expression{}, fmt.Errorf("monitordb: build expression: %w", err)
	}
	return expr, nil
}

// Create implements monitor.Store: the item is written with
// schema_version monitor.SchemaVersion, whatever rec says.
func (s *Store) Create(ctx context.Context, rec monitor.Record) (monitor.Record, bool, error) {
	rec.SchemaVersion = monitor.SchemaVersion
	if rec.State.Final() && !rec.AttentionWorthy() && s.retention > 0 {
		// A change final at registration (superseded, cancelled) is a
		// finished record like any other: it expires after the retention.
		rec.ExpiresAt = ExpiresAt(rec.UpdatedMS, s.retention)
	}
	av, err := encode(rec)
	if err != nil {
		return monitor.Record{}, false, fmt.Errorf("monitordb create %s: encode: %w", rec.EventID, err)
	}
	expr, err := build(expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(attrEventID))))
	if err != nil {
		return monitor.Record{}, false, err
	}
	out, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table), Item: av,
		ConditionExpression:                 expr.Condition(),
		ExpressionAttributeNames:            expr.Names(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ReturnConsumedCapacity:              s.capacity.mode(),
	})
	if ccf, ok := conditionFailed(err); ok {
		if len(ccf.Item) > 0 {
			return decode(ccf.Item), false, nil
		}
		cur, err := s.Get(ctx, rec.EventID)
		return cur, false, err
	}
	if err != nil {
		return monitor.Record{}, false, unavailable("create", err)
	}
	s.capacity.add(out.ConsumedCapacity, true)
	return rec, true, nil
}

// Get implements monitor.Store.
func (s *Store) Get(ctx context.Context, eventID string) (monitor.Record, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: key(eventID), ConsistentRead: aws.Bool(true),
		ReturnConsumedCapacity: s.capacity.mode(),
	})
	if err != nil {
		return monitor.Record{}, unavailable("get", err)
	}
	s.capacity.add(out.ConsumedCapacity, false)
	if len(out.Item) == 0 {
		return monitor.Record{}, core.Fail(monitor.CodeEventMissing)
	}
	return decode(out.Item), nil
}

// Claim implements monitor.Store: one conditional UpdateItem returning
// ALL_NEW (ALL_OLD when the condition fails). It does not touch the wake
// keys (a claimable record's wake_ms is its next_poll_ms, which the claim
// keeps), so the wake index is not written.
func (s *Store) Claim(ctx context.Context, eventID string, l monitor.Lease) (monitor.Record, bool, error) {
	now := expression.Value(l.NowMS)
	cond := expression.And(
		expression.Name(attrSchemaVersion).Equal(expression.Value(monitor.SchemaVersion)),
		expression.Name(attrState).In(
			expression.Value(string(monitor.StatePending)),
			expression.Value(string(monitor.StateWatching)),
			expression.Value(string(monitor.StateRetryWait))),
		expression.Name(attrNextPollMS).LessThanEqual(now),
		expression.Name(attrUpdatedMS).LessThanEqual(now),
	)
	update := expression.Set(expression.Name(attrState), expression.Value(string(monitor.StateLeased))).
		Set(expression.Name(attrPollAttempts), expression.Name(attrPollAttempts).Plus(expression.Value(1))).
		Set(expression.Name(attrLeaseOwner), expression.Value(l.Owner)).
		Set(expression.Name(attrLeaseToken), expression.Value(l.Token)).
		Set(expression.Name(attrLeaseExpiresMS), expression.Value(l.ExpiresMS)).
		Set(expression.Name(attrUpdatedMS), now).
		Remove(expression.Name(attrLastErrorCode))
	return s.conditionalUpdate(ctx, "claim", eventID, cond, update)
}

// Hint implements monitor.Store: one conditional UpdateItem (the condition
// of monitor.Hintable) that sets next_poll_ms, its wake key, hint_ms and
// updated_ms to the hint's time; ALL_NEW, or ALL_OLD when the condition
// fails.
func (s *Store) Hint(ctx context.Context, h monitor.Hint) (monitor.Record, bool, error) {
	now := expression.Value(h.NowMS)
	cond := expression.And(
		expression.Name(attrSchemaVersion).Equal(expression.Value(monitor.SchemaVersion)),
		expression.Name(attrSiteID).Equal(expression.Value(h.SiteID)),
		expression.Name(attrState).Equal(expression.Value(string(monitor.StateWatching))),
		expression.Name(attrNextPollMS).GreaterThan(now),
		expression.Name(attrUpdatedMS).LessThanEqual(now),
		expression.Or(
			expression.AttributeNotExists(expression.Name(attrHintMS)),
			expression.Name(attrHintMS).LessThanEqual(expression.Value(h.NowMS-h.MinGapMS))),
		expression.Or(
			expression.AttributeNotExists(expression.Name(attrWaitUntilMS)),
			expression.Name(attrWaitUntilMS).LessThanEqual(now)),
	)
	update := expression.Set(expression.Name(attrNextPollMS), now).
		Set(expression.Name(attrHintMS), now).
		Set(expression.Name(attrUpdatedMS), now).
		Set(expression.Name(attrWakeShard), expression.Value(Shard(h.EventID))).
		Set(expression.Name(attrWakeMS), now)
	return s.conditionalUpdate(ctx, "hint", h.EventID, cond, update)
}

// conditionalUpdate is one UpdateItem of eventID under cond: the record
// after it (ALL_NEW) and true, or the record as it was (ALL_OLD) and false
// when cond failed; lifecycle_monitor.event_missing when there is none.
func (s *Store) conditionalUpdate(ctx context.Context, op, eventID string, cond expression.ConditionBuilder, update expression.UpdateBuilder) (monitor.Record, bool, error) {
	expr, err := build(expression.NewBuilder().WithCondition(cond).WithUpdate(update))
	if err != nil {
		return monitor.Record{}, false, err
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: key(eventID),
		ConditionExpression:                 expr.Condition(),
		UpdateExpression:                    expr.Update(),
		ExpressionAttributeNames:            expr.Names(),
		ExpressionAttributeValues:           expr.Values(),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ReturnConsumedCapacity:              s.capacity.mode(),
	})
	if ccf, ok := conditionFailed(err); ok {
		if len(ccf.Item) == 0 {
			return monitor.Record{}, false, core.Fail(monitor.CodeEventMissing)
		}
		return decode(ccf.Item), false, nil
	}
	if err != nil {
		return monitor.Record{}, false, unavailable(op, err)
	}
	s.capacity.add(out.ConsumedCapacity, true)
	return decode(out.Attributes), true, nil
}

// Transition implements monitor.Store: one UpdateItem fenced on the whole
// claim.
func (s *Store) Transition(ctx context.Context, f monitor.Fence, u monitor.Update) (monitor.Record, error) {
	update, err := s.transitionUpdate(f.EventID, u)
	if err != nil {
		return monitor.Record{}, err
	}
	expr, err := build(expression.NewBuilder().WithCondition(fenceCondition(f)).WithUpdate(update))
	if err != nil {
		return monitor.Record{}, err
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: key(f.EventID),
		ConditionExpression:                 expr.Condition(),
		UpdateExpression:                    expr.Update(),
		ExpressionAttributeNames:            expr.Names(),
		ExpressionAttributeValues:           expr.Values(),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ReturnConsumedCapacity:              s.capacity.mode(),
	})
	if ccf, ok := conditionFailed(err); ok {
		exists := len(ccf.Item) > 0
		var old monitor.Record
		if exists {
			old = decode(ccf.Item)
			if old.SchemaVersion != monitor.SchemaVersion {
				// Not this code's to change (written by another version).
				return monitor.Record{}, core.Fail(monitor.CodeSchemaAltered)
			}
		}
		if err := monitor.CheckFence(old, exists, f); err != nil {
			return monitor.Record{}, err
		}
		return monitor.Record{}, monitor.LostWrite()
	}
	if err != nil {
		return monitor.Record{}, unavailable("transition", err)
	}
	s.capacity.add(out.ConsumedCapacity, true)
	return decode(out.Attributes), nil
}

// fenceCondition is the whole claim (monitor.Fence) as a write condition,
// on an item of this schema version: a write never applies a failure count
// or limit the stored record does not have.
func fenceCondition(f monitor.Fence) expression.ConditionBuilder {
	now := expression.Value(f.NowMS)
	expiry := expression.Name(attrLeaseExpiresMS).GreaterThan(now)
	if f.Expired {
		expiry = expression.Name(attrLeaseExpiresMS).LessThanEqual(now)
	}
	eq := func(name string, v any) expression.ConditionBuilder {
		return expression.Name(name).Equal(expression.Value(v))
	}
	return expression.And(
		eq(attrSchemaVersion, monitor.SchemaVersion),
		eq(attrState, string(monitor.StateLeased)),
		eq(attrLeaseToken, f.Token),
		eq(attrLeaseOwner, f.Owner),
		expiry,
		expression.Name(attrUpdatedMS).LessThanEqual(now),
		eq(attrLeaseExpiresMS, f.LeaseExpiresMS),
		eq(attrPollAttempts, f.Attempt),
		eq(attrFailures, f.ConsecutiveFailures),
		eq(attrMaxFailures, f.MaxConsecutiveFailures),
		eq(attrSiteID, f.SiteID),
		eq(attrPlanID, f.PlanID),
		eq(attrWebsiteVersion, f.WebsiteVersion),
		eq(attrSourceSequence, f.SourceSequence),
		eq(attrJobCount, f.JobCount),
		eq(attrChangeSHA256, f.ChangeSHA256),
	)
}

// transitionUpdate is the write of u: the new state, the lease released,
// the snapshot when it is set, and every sparse index key derived from the
// new state (set when the record belongs in the index, removed otherwise).
func (s *Store) transitionUpdate(eventID string, u monitor.Update) (expression.UpdateBuilder, error) {
	update := expression.Set(expression.Name(attrState), expression.Value(string(u.State))).
		Set(expression.Name(attrFailures), expression.Value(u.ConsecutiveFailures)).
		Set(expression.Name(attrNextPollMS), expression.Value(u.NextPollMS)).
		Set(expression.Name(attrUpdatedMS), expression.Value(u.UpdatedMS)).
		Remove(expression.Name(attrLeaseOwner)).
		Remove(expression.Name(attrLeaseToken)).
		Remove(expression.Name(attrLeaseExpiresMS))
	if u.LastErrorCode != "" {
		update = update.Set(expression.Name(attrLastErrorCode), expression.Value(u.LastErrorCode))
	} else {
		update = update.Remove(expression.Name(attrLastErrorCode))
	}
	if u.SetSnapshot {
		update = update.Set(expression.Name(attrRemoteStatus), expression.Value(u.RemoteStatus)).
			Set(expression.Name(attrLifecycleSHA256), expression.Value(u.LifecycleSHA256))
		if len(u.Lifecycle) > 0 {
			snap, err := encodeSnapshot(u.Lifecycle)
			if err != nil {
				return update, err
			}
			update = update.Set(expression.Name(attrLifecycle), expression.Value(snap))
		} else {
			update = update.Remove(expression.Name(attrLifecycle))
		}
	}
	update = optionalMS(update, attrRegularPollMS, u.RegularPollMS)
	update = optionalMS(update, attrWaitUntilMS, u.WaitUntilMS)
	if u.Timeline != nil {
		update = update.Set(expression.Name(AttrTimeline), expression.Value(EncodeTimeline(u.Timeline)))
	}
	if u.State.Final() && !u.Attention("") && s.retention > 0 {
		// A finished change nobody has to look at expires; one that needs
		// attention never does (an acknowledgement does not change that).
		update = update.Set(expression.Name(AttrExpiresAt), expression.Value(ExpiresAt(u.UpdatedMS, s.retention)))
	}
	shard := expression.Value(Shard(eventID))
	update = sparseKey(update, u.Attention(""), attrAttentionShard, shard, attrAttentionMS, u.UpdatedMS)
	if u.Owes() {
		// A final write leaves the wake keys where the claim left them (no
		// wake index write) and sets outbox_ms: the owed outcome is found
		// through the wake index until Announced removes both
		// (docs/design.md "Owed outcomes in the wake index").
		return update.Set(expression.Name(attrOutboxMS), expression.Value(u.UpdatedMS)), nil
	}
	update = sparseKey(update, u.State.CanWake(), attrWakeShard, shard, attrWakeMS, u.NextPollMS)
	return update.Remove(expression.Name(attrOutboxMS)), nil
}

// optionalMS sets an optional time attribute, or removes it when ms is 0.
func optionalMS(update expression.UpdateBuilder, name string, ms int64) expression.UpdateBuilder {
	if ms == 0 {
		return update.Remove(expression.Name(name))
	}
	return update.Set(expression.Name(name), expression.Value(ms))
}

// sparseKey sets a sparse index's two key attributes when the record
// belongs in that index and removes them when it does not.
func sparseKey(update expression.UpdateBuilder, in bool, shardName string, shard expression.OperandBuilder, msName string, ms int64) expression.UpdateBuilder {
	if !in {
		return update.Remove(expression.Name(shardName)).Remove(expression.Name(msName))
	}
	return update.Set(expression.Name(shardName), shard).Set(expression.Name(msName), expression.Value(ms))
}

// MarkInvalid implements monitor.Store.
func (s *Store) MarkInvalid(ctx context.Context, eventID string, nowMS int64) error {
	shard := expression.Value(Shard(eventID))
	update := expression.Set(expression.Name(attrState), expression.Value(string(monitor.StateFailed))).
		Set(expression.Name(attrLastErrorCode), expression.Value(monitor.CodeStateInvalid)).
		Set(expression.Name(attrUpdatedMS), expression.Value(nowMS)).
		Set(expression.Name(attrAttentionShard), shard).
		Set(expression.Name(attrAttentionMS), expression.Value(nowMS)).
		// The owed outcome is listed by the wake index, at its outbox key,
		// like every owed final record (docs/design.md "Owed outcomes in
		// the wake index").
		Set(expression.Name(attrOutboxMS), expression.Value(nowMS)).
		Set(expression.Name(attrWakeShard), shard).
		Set(expression.Name(attrWakeMS), expression.Value(nowMS)).
		Remove(expression.Name(attrLeaseOwner)).
		Remove(expression.Name(attrLeaseToken)).
		Remove(expression.Name(attrLeaseExpiresMS)).
		// An invalid record needs attention: never expired, not acknowledged.
		Remove(expression.Name(AttrExpiresAt)).
		Remove(expression.Name(AttrAcknowledgedMS))
	// A record already marked invalid keeps its outcome: a second marking
	// (a reader that saw the corrupt record before another marked it)
	// would give it a new outbox_ms, so a new outcome_id, announced again.
	// An item of another schema version is never ours to change.
	cond := expression.And(expression.AttributeExists(expression.Name(attrEventID)),
		expression.Name(attrSchemaVersion).Equal(expression.Value(monitor.SchemaVersion)),
		expression.Not(expression.And(
			expression.Name(attrState).Equal(expression.Value(string(monitor.StateFailed))),
			expression.Name(attrLastErrorCode).Equal(expression.Value(monitor.CodeStateInvalid)))))
	expr, err := build(expression.NewBuilder().WithCondition(cond).WithUpdate(update))
	if err != nil {
		return err
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: key(eventID),
		ConditionExpression:       expr.Condition(),
		UpdateExpression:          expr.Update(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	})
	if _, ok := conditionFailed(err); ok {
		return nil
	}
	if err != nil {
		return unavailable("mark invalid", err)
	}
	return nil
}

// Announced implements monitor.Store: one UpdateItem conditional on the
// schema version, the outbox key and a final state, removing the outbox key
// with the wake keys an owed final record keeps (docs/design.md "Owed
// outcomes in the wake index"): one index write.
func (s *Store) Announced(ctx context.Context, eventID string, finishedMS int64) error {
	update := expression.Remove(expression.Name(attrOutboxMS)).
		Remove(expression.Name(attrWakeShard)).Remove(expression.Name(attrWakeMS))
	cond := expression.And(expression.Name(attrSchemaVersion).Equal(expression.Value(monitor.SchemaVersion)),
		expression.Name(attrOutboxMS).Equal(expression.Value(finishedMS)),
		expression.Name(attrState).In(expression.Value(string(monitor.StateTerminal)), expression.Value(string(monitor.StateFailed))))
	expr, err := build(expression.NewBuilder().WithCondition(cond).WithUpdate(update))
	if err != nil {
		return err
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: key(eventID),
		ConditionExpression:       expr.Condition(),
		UpdateExpression:          expr.Update(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ReturnConsumedCapacity:    s.capacity.mode(),
	})
	if _, ok := conditionFailed(err); ok {
		return nil
	}
	if err != nil {
		return unavailable("announced", err)
	}
	s.capacity.add(out.ConsumedCapacity, true)
	return nil
}

// Owed implements monitor.Store. An owed outcome's final record stays in
// the wake index (docs/design.md "Owed outcomes in the wake index": a
// finishing write keeps the wake keys its claim left, a record final at
// registration or marked invalid is written there at its outbox key), so,
// per shard, one paginated KEYS_ONLY Query of the wake index (wake_shard =
// s AND wake_ms <= before: an owed record's wake_ms is at most its
// outbox_ms) whose entries are read (one projected BatchGetItem per page)
// and kept when final with outbox_ms <= before; merged in outbox order.
func (s *Store) Owed(ctx context.Context, beforeMS int64, limit int) ([]string, error) {
	if limit <= 0 {
		return nil, nil
	}
	var all []wakeKey
	for shard := range topology.WakeShards {
		woken, err := s.owedInWake(ctx, shard, beforeMS, limit)
		if err != nil {
			return nil, err
		}
		all = append(all, woken...)
	}
	sortKeys(all)
	ids := make([]string, 0, min(limit, len(all)))
	for _, k := range all[:min(limit, len(all))] {
		ids = append(ids, k.EventID)
	}
	return ids, nil
}

// owedInWake lists up to limit owed final records of one wake index shard
// (wake_ms <= beforeMS), keyed by their outbox_ms. Entries of records that
// can still wake are read and skipped; the listing pages on until limit
// owed records are found or the shard has no more entries up to beforeMS.
// Each page of up to 100 entries is read with one projected BatchGetItem
// (owedOutboxes), not one GetItem per entry: the read units are the same,
// the requests and round trips a hundredth (docs/performance.md "The owed
// pass's reads").
func (s *Store) owedInWake(ctx context.Context, shard int, beforeMS int64, limit int) ([]wakeKey, error) {
	var owed []wakeKey
	var start map[string]types.AttributeValue
	const page = 100
	for len(owed) < limit {
		keys, err := s.rangeShard(ctx, topology.IndexWake, attrWakeShard, attrWakeMS, shard, beforeMS, page, start)
		if err != nil {
			return nil, err
		}
		outbox, err := s.owedOutboxes(ctx, keys)
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			if ms, ok := outbox[k.EventID]; ok && ms <= beforeMS && len(owed) < limit {
				owed = append(owed, wakeKey{EventID: k.EventID, WakeMS: ms})
			}
		}
		if len(keys) < page {
			break
		}
		last := keys[len(keys)-1]
		start = map[string]types.AttributeValue{
			attrEventID:   &types.AttributeValueMemberS{Value: last.EventID},
			attrWakeShard: &types.AttributeValueMemberN{Value: strconv.Itoa(shard)},
			attrWakeMS:    &types.AttributeValueMemberN{Value: strconv.FormatInt(last.WakeMS, 10)},
		}
	}
	return owed, nil
}

// owedProjection reads what owedOutboxes needs of a record: its id, schema
// version, state and outbox key.
var owedProjection = func() expression.Expression {
	expr, err := expression.NewBuilder().WithProjection(
		expression.NamesList(expression.Name(attrEventID), expression.Name(attrSchemaVersion),
			expression.Name(attrState), expression.Name(attrOutboxMS))).Build()
	if err != nil {
		panic(err) // constant expression
	}
	return expr
}()

// owedOutboxes reads the records of keys (eventually consistent
// BatchGetItem calls of up to 100 keys, batchget.Items, projected onto
// owedProjection) and returns the outbox_ms of each one of this schema
// version that is final and owes its outcome, by event id (an item of
// another version is not this code's to announce: Get refuses it).
func (s *Store) owedOutboxes(ctx context.Context, keys []wakeKey) (map[string]int64, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	avKeys := make([]map[string]types.AttributeValue, len(keys))
	for i, k := range keys {
		avKeys[i] = key(k.EventID)
	}
	items, err := batchget.Items(ctx, s.db, batchget.Input{
		Table: s.table, Keys: avKeys,
		Read:                   types.KeysAndAttributes{ProjectionExpression: owedProjection.Projection(), ExpressionAttributeNames: owedProjection.Names()},
		ReturnConsumedCapacity: s.capacity.mode(),
		Consumed: func(cs []types.ConsumedCapacity) {
			for _, c := range cs {
				s.capacity.add(&c, false)
			}
		},
	})
	if err != nil {
		return nil, unavailable("owed get", err)
	}
	out := make(map[string]int64, len(items))
	for _, item := range items {
		id, _ := item[attrEventID].(*types.AttributeValueMemberS)
		st, _ := item[attrState].(*types.AttributeValueMemberS)
		n, _ := item[attrOutboxMS].(*types.AttributeValueMemberN)
		v, _ := item[attrSchemaVersion].(*types.AttributeValueMemberN)
		if id == nil || st == nil || n == nil || v == nil || v.Value != strconv.Itoa(monitor.SchemaVersion) || !monitor.State(st.Value).Final() {
			continue
		}
		ms, err := strconv.ParseInt(n.Value, 10, 64)
		if err != nil {
			continue
		}
		out[id.Value] = ms
	}
	return out, nil
}

func sortKeys(all []wakeKey) {
	sort.Slice(all, func(i, j int) bool {
		if all[i].WakeMS != all[j].WakeMS {
			return all[i].WakeMS < all[j].WakeMS
		}
		return all[i].EventID < all[j].EventID
	})
}

// wakeKey is one entry of a sparse index: the event id and the sort key.
type wakeKey struct {
	EventID string
	WakeMS  int64
}

// Due implements monitor.Store: DuePage from the head.
func (s *Store) Due(ctx context.Context, nowMS int64, limit int) ([]string, error) {
	ids, _, err := s.DuePage(ctx, nowMS, limit, monitor.DueCursor{})
	return ids, err
}

// DuePage implements monitor.Store: one paginated KEYS_ONLY Query per shard
// of the sparse wake index (wake_shard = s AND wake_ms <= now), each
// starting after the cursor's entry for its shard (ExclusiveStartKey), run
// in parallel and merged in wake order. Each shard's entries are taken as
// a prefix of its own query order, so the cursor of a shard is the last
// entry taken from it; a shard whose query ended and was taken whole is
// done.
func (s *Store) DuePage(ctx context.Context, nowMS int64, limit int, cursor monitor.DueCursor) ([]string, monitor.DueCursor, error) {
	if limit <= 0 {
		return nil, cursor, nil
	}
	results := make([][]wakeKey, topology.WakeShards)
	errs := make([]error, topology.WakeShards)
	var wg sync.WaitGroup
	for shard := range topology.WakeShards {
		if cursor.Done[shard] {
			continue
		}
		var start map[string]types.AttributeValue
		if after, ok := cursor.After[shard]; ok {
			start = map[string]types.AttributeValue{
				attrEventID:   &types.AttributeValueMemberS{Value: after.EventID},
				attrWakeShard: &types.AttributeValueMemberN{Value: strconv.Itoa(shard)},
				attrWakeMS:    &types.AttributeValueMemberN{Value: strconv.FormatInt(after.WakeMS, 10)},
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[shard], errs[shard] = s.rangeShard(ctx, topology.IndexWake, attrWakeShard, attrWakeMS, shard, nowMS, limit, start)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, cursor, err
	}
	// Merge the shards' heads.
	taken := make([]int, topology.WakeShards)
	var ids []string
	for len(ids) < limit {
		best := -1
		for shard, r := range results {
			if taken[shard] < len(r) && (best < 0 || less(r[taken[shard]], results[best][taken[best]])) {
				best = shard
			}
		}
		if best < 0 {
			break
		}
		ids = append(ids, results[best][taken[best]].EventID)
		taken[best]++
	}
	next := cursor
	for shard, r := range results {
		if cursor.Done[shard] {
			continue
		}
		var last *monitor.DueEntry
		if taken[shard] > 0 {
			k := r[taken[shard]-1]
			last = &monitor.DueEntry{WakeMS: k.WakeMS, EventID: k.EventID}
		}
		// Fewer than limit entries means the shard's query ended.
		done := len(r) < limit && taken[shard] == len(r)
		next = next.Advance(shard, last, done)
	}
	return ids, next, nil
}

func less(a, b wakeKey) bool {
	if a.WakeMS != b.WakeMS {
		return a.WakeMS < b.WakeMS
	}
	return a.EventID < b.EventID
}

// rangeShard reads up to limit keys of one shard of a sparse index whose
// sort key is ≤ upTo, in sort order, starting after start when it is set.
// Its pages are hand-written, not the SDK's paginator: the first page
// starts at the shard's persisted cursor entry (start), and each page's
// Limit shrinks to what is still wanted, which a paginator (one fixed
// Limit) cannot do.
func (s *Store) rangeShard(ctx context.Context, index, shardAttr, sortAttr string, shard int, upTo int64, limit int, start map[string]types.AttributeValue) ([]wakeKey, error) {
	keyCond := expression.Key(shardAttr).Equal(expression.Value(shard)).
		And(expression.Key(sortAttr).LessThanEqual(expression.Value(upTo)))
	expr, err := build(expression.NewBuilder().WithKeyCondition(keyCond))
	if err != nil {
		return nil, err
	}
	in := &dynamodb.QueryInput{
		TableName: aws.String(s.table), IndexName: aws.String(index),
		KeyConditionExpression:    expr.KeyCondition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ScanIndexForward:          aws.Bool(true),
		ExclusiveStartKey:         start,
		ReturnConsumedCapacity:    s.capacity.mode(),
	}
	var keys []wakeKey
	for len(keys) < limit {
		in.Limit = aws.Int32(int32(min(limit-len(keys), 1000)))
		out, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, unavailable("query "+index, err)
		}
		s.capacity.add(out.ConsumedCapacity, false)
		for _, it := range out.Items {
			id, okID := it[attrEventID].(*types.AttributeValueMemberS)
			n, okN := it[sortAttr].(*types.AttributeValueMemberN)
			var ms int64
			if okN {
				ms, err = strconv.ParseInt(n.Value, 10, 64)
			}
			if !okID || !okN || err != nil {
				return nil, core.Wrap(monitor.CodeDatabaseIntegrity, false, fmt.Errorf("monitordb: %s index entry does not decode", index))
			}
			keys = append(keys, wakeKey{EventID: id.Value, WakeMS: ms})
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	return keys, nil
}

// Census implements monitor.Store: every key of the wake and attention
// indexes (all shards), then the items by consistent BatchGetItem. The 16
// shard Queries are issued at once (one after the other they are 16 round
// trips on the health check's critical path); the ids are taken in the
// order of the sequential reads and deduplicated, so the result is the
// same. The first failed Query in that order is the error.
func (s *Store) Census(ctx context.Context) ([]monitor.Record, error) {
	indexes := []struct{ name, shardAttr string }{
		{topology.IndexWake, attrWakeShard}, {topology.IndexAttention, attrAttentionShard},
	}
	found := make([][]string, len(indexes)*topology.WakeShards)
	errs := make([]error, len(found))
	var wg sync.WaitGroup
	for i, index := range indexes {
		for shard := range topology.WakeShards {
			n := i*topology.WakeShards + shard
			wg.Add(1)
			go func() {
				defer wg.Done()
				found[n], errs[n] = s.indexKeys(ctx, index.name, index.shardAttr, shard)
			}()
		}
	}
	wg.Wait()
	seen := map[string]bool{}
	var ids []string
	for n, shardIDs := range found {
		if errs[n] != nil {
			return nil, errs[n]
		}
		for _, id := range shardIDs {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	sort.Strings(ids)
	return s.batchGet(ctx, ids)
}

// indexKeys reads one shard of a census index, projected onto the event id
// (the health role may read nothing else from the indexes).
func (s *Store) indexKeys(ctx context.Context, index, shardAttr string, shard int) ([]string, error) {
	expr, err := build(expression.NewBuilder().
		WithKeyCondition(expression.Key(shardAttr).Equal(expression.Value(shard))).
		WithProjection(expression.NamesList(expression.Name(attrEventID))))
	if err != nil {
		return nil, err
	}
	in := &dynamodb.QueryInput{
		TableName: aws.String(s.table), IndexName: aws.String(index),
		KeyConditionExpression:    expr.KeyCondition(),
		ProjectionExpression:      expr.Projection(),
		Select:                    types.SelectSpecificAttributes,
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ReturnConsumedCapacity:    s.capacity.mode(),
	}
	var ids []string
	for pages := dynamodb.NewQueryPaginator(s.db, in); pages.HasMorePages(); {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return nil, unavailable("census", err)
		}
		s.capacity.add(out.ConsumedCapacity, false)
		for _, it := range out.Items {
			if v, ok := it[attrEventID].(*types.AttributeValueMemberS); ok {
				ids = append(ids, v.Value)
			}
		}
	}
	return ids, nil
}

// censusProjection projects the census reads onto
// topology.MonitorCensusAttributes (every attribute of a monitor record):
// the health role's dynamodb:Attributes condition allows nothing else. An
// attribute outside the record layout is therefore not seen by the census;
// the poller's reads (monitor.Get) and the audit still mark such a record
// corrupt.
var censusProjection = func() expression.Expression {
	names := make([]expression.NameBuilder, len(topology.MonitorCensusAttributes))
	for i, a := range topology.MonitorCensusAttributes {
		names[i] = expression.Name(a)
	}
	expr, err := expression.NewBuilder().WithProjection(expression.NamesList(names[0], names[1:]...)).Build()
	if err != nil {
		panic(err)
	}
	return expr
}()

// batchGet reads the records of ids with strongly consistent BatchGetItem
// calls (batchget.Items), projected onto the census attributes.
func (s *Store) batchGet(ctx context.Context, ids []string) ([]monitor.Record, error) {
	keys := make([]map[string]types.AttributeValue, len(ids))
	for i, id := range ids {
		keys[i] = key(id)
	}
	items, err := batchget.Items(ctx, s.db, batchget.Input{
		Table: s.table, Keys: keys,
		Read: types.KeysAndAttributes{ConsistentRead: aws.Bool(true),
			ProjectionExpression: censusProjection.Projection(), ExpressionAttributeNames: censusProjection.Names()},
		ReturnConsumedCapacity: s.capacity.mode(),
		Consumed: func(cs []types.ConsumedCapacity) {
			for _, c := range cs {
				s.capacity.add(&c, false)
			}
		},
	})
	if err != nil {
		return nil, unavailable("census get", err)
	}
	recs := make([]monitor.Record, 0, len(items))
	for _, av := range items {
		rec := decode(av)
		if rec.State.Final() && !rec.NeedsAttention() && !rec.Corrupt && rec.SchemaVersion == monitor.SchemaVersion {
			// Listed by the wake index only while its outcome is owed
			// (docs/design.md "Owed outcomes in the wake index"): neither
			// wakes nor needs attention, so not part of the census. A
			// record of another schema version always is: health
			// reports it.
			continue
		}
		recs = append(recs, rec)
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].EventID < recs[j].EventID })
	return recs, nil
}
