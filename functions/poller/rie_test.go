package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/localeflow/localeflow/adapters/cms/cmstest"
	"github.com/localeflow/localeflow/adapters/monitordb"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/internal/localtest"
)

// TestIntegrationBootstrapUnderRIE runs the real Lambda binary (built as
// for deployment) under aws-lambda-rie against the local stack: an SQS
// intake batch registers the testdata change, a scheduled event sweeps and
// polls it against the signed test CMS until it is terminal.
func TestIntegrationBootstrapUnderRIE(t *testing.T) {
	localtest.Require(t)
	rie := os.Getenv("LOCALEFLOW_RIE")
	if rie == "" {
		t.Skip("LOCALEFLOW_RIE is not set (make test sets it)")
	}
	_, res := localtest.Stack(t)

	dir := t.TempDir()
	bin := filepath.Join(dir, "bootstrap")
	build := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build bootstrap: %v\n%s", err, out)
	}

	key := []byte("localeflow-cms-test-key-00000001")
	fake := cmstest.New(key)
	fake.Put(cmstest.Change{EventID: "evt-poller-0001", SiteID: "site-berlin", PlanID: "plan-42",
		WebsiteVersion: "v2026.11.29", SourceSequence: 7, RequiredLocales: []string{"de-DE", "fr-FR"}})
	fake.Script("evt-poller-0001", cmstest.StatusStep("published"))
	srv := fake.Start()
	defer srv.Close()

	port, apiPort := freePort(t), freePort(t)
	cmd := exec.Command(rie, "--runtime-interface-emulator-address", "127.0.0.1:"+port,
		"--runtime-api-address", "127.0.0.1:"+apiPort, bin)
	cmd.Env = append(os.Environ(),
		envMonitorTable+"="+res.MonitorTable,
		envPollQueueURL+"="+res.PollQueue.URL,
		envEventBus+"="+res.BusName,
		envCMSBaseURL+"="+srv.URL,
		envCMSKeyHex+"="+hex.EncodeToString(key),
		envCMSTimeout+"=2s",
		"AWS_LAMBDA_FUNCTION_TIMEOUT=60",
	)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start rie: %v", err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() || testing.Verbose() {
			t.Logf("rie + bootstrap output:\n%s", logs.String())
		}
	}()
	url := "http://127.0.0.1:" + port + "/2015-03-31/functions/function/invocations"

	out := invokeRIE(t, url, readFile(t, "testdata/sqs_intake.json"))
	var sqsResp struct {
		BatchItemFailures []any `json:"batchItemFailures"`
	}
	if err := json.Unmarshal(out, &sqsResp); err != nil || sqsResp.BatchItemFailures == nil || len(sqsResp.BatchItemFailures) != 0 {
		t.Fatalf("intake response %s (%v)", out, err)
	}
	out = invokeRIE(t, url, readFile(t, "testdata/scheduled.json"))
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
	if bytes.Contains(logs.Bytes(), []byte(hex.EncodeToString(key))) || bytes.Contains(logs.Bytes(), []byte("/de/preise")) {
		t.Fatal("function logs carry the key or change content")
	}
}

func invokeRIE(t *testing.T, url string, payload []byte) []byte {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Post(url, "application/json", bytes.NewReader(payload))
		if err == nil {
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("invoke: http %d %v: %s", resp.StatusCode, err, body)
			}
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("rie did not answer: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
