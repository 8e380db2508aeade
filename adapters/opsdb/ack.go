package opsdb

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/adapters/monitordb"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/topology"
)

// Acknowledgement codes (the release records' acknowledgement uses the
// same ones).
const (
	// CodeAckNotNeeded: the record does not need attention (it is open, or
	// finished well), so there is nothing to acknowledge.
	CodeAckNotNeeded = release.CodeAckNotNeeded
	// CodeAckLost: the record changed between the read and the write.
	CodeAckLost = release.CodeAckLost
	// CodeAckReasonInvalid: the reason is empty, too long or not one line
	// of printable text.
	CodeAckReasonInvalid = release.CodeAckReasonInvalid
	// CodeAckActorInvalid: the caller's identity is not a printable ARN.
	CodeAckActorInvalid = release.CodeAckActorInvalid
	// CodeAckJournalInvalid: an acknowledgement journal item fails its
	// checks.
	CodeAckJournalInvalid = "operator.ack.journal_invalid"
)

// AckJournalPrefix prefixes the event id in an acknowledgement journal
// item's key.
const AckJournalPrefix = "ack#"

// MaxAckReason is the longest reason (characters).
const MaxAckReason = release.MaxAckReason

// AckJournal is the last acknowledgement of one event: who (the caller's
// AWS identity), when, why, and what was acknowledged (state, code, remote
// status, the record's updated_ms). The reason is operator text, one line;
// it must not carry translation texts or secrets.
type AckJournal struct {
	EventID      string `dynamodbav:"-" json:"event_id"`
	Count        int    `dynamodbav:"ack_count" json:"ack_count"`
	By           string `dynamodbav:"ack_by" json:"by"`
	AckMS        int64  `dynamodbav:"ack_ms" json:"acknowledged_ms"`
	Reason       string `dynamodbav:"ack_reason" json:"reason"`
	State        string `dynamodbav:"acked_state" json:"state"`
	ErrorCode    string `dynamodbav:"acked_error_code,omitempty" json:"error_code,omitempty"`
	RemoteStatus string `dynamodbav:"acked_remote_status,omitempty" json:"remote_status,omitempty"`
	UpdatedMS    int64  `dynamodbav:"acked_updated_ms" json:"record_updated_ms"`
}

var ackJournalAttributes = map[string]bool{
	topology.AttrEventID: true, "ack_count": true, "ack_by": true, "ack_ms": true, "ack_reason": true,
	"acked_state": true, "acked_error_code": true, "acked_remote_status": true, "acked_updated_ms": true,
}

// ValidAckReason reports whether reason is one line of 1..MaxAckReason
// printable characters.
func ValidAckReason(reason string) bool { return release.ValidAckReason(reason) }

func validActor(by string) bool { return release.ValidActor(by) }

func (j AckJournal) valid() bool {
	return core.ValidToken(j.EventID) && j.Count > 0 && validActor(j.By) && core.ValidMillis(j.AckMS) &&
		ValidAckReason(j.Reason) && monitor.State(j.State).Valid() && core.ValidMillis(j.UpdatedMS) &&
		(j.ErrorCode == "" || core.ValidErrorCode(j.ErrorCode)) && (j.RemoteStatus == "" || core.ValidToken(j.RemoteStatus))
}

var ackJournals = journalKind[AckJournal]{
	prefix: AckJournalPrefix, attributes: ackJournalAttributes, code: CodeAckJournalInvalid,
	setID: func(j *AckJournal, id string) { j.EventID = id }, valid: AckJournal.valid,
}

func decodeAckJournal(item map[string]types.AttributeValue) (AckJournal, error) {
	return ackJournals.decode(item)
}

func ackKey(eventID string) map[string]types.AttributeValue { return ackJournals.key(eventID) }

// AckHistory returns the last acknowledgement of eventID; ok is false when
// it was never acknowledged.
func (q *Requeuer) AckHistory(ctx context.Context, eventID string) (AckJournal, bool, error) {
	return ackJournals.read(ctx, q, "ack history", eventID)
}

// Acknowledged is the outcome of an acknowledgement.
type Acknowledged struct {
	Record  monitor.Record
	Journal AckJournal
	// Already is true when the record was acknowledged before: nothing
	// was written.
	Already bool
}

