package meter

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

// TestCountsAttemptsUnitsAndConditionFailures: against a fake endpoint,
// the meter asks for INDEXES capacity, splits table and index units,
// counts a failed condition, and counts each retry attempt.
func TestCountsAttemptsUnitsAndConditionFailures(t *testing.T) {
	var calls atomic.Int64
	var sawIndexes atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"ReturnConsumedCapacity":"INDEXES"`) {
			sawIndexes.Store(true)
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		switch n {
		case 1:
			_, _ = w.Write([]byte(`{"ConsumedCapacity":{"TableName":"t","CapacityUnits":3,"GlobalSecondaryIndexes":{"wake":{"CapacityUnits":2}}}}`))
		case 2:
			w.WriteHeader(400)
			_, _ = w.Write([]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"no"}`))
		case 3:
			w.WriteHeader(500)
			_, _ = w.Write([]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"x"}`))
		default:
			_, _ = w.Write([]byte(`{"ConsumedCapacity":{"TableName":"t","CapacityUnits":0.5}}`))
		}
	}))
	defer srv.Close()
	m := New()
	c := dynamodb.New(dynamodb.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials:                     credentials.NewStaticCredentialsProvider("test", "test", ""),
		DisableValidateResponseChecksum: true,
		APIOptions:                      []func(*middleware.Stack) error{m.Install},
	})
	ctx := context.Background()
	key := map[string]types.AttributeValue{"k": &types.AttributeValueMemberS{Value: "v"}}
	if _, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("t"), Key: key}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("t"), Key: key}); err == nil {
		t.Fatal("condition failure not returned")
	}
	// One 500 then success: two attempts, one call.
	if _, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("t"), Key: key}); err != nil {
		t.Fatal(err)
	}
	s := m.Snapshot()
	if !sawIndexes.Load() {
		t.Fatal("ReturnConsumedCapacity=INDEXES was not sent")
	}
	if s.WriteUnits != 3 || s.IndexUnits != 2 || s.ReadUnits != 0.5 || s.ConditionFailures != 1 {
		t.Fatalf("units %+v", s)
	}
	if s.Requests["DynamoDB.UpdateItem"] != 2 || s.Requests["DynamoDB.GetItem"] != 2 || s.Calls != 3 || s.Attempts() != 4 || s.Service("DynamoDB") != 4 {
		t.Fatalf("requests %v calls %d", s.Requests, s.Calls)
	}
	m.Reset()
	if s := m.Snapshot(); s.Attempts() != 0 || s.WriteUnits != 0 || s.Calls != 0 {
		t.Fatalf("after reset %+v", s)
	}
}
