package opsdb

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/topology"
)

// journalKind describes one kind of operator journal item in the monitor
// table (requeue, acknowledgement): its key prefix, its attributes, its
// stable error code and how to check a decoded entry.
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

// decode decodes and checks a journal item: its key carries the prefix, it
// holds no other attribute than the kind's, and the entry is valid.
func (k journalKind[J]) decode(item map[string]types.AttributeValue) (J, error) {
	var zero, j J
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
		if !k.attributes[name] {
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