// Acknowledge marks a record that needs attention (failed, or a remote
// failure) as acknowledged by `by` at nowMS for reason — one transaction:
// the record gets acknowledged_ms and leaves the attention index, written
// only if it is still exactly the record read (state, updated_ms, not
// acknowledged, in the attention index); the journal item ack#<event_id>
// records who, when, why and what. An acknowledged record is a no-op
// (Already); a record that does not need attention is CodeAckNotNeeded.
func (q *Requeuer) Acknowledge(ctx context.Context, eventID, by, reason string, nowMS int64) (Acknowledged, error) {
	switch {
	case !core.ValidToken(eventID):
		return Acknowledged{}, core.Fail(monitor.CodeEventInvalid)
	case !ValidAckReason(reason):
		return Acknowledged{}, core.Fail(CodeAckReasonInvalid)
	case !validActor(by):
		return Acknowledged{}, core.Fail(CodeAckActorInvalid)
	case !core.ValidMillis(nowMS):
		return Acknowledged{}, core.Fail(monitor.CodeTimeInvalid)
	}
	before, err := q.store.Get(ctx, eventID)
	if err != nil {
		return Acknowledged{}, fmt.Errorf("ack %s: %w", eventID, err)
	}
	if _, err := monitor.Validate(before); err != nil {
		// An invalid record is failed by the health check first (it then
		// needs attention as lifecycle_monitor.state_invalid).
		return Acknowledged{}, fmt.Errorf("ack %s: %w", eventID, err)
	}
	if before.AcknowledgedMS != 0 {
		return q.already(ctx, before)
	}
	if !before.NeedsAttention() {
		return Acknowledged{}, core.Fail(CodeAckNotNeeded)
	}
	if nowMS < before.UpdatedMS {
		return Acknowledged{}, core.Fail(monitor.CodeClockRegressed)
	}
	after := before
	after.AcknowledgedMS = nowMS
	if _, err := monitor.Validate(after); err != nil {
		return Acknowledged{}, fmt.Errorf("ack %s: acknowledged record would not validate: %w", eventID, err)
	}
	items, err := q.ackTransaction(before, by, reason, nowMS)
	if err != nil {
		return Acknowledged{}, err
	}
	_, err = q.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	return q.settleAck(ctx, "ack", eventID, err, func(current monitor.Record) bool { return current.AcknowledgedMS != 0 })
}

// settleAck finishes an acknowledgement's transaction (op names it in
// errors): a cancelled one is the journal of another schema version, an
// acknowledgement someone made first (acked reports it on the record read
// then), or a record changed since it was read; otherwise the record and
// its journal as stored.
func (q *Requeuer) settleAck(ctx context.Context, op, eventID string, err error, acked func(monitor.Record) bool) (Acknowledged, error) {
	var canceled *types.TransactionCanceledException
	if errors.As(err, &canceled) {
		if journalRefused(canceled) {
			return Acknowledged{}, core.Wrap(monitor.CodeSchemaAltered, false, fmt.Errorf("%s %s: the journal item is of another schema version", op, eventID))
		}
		if current, gerr := q.store.Get(ctx, eventID); gerr == nil && acked(current) {
			// Someone acknowledged it first.
			return q.already(ctx, current)
		}
		return Acknowledged{}, core.Wrap(CodeAckLost, false, fmt.Errorf("%s %s: the record changed since it was read", op, eventID))
	}
	if err != nil {
		return Acknowledged{}, core.Wrap(monitor.CodeStoreUnavailable, true, fmt.Errorf("opsdb %s %s: %w", op, eventID, err))
	}
	stored, err := q.store.Get(ctx, eventID)
	if err != nil {
		return Acknowledged{}, fmt.Errorf("%s %s: read back: %w", op, eventID, err)
	}
	j, _, err := q.AckHistory(ctx, eventID)
	if err != nil {
		return Acknowledged{}, fmt.Errorf("%s %s: read journal: %w", op, eventID, err)
	}
	return Acknowledged{Record: stored, Journal: j}, nil
}

func (q *Requeuer) already(ctx context.Context, rec monitor.Record) (Acknowledged, error) {
	j, _, err := q.AckHistory(ctx, rec.EventID)
	if err != nil {
		return Acknowledged{}, fmt.Errorf("ack %s: read journal: %w", rec.EventID, err)
	}
	return Acknowledged{Record: rec, Journal: j, Already: true}, nil
}

