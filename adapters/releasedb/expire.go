package releasedb

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/topology"
)

// DynamoDBExpireAPI is the part of *dynamodb.Client TextExpirer uses.
type DynamoDBExpireAPI interface {
	Query(ctx context.Context, params *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	UpdateItem(ctx context.Context, params *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

var _ DynamoDBExpireAPI = (*dynamodb.Client)(nil)

// TextExpirer sets the table's TTL attribute (topology.AttrExpiresAt, epoch
// seconds) on the records that hold texts: the source and result records
// of one event. DynamoDB deletes them after that time; everything else of
// the event (content-free) stays.
type TextExpirer struct {
	DB    DynamoDBExpireAPI
	Table string
}

// ExpireTexts sets expires_at = at on every source and result record of
// eventID that has none: a text whose retention started keeps its expiry,
// so running an ended release again never moves it later. An UpdateItem
// writes only that attribute (the coordinator's dynamodb:Attributes
// condition allows nothing else) and only on an existing item of
// release.SchemaVersion (one of another format is left as it is).
// Idempotent; failures are retryable.
func (e TextExpirer) ExpireTexts(ctx context.Context, eventID string, at time.Time) error {
	if !core.ValidToken(eventID) {
		return core.Fail(release.CodeEventIDInvalid)
	}
	for _, prefix := range []string{release.SKSourcePrefix, release.SKResultPrefix} {
		keys, err := e.textKeys(ctx, eventID, prefix)
		if err != nil {
			return err
		}
		for _, key := range keys {
			_, err := e.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName:                aws.String(e.Table),
				Key:                      key,
				UpdateExpression:         aws.String("SET #ttl = :ttl"),
				ConditionExpression:      aws.String("attribute_exists(#pk) AND #sv = :sv AND attribute_not_exists(#ttl)"),
				ExpressionAttributeNames: map[string]string{"#ttl": topology.AttrExpiresAt, "#pk": topology.AttrPK, "#sv": release.AttrSchemaVersion},
				ExpressionAttributeValues: map[string]types.AttributeValue{
					":ttl": &types.AttributeValueMemberN{Value: strconv.FormatInt(at.Unix(), 10)},
					":sv":  &types.AttributeValueMemberN{Value: strconv.Itoa(release.SchemaVersion)},
				},
			})
			var gone *types.ConditionalCheckFailedException
			if err != nil && !errors.As(err, &gone) {
				return core.Wrap(CodeUnavailable, true, fmt.Errorf("expire %s: %w", eventID, err))
			}
		}
	}
	return nil
}

// textKeys lists the keys of the event's records whose sort key starts
// with prefix.
func (e TextExpirer) textKeys(ctx context.Context, eventID, prefix string) ([]map[string]types.AttributeValue, error) {
	expr, err := expression.NewBuilder().WithKeyCondition(
		expression.Key(topology.AttrPK).Equal(expression.Value(PK(eventID))).
			And(expression.Key(topology.AttrSK).BeginsWith(prefix)),
	).WithProjection(expression.NamesList(expression.Name(topology.AttrPK), expression.Name(topology.AttrSK))).Build()
	if err != nil {
		return nil, core.Wrap(CodeUnavailable, false, err)
	}
	in := &dynamodb.QueryInput{
		TableName: aws.String(e.Table), KeyConditionExpression: expr.KeyCondition(),
		ProjectionExpression: expr.Projection(), ExpressionAttributeNames: expr.Names(),
		ExpressionAttributeValues: expr.Values(), ConsistentRead: aws.Bool(true),
	}
	var keys []map[string]types.AttributeValue
	for pages := dynamodb.NewQueryPaginator(e.DB, in); pages.HasMorePages(); {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return nil, core.Wrap(CodeUnavailable, true, fmt.Errorf("list texts of %s: %w", eventID, err))
		}
		for _, item := range out.Items {
			keys = append(keys, map[string]types.AttributeValue{topology.AttrPK: item[topology.AttrPK], topology.AttrSK: item[topology.AttrSK]})
		}
	}
	return keys, nil
}
