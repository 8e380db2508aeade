package opsdb

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/adapters/monitordb"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/health"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/topology"
)

// Requeue codes.
const (
	// RequeuedErrorCode is last_error_code of a requeued record until its
	// next claim (retry_wait must carry an error code).
	RequeuedErrorCode = "operator.requeued"
	// CodeRequeueNotFailed: only a failed record can be requeued.
	CodeRequeueNotFailed = "operator.requeue.not_failed"
	// CodeRequeueLost: the record changed between the read and the write
	// (another requeue, or a worker marked it); nothing was written.
	CodeRequeueLost = "operator.requeue.lost"
	// CodeJournalInvalid: a requeue journal item fails its checks.
	CodeJournalInvalid = "operator.requeue.journal_invalid"
)

// JournalPrefix prefixes the event id in a requeue journal item's key.
const JournalPrefix = "requeue#"

// Attribute names of the monitor item (adapters/monitordb's layout) that a
// requeue writes, and of the journal item.
const (
	attrState          = "state"
	attrFailures       = "consecutive_failures"
	attrNextPollMS     = "next_poll_ms"
	attrLastErrorCode  = "last_error_code"
	attrUpdatedMS      = "updated_ms"
	attrRequeuedCount  = "requeued_count"
	attrRequeuedMS     = "requeued_ms"
	attrFailedCode     = "last_failed_code"
	attrFailedMS       = "last_failed_ms"
	attrFailedFailures = "last_failed_failures"
)