func (q *Requeuer) ackTransaction(before monitor.Record, by, reason string, nowMS int64) ([]types.TransactWriteItem, error) {
	cond := recordOfThisVersion(expression.And(
		expression.Name(attrState).Equal(expression.Value(string(before.State))),
		expression.Name(attrUpdatedMS).Equal(expression.Value(before.UpdatedMS)),
		expression.AttributeNotExists(expression.Name(monitordb.AttrAcknowledgedMS)),
		expression.AttributeExists(expression.Name(topology.AttrAttentionShard)),
	))
	update := expression.Set(expression.Name(monitordb.AttrAcknowledgedMS), expression.Value(nowMS)).
		Remove(expression.Name(topology.AttrAttentionShard)).
		Remove(expression.Name(topology.AttrAttentionMS))
	rexpr, err := expression.NewBuilder().WithCondition(cond).WithUpdate(update).Build()
	if err != nil {
		return nil, fmt.Errorf("opsdb: build ack expression: %w", err)
	}
	journal := expression.Add(expression.Name("ack_count"), expression.Value(1)).
		Set(expression.Name("ack_by"), expression.Value(by)).
		Set(expression.Name("ack_ms"), expression.Value(nowMS)).
		Set(expression.Name("ack_reason"), expression.Value(reason)).
		Set(expression.Name("acked_state"), expression.Value(string(before.State))).
		Set(expression.Name("acked_updated_ms"), expression.Value(before.UpdatedMS))
	if before.LastErrorCode != "" {
		journal = journal.Set(expression.Name("acked_error_code"), expression.Value(before.LastErrorCode))
	} else {
		journal = journal.Remove(expression.Name("acked_error_code"))
	}
	if before.RemoteStatus != "" {
		journal = journal.Set(expression.Name("acked_remote_status"), expression.Value(before.RemoteStatus))
	} else {
		journal = journal.Remove(expression.Name("acked_remote_status"))
	}
	jexpr, err := journalWrite(journal)
	if err != nil {
		return nil, err
	}
	return []types.TransactWriteItem{
		{Update: &types.Update{
			TableName: aws.String(q.table), Key: map[string]types.AttributeValue{topology.AttrEventID: &types.AttributeValueMemberS{Value: before.EventID}},
			ConditionExpression: rexpr.Condition(), UpdateExpression: rexpr.Update(),
			ExpressionAttributeNames: rexpr.Names(), ExpressionAttributeValues: rexpr.Values(),
		}},
		{Update: &types.Update{
			TableName: aws.String(q.table), Key: ackKey(before.EventID),
			ConditionExpression: jexpr.Condition(), UpdateExpression: jexpr.Update(),
			ExpressionAttributeNames: jexpr.Names(), ExpressionAttributeValues: jexpr.Values(),
		}},
	}, nil
}

// CodeAckNotInvalid: `ack --invalid` was asked for a record that passes
// its integrity check (acknowledge it without --invalid).
const CodeAckNotInvalid = "operator.ack.not_invalid"

// AcknowledgeInvalid acknowledges a record that fails its integrity check
// (monitor.Validate: lifecycle_monitor.state_invalid; altered by hand or
// corrupted), which Acknowledge and Requeue refuse: the stored content
// cannot be trusted, so nothing of it is repaired or requeued. The record
// is first marked failed with lifecycle_monitor.state_invalid as any reader
// marks it (MarkInvalid, owing that outcome once), then acknowledged in one
// transaction like Acknowledge: acknowledged_ms set, the attention keys
// removed (conditional on the record still being marked invalid, not
// acknowledged and in the attention index) and the journal item
// ack#<event_id> written with who, when, why and acked_error_code
// lifecycle_monitor.state_invalid. Health stops counting the record once
// its owed outcome is announced (the poller's sweep); audit still lists
// it. A record of another schema version is refused
// (lifecycle_monitor.schema_altered: never this code's to change), a valid
// one is CodeAckNotInvalid, an acknowledged one a no-op (Already).
func (q *Requeuer) AcknowledgeInvalid(ctx context.Context, eventID, by, reason string, nowMS int64) (Acknowledged, error) {
	switch {
	case !core.ValidToken(eventID):
		return Acknowledged{}, core.Fail(monitor.CodeEventInvalid)
	case !ValidAckReason(reason):
		return Acknowledged{}, core.Fail(CodeAckReasonInvalid)
	case !validActor(by):
		return Acknowledged{}, core.Fail(CodeAckActorInvalid)
	case !core.ValidMillis(nowMS):
		return Acknowledged{}, core.Fail(monitor.CodeTimeInvalid)
	}
	before, err := q.store.Get(ctx, eventID)
	if err != nil {
		return Acknowledged{}, fmt.Errorf("ack --invalid %s: %w", eventID, err)
	}
	_, verr := monitor.Validate(before)
	switch {
	case verr == nil:
		return Acknowledged{}, core.Wrap(CodeAckNotInvalid, false, fmt.Errorf("ack --invalid %s: the record passes its integrity check: acknowledge it without --invalid", eventID))
	case !core.HasCode(verr, monitor.CodeStateInvalid):
		return Acknowledged{}, fmt.Errorf("ack --invalid %s: %w", eventID, verr)
	}
	if !monitor.MarkedInvalid(before) {
		if err := q.store.MarkInvalid(ctx, eventID, nowMS); err != nil {
			return Acknowledged{}, fmt.Errorf("ack --invalid %s: mark invalid: %w", eventID, err)
		}
		if before, err = q.store.Get(ctx, eventID); err != nil {
			return Acknowledged{}, fmt.Errorf("ack --invalid %s: %w", eventID, err)
		}
		if !monitor.MarkedInvalid(before) {
			return Acknowledged{}, core.Wrap(CodeAckLost, false, fmt.Errorf("ack --invalid %s: the record changed since it was read", eventID))
		}
	}
	if before.AcknowledgedMS != 0 {
		return q.already(ctx, before)
	}
	items, err := q.ackInvalidTransaction(before, by, reason, nowMS)
	if err != nil {
		return Acknowledged{}, err
	}
	_, err = q.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	return q.settleAck(ctx, "ack --invalid", eventID, err, func(current monitor.Record) bool {
		return monitor.MarkedInvalid(current) && current.AcknowledgedMS != 0
	})
}

