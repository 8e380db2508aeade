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

// TestReadsCountedAtTheMinimumAWSBills: a read whose answer reports fewer
// units than AWS's documented minimum (DynamoDB Local reports 0 for a
// Query that finds nothing) is counted at that minimum — 1 strongly
// consistent, 0.5 eventually consistent, 0.5 for any index read — and
// counted apart; an answer at or above the minimum is left as reported.
func TestReadsCountedAtTheMinimumAWSBills(t *testing.T) {
	var answers []string
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = w.Write([]byte(answers[n-1]))
	}))
	defer srv.Close()
	zeroQuery := `{"Count":0,"Items":[],"ScannedCount":0,"ConsumedCapacity":{"TableName":"t","CapacityUnits":0,"Table":{"CapacityUnits":0}}}`
	zeroIndex := `{"Count":0,"Items":[],"ScannedCount":0,"ConsumedCapacity":{"TableName":"t","CapacityUnits":0,"GlobalSecondaryIndexes":{"wake":{"CapacityUnits":0}}}}`
	twoQuery := `{"Count":1,"Items":[],"ScannedCount":1,"ConsumedCapacity":{"TableName":"t","CapacityUnits":2}}`
	noCapacity := `{"Count":0,"Items":[],"ScannedCount":0}`
	zeroGet := `{"ConsumedCapacity":{"TableName":"t","CapacityUnits":0}}`
	cases := []struct {
		name        string
		answer      string
		call        func(context.Context, *dynamodb.Client) error
		units       float64
		index       float64
		corrections int64
	}{
		{"strongly consistent query, 0 reported", zeroQuery, func(ctx context.Context, c *dynamodb.Client) error {
			_, err := c.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("t"), ConsistentRead: aws.Bool(true)})
			return err
		}, 1, 0, 1},
		{"eventually consistent query, 0 reported", zeroQuery, func(ctx context.Context, c *dynamodb.Client) error {
			_, err := c.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("t"), ConsistentRead: aws.Bool(false)})
			return err
		}, 0.5, 0, 1},
		{"query without ConsistentRead, 0 reported", zeroQuery, func(ctx context.Context, c *dynamodb.Client) error {
			_, err := c.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("t")})
			return err
		}, 0.5, 0, 1},
		{"index query, 0 reported", zeroIndex, func(ctx context.Context, c *dynamodb.Client) error {
			_, err := c.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("t"), IndexName: aws.String("wake")})
			return err
		}, 0.5, 0.5, 1},
		{"query without any capacity in the answer", noCapacity, func(ctx context.Context, c *dynamodb.Client) error {
			_, err := c.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("t"), ConsistentRead: aws.Bool(true)})
			return err
		}, 1, 0, 1},
		{"query reporting 2", twoQuery, func(ctx context.Context, c *dynamodb.Client) error {
			_, err := c.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("t"), ConsistentRead: aws.Bool(true)})
			return err
		}, 2, 0, 0},
		{"strongly consistent GetItem, 0 reported", zeroGet, func(ctx context.Context, c *dynamodb.Client) error {
			_, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("t"), ConsistentRead: aws.Bool(true),
				Key: map[string]types.AttributeValue{"k": &types.AttributeValueMemberS{Value: "v"}}})
			return err
		}, 1, 0, 1},
		{"eventually consistent scan, 0 reported", zeroQuery, func(ctx context.Context, c *dynamodb.Client) error {
			_, err := c.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String("t")})
			return err
		}, 0.5, 0, 1},
		{"write reporting 0 is not a read", zeroGet, func(ctx context.Context, c *dynamodb.Client) error {
			_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("t"),
				Item: map[string]types.AttributeValue{"k": &types.AttributeValueMemberS{Value: "v"}}})
			return err
		}, 0, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			calls.Store(0)
			answers = []string{tc.answer}
			m := New()
			c := dynamodb.New(dynamodb.Options{
				Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
				Credentials:                     credentials.NewStaticCredentialsProvider("test", "test", ""),
				DisableValidateResponseChecksum: true,
				APIOptions:                      []func(*middleware.Stack) error{m.Install},
			})
			if err := tc.call(context.Background(), c); err != nil {
				t.Fatal(err)
			}
			s := m.Snapshot()
			if s.ReadUnits != tc.units || s.IndexUnits != tc.index || s.MinimumCorrections != tc.corrections || s.WriteUnits != 0 {
				t.Fatalf("read units %v index %v corrections %d writes %v; want %v, %v, %d, 0",
					s.ReadUnits, s.IndexUnits, s.MinimumCorrections, s.WriteUnits, tc.units, tc.index, tc.corrections)
			}
			var sum float64
			for _, lc := range s.ByLabel {
				sum += lc.ReadUnits
			}
			if sum != tc.units {
				t.Fatalf("labels hold %v read units, want %v", sum, tc.units)
			}
			m.Reset()
			if s := m.Snapshot(); s.MinimumCorrections != 0 {
				t.Fatalf("after reset %+v", s)
			}
		})
	}
}
