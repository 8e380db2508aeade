package remotecall_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/internal/emf"
	"github.com/localeflow/localeflow/internal/remotecall"
)

// TestOneDocumentPerInvocation: there were no latency metrics for the
// remote calls. An invocation's calls now end in one EMF document (more
// only past 100 calls of a kind), each kind a Milliseconds metric whose
// values are the calls, with the slowest call's kind, duration and request
// id; an invocation without calls writes nothing, and a failed one still
// writes its calls.
func TestOneDocumentPerInvocation(t *testing.T) {
	var out bytes.Buffer
	h := remotecall.Wrap(func(ctx context.Context, n int) (string, error) {
		for i := range n {
			remotecall.Observe(ctx, remotecall.KindCMSLifecycle, fmt.Sprintf("req-%d", i), time.Duration(10+i)*time.Millisecond)
		}
		remotecall.Observe(ctx, remotecall.KindEvidence, "req-ev", 5*time.Millisecond)
		remotecall.Observe(ctx, "unknown", "req-x", time.Hour)
		if n == 3 {
			return "", errors.New("failed")
		}
		return "ok", nil
	}, &out, "dep-a")
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "inv-1"})
	if _, err := h(ctx, 3); err == nil {
		t.Fatal("error lost")
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("%d documents: %s", len(lines), out.String())
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &doc); err != nil {
		t.Fatal(err)
	}
	names, err := emf.Names([]byte(lines[0]))
	if err != nil || strings.Join(names, ",") != contract.MetricCMSLifecycleLatency+","+contract.MetricEvidenceLatency {
		t.Fatalf("names %v, %v", names, err)
	}
	if fmt.Sprint(doc[contract.MetricCMSLifecycleLatency]) != "[10 11 12]" || fmt.Sprint(doc[contract.MetricEvidenceLatency]) != "[5]" ||
		doc["remote_calls"] != float64(4) || doc["slowest_remote"] != remotecall.KindCMSLifecycle || doc["slowest_remote_ms"] != float64(12) ||
		doc["slowest_request_id"] != "req-2" || doc["request_id"] != "inv-1" || doc["Deployment"] != "dep-a" || doc["msg"] != contract.LogRemoteCalls {
		t.Fatalf("document %s", lines[0])
	}
	if !strings.Contains(lines[0], `{"Name":"CMSLifecycleLatency","Unit":"Milliseconds"}`) {
		t.Fatalf("unit: %s", lines[0])
	}
	out.Reset()
	if _, err := h(context.Background(), 250); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 3 {
		t.Fatalf("250 calls in %d documents, want 3 (100 values per array)", len(lines))
	}
	out.Reset()
	quiet := remotecall.Wrap(func(context.Context, int) (int, error) { return 0, nil }, &out, "dep-a")
	if _, err := quiet(context.Background(), 0); err != nil || out.Len() != 0 {
		t.Fatalf("an invocation without calls wrote %q", out.String())
	}
	remotecall.Observe(context.Background(), remotecall.KindCMSLifecycle, "r", time.Second) // no recorder: no effect
}
