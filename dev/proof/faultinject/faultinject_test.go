package faultinject

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
)

// client is a DynamoDB client for a fake endpoint that counts requests
// and answers an empty GetItem; retries off so each call is one attempt.
func client(t *testing.T, inj *Injector) (*dynamodb.Client, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(srv.Close)
	c := dynamodb.New(dynamodb.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
		Retryer:     aws.NopRetryer{}, DisableValidateResponseChecksum: true,
		APIOptions: []func(*middleware.Stack) error{inj.Install},
	})
	return c, &hits
}

func get(c *dynamodb.Client) error {
	_, err := c.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String("t"),
		Key: map[string]types.AttributeValue{"k": &types.AttributeValueMemberS{Value: "v"}}})
	return err
}

func TestBeforeFailsWithTheTypedErrorWithoutSending(t *testing.T) {
	inj := New(1, ProvisionedThroughputExceeded)
	inj.Fraction = 1
	c, hits := client(t, inj)
	err := get(c)
	var pte *types.ProvisionedThroughputExceededException
	if !errors.As(err, &pte) {
		t.Fatalf("error %v, want ProvisionedThroughputExceededException", err)
	}
	if !retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err).Bool() {
		t.Fatal("the SDK does not classify the injected throttle as retryable")
	}
	if hits.Load() != 0 {
		t.Fatalf("the endpoint saw %d requests", hits.Load())
	}
}

func TestAfterAppliesThenFails(t *testing.T) {
	inj := New(1, InternalServerError)
	inj.Fraction, inj.Mode = 1, After
	c, hits := client(t, inj)
	err := get(c)
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "InternalServerError" {
		t.Fatalf("error %v, want InternalServerError", err)
	}
	if hits.Load() != 1 {
		t.Fatalf("the endpoint saw %d requests, want 1 (applied)", hits.Load())
	}
}

func TestEveryNthAndDisable(t *testing.T) {
	inj := New(1, Throttling)
	inj.Every = 3
	c, _ := client(t, inj)
	var failed []int
	for i := 1; i <= 9; i++ {
		if get(c) != nil {
			failed = append(failed, i)
		}
	}
	if len(failed) != 3 || failed[0] != 3 || failed[1] != 6 || failed[2] != 9 {
		t.Fatalf("failed calls %v, want [3 6 9]", failed)
	}
	inj.Enable(false)
	for range 6 {
		if err := get(c); err != nil {
			t.Fatalf("disabled injector failed a call: %v", err)
		}
	}
	calls, injected := inj.Stats()
	if calls != 15 || injected["GetItem"] != 3 || injected["total"] != 3 {
		t.Fatalf("stats %d %v", calls, injected)
	}
}

func TestSeededFractionIsReproducible(t *testing.T) {
	run := func() []bool {
		inj := New(42, ServiceUnavailable)
		inj.Fraction = 0.3
		c, _ := client(t, inj)
		out := make([]bool, 40)
		for i := range out {
			out[i] = get(c) != nil
		}
		return out
	}
	a, b := run(), run()
	n := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("call %d differs between runs with the same seed", i)
		}
		if a[i] {
			n++
		}
	}
	if n == 0 || n == len(a) {
		t.Fatalf("%d of %d failed with fraction 0.3", n, len(a))
	}
}