// DynamoDBRequeueAPI is the part of *dynamodb.Client a Requeuer uses
// (besides the monitordb.Store it reads records with).
type DynamoDBRequeueAPI interface {
	TransactWriteItems(ctx context.Context, params *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	GetItem(ctx context.Context, params *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

var _ DynamoDBRequeueAPI = (*dynamodb.Client)(nil)

// Requeuer puts failed monitor records back to due.
type Requeuer struct {
	store *monitordb.Store
	db    DynamoDBRequeueAPI
	table string
}

// NewRequeuer returns a Requeuer on the monitor table that store reads.
func NewRequeuer(store *monitordb.Store, db DynamoDBRequeueAPI, table string) (*Requeuer, error) {
	if store == nil || db == nil || table == "" {
		return nil, errors.New("opsdb: NewRequeuer needs a store, a client and a table name")
	}
	return &Requeuer{store: store, db: db, table: table}, nil
}

// Journal is the requeue history of one event (content-free).
type Journal struct {
	EventID            string `dynamodbav:"-" json:"event_id"`
	RequeuedCount      int    `dynamodbav:"requeued_count" json:"requeued_count"`
	RequeuedMS         int64  `dynamodbav:"requeued_ms" json:"requeued_ms"`
	LastFailedCode     string `dynamodbav:"last_failed_code" json:"last_failed_code"`
	LastFailedMS       int64  `dynamodbav:"last_failed_ms" json:"last_failed_ms"`
	LastFailedFailures int    `dynamodbav:"last_failed_failures" json:"last_failed_failures"`
}

var journalAttributes = map[string]bool{
	topology.AttrEventID: true, attrRequeuedCount: true, attrRequeuedMS: true,
	attrFailedCode: true, attrFailedMS: true, attrFailedFailures: true,
}

func (j Journal) valid() bool {
	return core.ValidToken(j.EventID) && j.RequeuedCount > 0 && core.ValidMillis(j.RequeuedMS) &&
		core.ValidErrorCode(j.LastFailedCode) && core.ValidMillis(j.LastFailedMS) &&
		j.LastFailedFailures >= 0 && j.LastFailedFailures <= monitor.MaxFailures
}

var requeueJournals = journalKind[Journal]{
	prefix: JournalPrefix, attributes: journalAttributes, code: CodeJournalInvalid,
	setID: func(j *Journal, id string) { j.EventID = id }, valid: Journal.valid,
}

// decodeJournal decodes and checks a journal item.
func decodeJournal(item map[string]types.AttributeValue) (Journal, error) {
	return requeueJournals.decode(item)
}

func journalKey(eventID string) map[string]types.AttributeValue { return requeueJournals.key(eventID) }

// History returns the requeue journal of eventID; ok is false when it was
// never requeued.
func (q *Requeuer) History(ctx context.Context, eventID string) (Journal, bool, error) {
	return requeueJournals.read(ctx, q, "history", eventID)
}

// Requeued is the record before and after a requeue.
type Requeued struct {
	Before  monitor.Record
	After   monitor.Record
	Journal Journal
}

// Requeue moves a failed record to retry_wait, due at nowMS, with
// consecutive_failures 0 (a fresh failure budget) and last_error_code
// RequeuedErrorCode, and records it in the journal — one transaction whose
// record write is conditional on the record being exactly the failed
// record read (state, updated_ms, last_error_code, consecutive_failures).
// The record must pass monitor.Validate before and after; an invalid
// record is refused with its validation code (fix the data first).
func (q *Requeuer) Requeue(ctx context.Context, eventID string, nowMS int64) (Requeued, error) {
	if !core.ValidToken(eventID) {
		return Requeued{}, core.Fail(monitor.CodeEventInvalid)
	}
	if !core.ValidMillis(nowMS) {
		return Requeued{}, core.Fail(monitor.CodeTimeInvalid)
	}
	before, err := q.store.Get(ctx, eventID)
	if err != nil {
		return Requeued{}, fmt.Errorf("requeue %s: %w", eventID, err)
	}
	if _, err := monitor.Validate(before); err != nil {
		return Requeued{}, fmt.Errorf("requeue %s: %w", eventID, err)
	}
	if before.State != monitor.StateFailed {
		return Requeued{}, core.Fail(CodeRequeueNotFailed)
	}
	if nowMS < before.UpdatedMS {
		return Requeued{}, core.Fail(monitor.CodeClockRegressed)
	}
	after := before
	after.State, after.ConsecutiveFailures, after.NextPollMS = monitor.StateRetryWait, 0, nowMS
	after.LastErrorCode, after.UpdatedMS = RequeuedErrorCode, nowMS
	// A failure outcome not announced yet is moot once the change is
	// monitored again: the requeued record leaves the outbox.
	after.OutboxMS = 0
	// A requeued change that fails again needs attention again.
	after.AcknowledgedMS = 0
	if _, err := monitor.Validate(after); err != nil {
		// A valid failed record always yields a valid requeued one; this
		// guards the monitor's rules changing under us.
		return Requeued{}, fmt.Errorf("requeue %s: requeued record would not validate: %w", eventID, err)
	}
	items, err := q.transaction(before, after)
	if err != nil {
		return Requeued{}, err
	}
	_, err = q.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	var canceled *types.TransactionCanceledException
	if errors.As(err, &canceled) {
		if journalRefused(canceled) {
			return Requeued{}, core.Wrap(monitor.CodeSchemaAltered, false, fmt.Errorf("requeue %s: the journal item is of another schema version", eventID))
		}
		for _, r := range canceled.CancellationReasons {
			if aws.ToString(r.Code) == "ConditionalCheckFailed" {
				return Requeued{}, core.Wrap(CodeRequeueLost, false, fmt.Errorf("requeue %s: the record changed since it was read", eventID))
			}
		}
	}
	if err != nil {
		return Requeued{}, core.Wrap(monitor.CodeStoreUnavailable, true, fmt.Errorf("opsdb requeue %s: %w", eventID, err))
	}
	stored, err := q.store.Get(ctx, eventID)
	if err != nil {
		return Requeued{}, fmt.Errorf("requeue %s: read back: %w", eventID, err)
	}
	j, _, err := q.History(ctx, eventID)
	if err != nil {
		return Requeued{}, fmt.Errorf("requeue %s: read journal: %w", eventID, err)
	}
	return Requeued{Before: before, After: stored, Journal: j}, nil
}

func (q *Requeuer) transaction(before, after monitor.Record) ([]types.TransactWriteItem, error) {
	cond := recordOfThisVersion(expression.And(
		expression.Name(attrState).Equal(expression.Value(string(monitor.StateFailed))),
		expression.Name(attrUpdatedMS).Equal(expression.Value(before.UpdatedMS)),
		expression.Name(attrLastErrorCode).Equal(expression.Value(before.LastErrorCode)),
		expression.Name(attrFailures).Equal(expression.Value(before.ConsecutiveFailures)),
	))
	shard := monitordb.Shard(after.EventID)
	update := expression.Set(expression.Name(attrState), expression.Value(string(after.State))).
		Set(expression.Name(attrFailures), expression.Value(after.ConsecutiveFailures)).
		Set(expression.Name(attrNextPollMS), expression.Value(after.NextPollMS)).
		Set(expression.Name(attrLastErrorCode), expression.Value(after.LastErrorCode)).
		Set(expression.Name(attrUpdatedMS), expression.Value(after.UpdatedMS)).
		Set(expression.Name(topology.AttrWakeShard), expression.Value(shard)).
		Set(expression.Name(topology.AttrWakeMS), expression.Value(after.NextPollMS)).
		Remove(expression.Name(topology.AttrAttentionShard)).
		Remove(expression.Name(topology.AttrAttentionMS)).
		Remove(expression.Name(topology.AttrOutboxMS)).
		Remove(expression.Name(monitordb.AttrAcknowledgedMS))
	rexpr, err := expression.NewBuilder().WithCondition(cond).WithUpdate(update).Build()
	if err != nil {
		return nil, fmt.Errorf("opsdb: build requeue expression: %w", err)
	}
	journal := expression.Add(expression.Name(attrRequeuedCount), expression.Value(1)).
		Set(expression.Name(attrRequeuedMS), expression.Value(after.UpdatedMS)).
		Set(expression.Name(attrFailedCode), expression.Value(before.LastErrorCode)).
		Set(expression.Name(attrFailedMS), expression.Value(before.UpdatedMS)).
		Set(expression.Name(attrFailedFailures), expression.Value(before.ConsecutiveFailures))
	jexpr, err := journalWrite(journal)
	if err != nil {
		return nil, err
	}
	return []types.TransactWriteItem{
		{Update: &types.Update{
			TableName: aws.String(q.table), Key: map[string]types.AttributeValue{topology.AttrEventID: &types.AttributeValueMemberS{Value: after.EventID}},
			ConditionExpression: rexpr.Condition(), UpdateExpression: rexpr.Update(),
			ExpressionAttributeNames: rexpr.Names(), ExpressionAttributeValues: rexpr.Values(),
		}},
		{Update: &types.Update{
			TableName: aws.String(q.table), Key: journalKey(after.EventID),
			ConditionExpression: jexpr.Condition(), UpdateExpression: jexpr.Update(),
			ExpressionAttributeNames: jexpr.Names(), ExpressionAttributeValues: jexpr.Values(),
		}},
	}, nil
}

// DynamoDBTableAPI is the DescribeTable method TableItems uses.
type DynamoDBTableAPI interface {
	DescribeTable(ctx context.Context, params *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

var _ DynamoDBTableAPI = (*dynamodb.Client)(nil)

// TableItems reports a table's approximate item count (DescribeTable's
// ItemCount, refreshed by DynamoDB about every six hours): one call whose
// cost does not depend on the table's size.
type TableItems struct {
	DB    DynamoDBTableAPI
	Table string
}

// ItemCount implements health.ItemCounter.
func (t TableItems) ItemCount(ctx context.Context) (int64, error) {
	out, err := t.DB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(t.Table)})
	if err != nil {
		return 0, unavailable("describe "+t.Table, err)
	}
	if out.Table == nil || out.Table.ItemCount == nil || *out.Table.ItemCount < 0 {
		return 0, core.Wrap(health.CodeUnavailable, false, errors.New("opsdb: DescribeTable without an item count"))
	}
	return *out.Table.ItemCount, nil
}

// formatKey is a printable, bounded form of a stored key for reports
// (keys are ids, but a tampered one may be anything).
func formatKey(s string) string {
	if core.ValidToken(s) {
		return s
	}
	// Journal keys and release sort keys: "<kind>#<token>".
	if kind, id, ok := strings.Cut(s, "#"); ok && core.ValidToken(kind) && core.ValidToken(id) {
		return s
	}
	if len(s) > 64 {
		s = s[:64]
	}
	return strconv.QuoteToASCII(s)
}
