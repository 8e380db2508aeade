package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/localeflow/localeflow/dev/rietest"
)

// TestHealthCheckUsesAtMostEightConnections: a check sends its 32 index
// Queries and the DescribeTable at once, and the DynamoDB client opened a
// connection (on AWS a TLS handshake) for each request in flight — 18 on
// the first invoke of a cold start — of which the SDK's idle pool kept 10,
// so every later check opened 8 again. The client now has at most
// maxDynamoDBConns connections (so at most that many requests in flight),
// and a second check reuses them. The transport may replace a connection
// now and then, hence the small allowance on the number opened.
func TestHealthCheckUsesAtMostEightConnections(t *testing.T) {
	var opened, requests, inFlight, maxInFlight atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		now := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := maxInFlight.Load(); now > m && !maxInFlight.CompareAndSwap(m, now); m = maxInFlight.Load() {
		}
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(5 * time.Millisecond) // a round trip, so that requests overlap
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		if r.Header.Get("X-Amz-Target") == "DynamoDB_20120810.DescribeTable" {
			_, _ = w.Write([]byte(`{"Table":{"TableName":"t-monitor","ItemCount":0}}`))
			return
		}
		_, _ = w.Write([]byte(`{"Count":0,"Items":[],"ScannedCount":0}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	for k, v := range map[string]string{
		"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"AWS_ENDPOINT_URL": "", "AWS_ENDPOINT_URL_DYNAMODB": srv.URL, "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "",
	} {
		t.Setenv(k, v)
	}
	env := map[string]string{envMonitorTable: "t-monitor", envReleaseTable: "t-release", envEventBus: "t-bus"}
	h, err := build(context.Background(), func(k string) string { return env[k] }, io.Discard, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	payload := rietest.ReadFile(t, "testdata/url_get_json.json")
	for check := 1; check <= 2; check++ {
		before := requests.Load()
		out, err := h.Handle(context.Background(), payload)
		if err != nil {
			t.Fatal(err)
		}
		if resp, ok := out.(events.LambdaFunctionURLResponse); !ok || resp.StatusCode != http.StatusOK {
			t.Fatalf("check %d answered %#v", check, out)
		}
		if n := requests.Load() - before; n < 33 {
			t.Fatalf("check %d sent %d requests, want the 32 index Queries and the DescribeTable", check, n)
		}
	}
	if got := maxInFlight.Load(); got != maxDynamoDBConns {
		t.Errorf("at most %d requests in flight, want %d", got, maxDynamoDBConns)
	}
	if got := opened.Load(); got > maxDynamoDBConns+2 {
		t.Errorf("two checks opened %d connections, want about %d", got, maxDynamoDBConns)
	}
}