// ackInvalidTransaction is ackTransaction for a record marked invalid:
// its condition is the marking (state failed, last_error_code
// state_invalid), not updated_ms, which an item that does not decode does
// not yield; the journal's acked_updated_ms is the marking time then.
func (q *Requeuer) ackInvalidTransaction(before monitor.Record, by, reason string, nowMS int64) ([]types.TransactWriteItem, error) {
	cond := recordOfThisVersion(expression.And(
		expression.Name(attrState).Equal(expression.Value(string(monitor.StateFailed))),
		expression.Name(attrLastErrorCode).Equal(expression.Value(monitor.CodeStateInvalid)),
		expression.AttributeNotExists(expression.Name(monitordb.AttrAcknowledgedMS)),
		expression.AttributeExists(expression.Name(topology.AttrAttentionShard)),
	))
	update := expression.Set(expression.Name(monitordb.AttrAcknowledgedMS), expression.Value(nowMS)).
		Remove(expression.Name(topology.AttrAttentionShard)).
		Remove(expression.Name(topology.AttrAttentionMS))
	rexpr, err := expression.NewBuilder().WithCondition(cond).WithUpdate(update).Build()
	if err != nil {
		return nil, fmt.Errorf("opsdb: build ack expression: %w", err)
	}
	updated := before.UpdatedMS
	if updated <= 0 || !core.ValidMillis(updated) {
		updated = before.OutboxMS
	}
	if updated <= 0 || !core.ValidMillis(updated) {
		updated = nowMS
	}
	journal := expression.Add(expression.Name("ack_count"), expression.Value(1)).
		Set(expression.Name("ack_by"), expression.Value(by)).
		Set(expression.Name("ack_ms"), expression.Value(nowMS)).
		Set(expression.Name("ack_reason"), expression.Value(reason)).
		Set(expression.Name("acked_state"), expression.Value(string(monitor.StateFailed))).
		Set(expression.Name("acked_error_code"), expression.Value(monitor.CodeStateInvalid)).
		Set(expression.Name("acked_updated_ms"), expression.Value(updated)).
		Remove(expression.Name("acked_remote_status"))
	jexpr, err := journalWrite(journal)
	if err != nil {
		return nil, err
	}
	return []types.TransactWriteItem{
		{Update: &types.Update{
			TableName: aws.String(q.table), Key: map[string]types.AttributeValue{topology.AttrEventID: &types.AttributeValueMemberS{Value: before.EventID}},
			ConditionExpression: rexpr.Condition(), UpdateExpression: rexpr.Update(),
			ExpressionAttributeNames: rexpr.Names(), ExpressionAttributeValues: rexpr.Values(),
		}},
		{Update: &types.Update{
			TableName: aws.String(q.table), Key: ackKey(before.EventID),
			ConditionExpression: jexpr.Condition(), UpdateExpression: jexpr.Update(),
			ExpressionAttributeNames: jexpr.Names(), ExpressionAttributeValues: jexpr.Values(),
		}},
	}, nil
}
