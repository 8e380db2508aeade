// Package batchget reads DynamoDB items by key with BatchGetItem: requests
// of at most 100 keys, and the keys DynamoDB leaves unprocessed (throttling,
// the 16 MB response limit) asked again after a backoff, a bounded number
// of times and never past the caller's context.
//
// Every BatchGetItem of localeflow goes through Items.
package batchget

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/core"
)

// CodeUnprocessed is the retryable failure when keys are still unprocessed
// after MaxRounds requests.
const CodeUnprocessed = "dynamodb.batch_get_unprocessed"

// MaxRounds bounds the BatchGetItem calls for one request of keys: the
// first and the retries of its unprocessed keys.
const MaxRounds = 8

// maxKeys is BatchGetItem's limit of keys per request.
const maxKeys = 100

// DynamoDBAPI is the one DynamoDB method Items calls.
type DynamoDBAPI interface {
	BatchGetItem(ctx context.Context, params *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

var _ DynamoDBAPI = (*dynamodb.Client)(nil)

// Input is what to read.
type Input struct {
	Table string
	Keys  []map[string]types.AttributeValue
	// Read is sent for every request of keys (its Keys field is ignored):
	// consistency, projection and attribute names.
	Read types.KeysAndAttributes
	// ReturnConsumedCapacity is sent on every call; Consumed, when set,
	// receives each response's ConsumedCapacity.
	ReturnConsumedCapacity types.ReturnConsumedCapacity
	Consumed               func([]types.ConsumedCapacity)
}

// Backoff is the wait before retry round (1 .. MaxRounds-1) of unprocessed
// keys: core.Backoff from 50 ms doubled per round, 50 ms to 3.2 s (6.35 s
// in all), without jitter.
func Backoff(round int) time.Duration {
	return core.Backoff(round, 50*time.Millisecond, 3200*time.Millisecond)
}

// Items returns the items of in.Keys that exist, in the order DynamoDB
// returns them. A failed call returns its error as is; keys still
// unprocessed after MaxRounds calls are a retryable CodeUnprocessed; a
// context that ends during a backoff returns its error.
func Items(ctx context.Context, db DynamoDBAPI, in Input) ([]map[string]types.AttributeValue, error) {
	return items(ctx, db, in, Backoff)
}

func items(ctx context.Context, db DynamoDBAPI, in Input, backoff func(round int) time.Duration) ([]map[string]types.AttributeValue, error) {
	var out []map[string]types.AttributeValue
	for start := 0; start < len(in.Keys); start += maxKeys {
		read := in.Read
		read.Keys = in.Keys[start:min(start+maxKeys, len(in.Keys))]
		request := map[string]types.KeysAndAttributes{in.Table: read}
		for round := 0; len(request) > 0; round++ {
			if round == MaxRounds {
				return nil, core.Wrap(CodeUnprocessed, true, fmt.Errorf("batchget: %d keys of %s unprocessed after %d calls", len(request[in.Table].Keys), in.Table, MaxRounds))
			}
			if round > 0 {
				if err := sleep(ctx, backoff(round)); err != nil {
					return nil, err
				}
			}
			resp, err := db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: request, ReturnConsumedCapacity: in.ReturnConsumedCapacity})
			if err != nil {
				return nil, err
			}
			if in.Consumed != nil {
				in.Consumed(resp.ConsumedCapacity)
			}
			out = append(out, resp.Responses[in.Table]...)
			request = resp.UnprocessedKeys
		}
	}
	return out, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
