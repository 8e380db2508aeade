package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/localeflow/localeflow/adapters/monitordb"
	"github.com/localeflow/localeflow/core/health/healthtest"
	"github.com/localeflow/localeflow/dev/localtest"
	"github.com/localeflow/localeflow/dev/rietest"
)

// TestBootstrapUnderRIE runs the real Lambda binary (built as for
// deployment) under aws-lambda-rie against the local stack: a Function URL
// request answers 503 with the document while a record is failed, and the
// scheduled event writes the EMF line to the function's stdout.
func TestBootstrapUnderRIE(t *testing.T) {
	localtest.Require(t)
	bin := rietest.Build(t)
	topo, res := localtest.Stack(t)
	store, err := monitordb.New(localtest.DynamoDB(t), topo.Monitor.Name)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.Create(context.Background(), healthtest.MonitorRecord("evt-rie-failed", healthtest.Failed, base)); err != nil {
		t.Fatal(err)
	}

	fn := bin.Start(t,
		envMonitorTable+"="+res.MonitorTable, envReleaseTable+"="+res.ReleaseTable, envEventBus+"="+res.BusName,
		"AWS_LAMBDA_FUNCTION_TIMEOUT=30")

	var resp events.LambdaFunctionURLResponse
	out := fn.Invoke(t, rietest.ReadFile(t, "testdata/url_get_json.json"))
	if err := json.Unmarshal(out, &resp); err != nil || resp.StatusCode != 503 || !strings.Contains(resp.Body, `"status":"blocked"`) ||
		!strings.Contains(resp.Body, `"schema":"localeflow.health.v1"`) {
		t.Fatalf("URL response %s (%v)", out, err)
	}
	out = fn.Invoke(t, rietest.ReadFile(t, "testdata/scheduled.json"))
	if !strings.Contains(string(out), `"status":"blocked"`) {
		t.Fatalf("scheduled response %s", out)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(string(fn.Logs(t)), `"HealthBlocked":1`) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if logs := string(fn.Logs(t)); !strings.Contains(logs, `"HealthBlocked":1`) || !strings.Contains(logs, `"Namespace":"Localeflow"`) {
		t.Fatal("no EMF line on the function's stdout")
	}
}
