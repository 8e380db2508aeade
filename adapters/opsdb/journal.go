package opsdb

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/topology"
)

// attrSchemaVersion is the format version every monitor-table item
// carries (monitor.SchemaVersion): records and journal items alike.
const attrSchemaVersion = "schema_version"

// journalKind describes one kind of operator journal item in the monitor
// table (requeue, acknowledgement): its key prefix, its attributes, its
// stable error code and how to check a decoded entry. Its items carry
// schema_version monitor.SchemaVersion like the records beside them.
type journalKind[J any] struct {
	prefix     string
	attributes map[string]bool
	code       string
	setID      func(*J, string)
	valid      func(J) bool
}

func (k journalKind[J]) key(eventID string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{topology.AttrEventID: &types.AttributeValueMemberS{Value: k.prefix + eventID}}
}

// decode decodes and checks a journal item: it is of this schema version
// (else lifecycle_monitor.schema_altered: not this code's to read), its
// key carries the prefix, it holds no other attribute than the kind's,
// and the entry is valid.
func (k journalKind[J]) decode(item map[string]types.AttributeValue) (J, error) {
	var zero, j J
	if v, ok := item[attrSchemaVersion].(*types.AttributeValueMemberN); !ok || v.Value != strconv.Itoa(monitor.SchemaVersion) {
		return zero, core.Fail(monitor.CodeSchemaAltered)
	}
	key, _ := stringAttr(item, topology.AttrEventID)
	id, ok := strings.CutPrefix(key, k.prefix)
	if !ok {
		return zero, core.Fail(k.code)
	}
	if err := attributevalue.UnmarshalMap(item, &j); err != nil {
		return zero, core.Wrap(k.code, false, err)
	}
	k.setID(&j, id)
	for name := range item {
		if !k.attributes[name] && name != attrSchemaVersion {
			return zero, core.Fail(k.code)
		}
	}
	if !k.valid(j) {
		return zero, core.Fail(k.code)
	}
	return j, nil
}

// read returns eventID's journal entry with a consistent read; ok is false
// when there is none.
func (k journalKind[J]) read(ctx context.Context, q *Requeuer, what, eventID string) (J, bool, error) {
	var zero J
	if !core.ValidToken(eventID) {
		return zero, false, core.Fail(monitor.CodeEventInvalid)
	}
	out, err := q.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(q.table), Key: k.key(eventID), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return zero, false, core.Wrap(monitor.CodeStoreUnavailable, true, fmt.Errorf("opsdb %s %s: %w", what, eventID, err))
	}
	if len(out.Item) == 0 {
		return zero, false, nil
	}
	j, err := k.decode(out.Item)
	return j, err == nil, err
}

// journalWrite is a journal item's update with its schema version, and its
// condition: a new item, or one of this schema version (an item of another
// version is never changed).
func journalWrite(update expression.UpdateBuilder) (expression.Expression, error) {
	update = update.Set(expression.Name(attrSchemaVersion), expression.Value(monitor.SchemaVersion))
	cond := expression.Or(expression.AttributeNotExists(expression.Name(topology.AttrEventID)),
		expression.Name(attrSchemaVersion).Equal(expression.Value(monitor.SchemaVersion)))
	expr, err := expression.NewBuilder().WithCondition(cond).WithUpdate(update).Build()
	if err != nil {
		return expression.Expression{}, fmt.Errorf("opsdb: build journal expression: %w", err)
	}
	return expr, nil
}

// recordOfThisVersion is the condition every operator write of a monitor
// record carries besides its own: the record is of this schema version.
func recordOfThisVersion(cond expression.ConditionBuilder) expression.ConditionBuilder {
	return expression.And(expression.Name(attrSchemaVersion).Equal(expression.Value(monitor.SchemaVersion)), cond)
}

// journalRefused reports whether a cancelled transaction of a record write
// (item 0) and a journal write (item 1) failed on the journal's condition:
// a journal item of another schema version.
func journalRefused(canceled *types.TransactionCanceledException) bool {
	r := canceled.CancellationReasons
	return len(r) > 1 && aws.ToString(r[1].Code) == "ConditionalCheckFailed"
}
