package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/localeflow/localeflow/adapters/monitordb"
	"github.com/localeflow/localeflow/core/health/healthtest"
	"github.com/localeflow/localeflow/internal/localtest"
)

// TestBootstrapUnderRIE runs the real Lambda binary (built as for
// deployment) under aws-lambda-rie against the local stack: a Function URL
// request answers 503 with the document while a record is failed, and the
// scheduled event writes the EMF line to the function's stdout.
func TestBootstrapUnderRIE(t *testing.T) {
	localtest.Require(t)
	rie := os.Getenv("LOCALEFLOW_RIE")
	if rie == "" {
		t.Skip("LOCALEFLOW_RIE is not set (make test sets it)")
	}
	topo, res := localtest.Stack(t)
	store, err := monitordb.New(localtest.DynamoDB(t), topo.Monitor.Name)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.Create(context.Background(), healthtest.MonitorRecord("evt-rie-failed", healthtest.Failed, base)); err != nil {
		t.Fatal(err)
	}

	bin := filepath.Join(t.TempDir(), "bootstrap")
	build := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build bootstrap: %v\n%s", err, out)
	}
	port, apiPort := rieFreePort(t), rieFreePort(t)
	cmd := exec.Command(rie, "--runtime-interface-emulator-address", "127.0.0.1:"+port,
		"--runtime-api-address", "127.0.0.1:"+apiPort, bin)
	cmd.Env = append(os.Environ(),
		envMonitorTable+"="+res.MonitorTable, envReleaseTable+"="+res.ReleaseTable, envEventBus+"="+res.BusName,
		"AWS_LAMBDA_FUNCTION_TIMEOUT=30")
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

	var resp events.LambdaFunctionURLResponse
	out := rieInvoke(t, url, rieRead(t, "testdata/url_get_json.json"))
	if err := json.Unmarshal(out, &resp); err != nil || resp.StatusCode != 503 || !strings.Contains(resp.Body, `"status":"blocked"`) ||
		!strings.Contains(resp.Body, `"schema":"localeflow.health.v1"`) {
		t.Fatalf("URL response %s (%v)", out, err)
	}
	out = rieInvoke(t, url, rieRead(t, "testdata/scheduled.json"))
	if !strings.Contains(string(out), `"status":"blocked"`) {
		t.Fatalf("scheduled response %s", out)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), `"HealthBlocked":1`) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), `"HealthBlocked":1`) || !strings.Contains(logs.String(), `"Namespace":"Localeflow"`) {
		t.Fatal("no EMF line on the function's stdout")
	}
}

func rieInvoke(t *testing.T, url string, payload []byte) []byte {
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

func rieFreePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
}

func rieRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
