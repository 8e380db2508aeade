package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/localeflow/localeflow/adapters/cms/cmstest"
	"github.com/localeflow/localeflow/adapters/monitordb"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/dev/localtest"
	"github.com/localeflow/localeflow/dev/rietest"
)

// TestIntegrationBootstrapUnderRIE runs the real Lambda binary (built as
// for deployment) under aws-lambda-rie against the local stack: an SQS
// intake batch registers the testdata change, a scheduled event sweeps
// (with a 1 ms sweep grace) and polls it against the signed test CMS until it is terminal.
func TestIntegrationBootstrapUnderRIE(t *testing.T) {
	localtest.Require(t)
	bin := rietest.Build(t)
	_, res := localtest.Stack(t)

	key := []byte("localeflow-cms-test-key-00000001")
	fake := cmstest.New(key)
	fake.Put(cmstest.Change{EventID: "evt-poller-0001", SiteID: "site-berlin", PlanID: "plan-42",
		WebsiteVersion: "v2026.11.29", SourceSequence: 7, RequiredLocales: []string{"de-DE", "fr-FR"}})
	fake.Script("evt-poller-0001", cmstest.StatusStep("published"))
	srv := fake.Start()
	defer srv.Close()

	fn := bin.Start(t,
		envMonitorTable+"="+res.MonitorTable,
		envPollQueueURL+"="+res.PollQueue.URL,
		envEventBus+"="+res.BusName,
		envCMSBaseURL+"="+srv.URL, "LOCALEFLOW_ALLOW_INSECURE_HTTP=1",
		envCMSKeyHex+"="+hex.EncodeToString(key),
		// The key that signed testdata/sqs_intake.json's dispatch details.
		envEventKeyHex+"="+hex.EncodeToString([]byte("localeflow-event-test-key-000001")),
		// Those details are v1-signed: v1 is refused unless accepted.
		envEventV1+"=accept",
		envCMSTimeout+"=2s",
		// The sweep below runs right after registering: with the default
		// grace (30 s) it would leave the change to its queued message.
		envSweepGrace+"=1ms",
		"AWS_LAMBDA_FUNCTION_TIMEOUT=60",
	)

	out := fn.Invoke(t, rietest.ReadFile(t, "testdata/sqs_intake.json"))
	var sqsResp struct {
		BatchItemFailures []any `json:"batchItemFailures"`
	}
	if err := json.Unmarshal(out, &sqsResp); err != nil || sqsResp.BatchItemFailures == nil || len(sqsResp.BatchItemFailures) != 0 {
		t.Fatalf("intake response %s (%v)", out, err)
	}
	out = fn.Invoke(t, rietest.ReadFile(t, "testdata/scheduled.json"))
	var sweep struct {
		Polled   int `json:"polled"`
		Terminal int `json:"terminal"`
	}
	if err := json.Unmarshal(out, &sweep); err != nil || sweep.Polled != 1 || sweep.Terminal != 1 {
		t.Fatalf("sweep response %s (%v)", out, err)
	}

	store, err := monitordb.New(localtest.DynamoDB(t), res.MonitorTable)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := monitor.NewService(store, core.SystemClock{}, nil, monitor.Config{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := svc.Status(context.Background(), "evt-poller-0001")
	if err != nil || st.State != monitor.StateTerminal || st.RemoteStatus != "published" {
		t.Fatalf("status %+v %v", st, err)
	}
	if logs := fn.Logs(t); bytes.Contains(logs, []byte(hex.EncodeToString(key))) || bytes.Contains(logs, []byte("/de/preise")) {
		t.Fatal("function logs carry the key or change content")
	}
}
