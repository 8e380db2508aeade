package awsclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// isolate clears every variable that could point the SDK somewhere and
// hides the shared config files, so only what a test sets counts.
func isolate(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	for _, k := range []string{
		"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_EVENTBRIDGE",
		"AWS_ENDPOINT_URL_SECRETS_MANAGER", "AWS_PROFILE", "AWS_DEFAULT_REGION", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
		"AWS_ACCESS_KEY", "AWS_SECRET_KEY", "AWS_SESSION_TOKEN", "AWS_ACCOUNT_ID",
	} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

func TestDynamoDBChecksumFollowsEndpointOverride(t *testing.T) {
	tests := []struct {
		name         string
		env          map[string]string
		wantEndpoint string
		wantDisabled bool
	}{
		{"no override keeps checksum validation", nil, "", false},
		{"service override", map[string]string{"AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:8000"}, "http://127.0.0.1:8000", true},
		{"global override", map[string]string{"AWS_ENDPOINT_URL": "http://127.0.0.1:4566"}, "http://127.0.0.1:4566", true},
		{"other service override only", map[string]string{"AWS_ENDPOINT_URL_SQS": "http://127.0.0.1:4566"}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			isolate(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			cfg, err := FromEnv()
			if err != nil {
				t.Fatal(err)
			}
			opts := DynamoDB(cfg).Options()
			got := ""
			if opts.BaseEndpoint != nil {
				got = *opts.BaseEndpoint
			}
			if got != tt.wantEndpoint || opts.DisableValidateResponseChecksum != tt.wantDisabled {
				t.Fatalf("endpoint %q checksum-off %v, want %q %v", got, opts.DisableValidateResponseChecksum, tt.wantEndpoint, tt.wantDisabled)
			}
		})
	}
}

// TestClientsCallTheConfiguredEndpoints sends one real request per client
// and checks that each reaches the server named by its own variable.
func TestClientsCallTheConfiguredEndpoints(t *testing.T) {
	isolate(t)
	var hits [3]atomic.Int32
	servers := make([]*httptest.Server, 3)
	for i := range servers {
		servers[i] = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			hits[i].Add(1)
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			_, _ = w.Write([]byte(`{}`))
		}))
		t.Cleanup(servers[i].Close)
	}
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", servers[0].URL)
	t.Setenv("AWS_ENDPOINT_URL_SQS", servers[1].URL)
	t.Setenv("AWS_ENDPOINT_URL_EVENTBRIDGE", servers[2].URL)
	cfg, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// The answers are empty objects without a CRC32 header, as an emulator
	// sends them; only where the requests went matters for SQS and
	// EventBridge.
	if _, err := DynamoDB(cfg).ListTables(ctx, &dynamodb.ListTablesInput{}); err != nil {
		t.Errorf("DynamoDB ListTables: %v", err)
	}
	_, _ = SQS(cfg).ListQueues(ctx, &sqs.ListQueuesInput{})
	_, _ = EventBridge(cfg).ListEventBuses(ctx, &eventbridge.ListEventBusesInput{})
	for i, name := range []string{"DynamoDB", "SQS", "EventBridge"} {
		if hits[i].Load() == 0 {
			t.Errorf("%s request did not reach its endpoint", name)
		}
	}
}
