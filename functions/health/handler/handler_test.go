package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/contract/schema/schematest"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/health"
	"github.com/localeflow/localeflow/core/health/healthtest"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/functions/health/handler"
)

const base = int64(1_764_460_800_000)

// reportChecker answers a report evaluated by the real rules, or err.
type reportChecker struct {
	report health.Report
	err    error
}

func (c reportChecker) Check(context.Context) (health.Report, error) { return c.report, c.err }

type published struct {
	detailType string
	detail     []byte
}

type recordingBus struct {
	mu     sync.Mutex
	events []published
	err    error
}

func (b *recordingBus) Publish(_ context.Context, detailType string, detail any) error {
	raw, err := json.Marshal(detail)
	if err != nil {
		return err
	}
	// Every detail health publishes validates against its schema.
	if err := schematest.ValidateDetail(detailType, raw); err != nil {
		panic(err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.events = append(b.events, published{detailType, raw})
	return b.err
}

func okReport() health.Report {
	return health.Evaluate(base+10_000, health.Census{MonitorItemCount: 42, Monitor: []monitor.Record{
		healthtest.MonitorRecord("evt-pending", healthtest.Pending, base),
		healthtest.MonitorRecord("evt-watching", healthtest.Watching, base),
	}, Release: []health.ReleaseRecord{
		{EventID: "evt-watching", SortKey: release.SKDelivery, Delivery: healthtest.Delivery("evt-watching", "retry_wait", base)},
	}})
}

func blockedReport() health.Report {
	tampered := healthtest.MonitorRecord("evt-tampered", healthtest.Watching, base)
	tampered.PlanID = "plan-other"
	return health.Evaluate(base+10_000, health.Census{MonitorItemCount: 1010, Monitor: []monitor.Record{
		healthtest.MonitorRecord("evt-pending", healthtest.Pending, base),
		healthtest.MonitorRecord("evt-failed", healthtest.Failed, base),
		healthtest.MonitorRecord("evt-remote", healthtest.RemoteFailure, base),
		tampered,
	}, Release: []health.ReleaseRecord{
		{EventID: "evt-pending", SortKey: release.SKEvidencePrefix + "req-1", Evidence: healthtest.Evidence("evt-pending", "req-1", "failed", base)},
	}})
}

type bundle struct {
	h       *handler.Handler
	bus     *recordingBus
	metrics *bytes.Buffer
	logs    *bytes.Buffer
}

func setup(t *testing.T, c handler.Checker) bundle {
	t.Helper()
	b := bundle{bus: &recordingBus{}, metrics: &bytes.Buffer{}, logs: &bytes.Buffer{}}
	h, err := handler.New(handler.Config{Checker: c, Bus: b.bus, Metrics: b.metrics,
		Clock: core.ClockFunc(func() time.Time { return core.FromMillis(base + 20_000) }),
		Log:   slog.New(slog.NewJSONHandler(b.logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	b.h = h
	return b
}

func invoke(t *testing.T, h *handler.Handler, file string) ([]byte, error) {
	t.Helper()
	payload, err := os.ReadFile(filepath.Join("..", "testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	return lambda.NewHandler(h.Handle).Invoke(context.Background(), payload)
}

func urlResponse(t *testing.T, h *handler.Handler, file string) events.LambdaFunctionURLResponse {
	t.Helper()
	out, err := invoke(t, h, file)
	if err != nil {
		t.Fatalf("invoke %s: %v", file, err)
	}
	var resp events.LambdaFunctionURLResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("response: %v", err)
	}
	return resp
}

func TestFunctionURLJSON(t *testing.T) {
	tests := []struct {
		name   string
		report health.Report
		status int
		want   string
	}{
		{"ok", okReport(), 200, "ok"},
		{"blocked", blockedReport(), 503, "blocked"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t, reportChecker{report: tc.report})
			resp := urlResponse(t, b.h, "url_get_json.json")
			if resp.StatusCode != tc.status || resp.Headers["Content-Type"] != "application/json" || resp.Headers["Cache-Control"] != "no-store" {
				t.Fatalf("response %d %v", resp.StatusCode, resp.Headers)
			}
			var doc struct {
				Schema      string                 `json:"schema"`
				Status      string                 `json:"status"`
				CheckedAtMS int64                  `json:"checked_at_ms"`
				Monitor     contract.MonitorHealth `json:"monitor"`
				Release     contract.ReleaseHealth `json:"release"`
			}
			dec := json.NewDecoder(strings.NewReader(resp.Body))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&doc); err != nil {
				t.Fatalf("body %s: %v", resp.Body, err)
			}
			if doc.Schema != health.Schema || doc.Status != tc.want || doc.CheckedAtMS != base+10_000 ||
				doc.Monitor.Counts["pending"] != 1 || len(doc.Monitor.Counts) != 6 {
				t.Fatalf("document = %+v", doc)
			}
			if len(b.bus.events) != 0 || b.metrics.Len() != 0 {
				t.Fatal("a URL request published events or metrics")
			}
		})
	}
}

func TestFunctionURLHTML(t *testing.T) {
	b := setup(t, reportChecker{report: blockedReport()})
	resp := urlResponse(t, b.h, "url_get_html.json")
	if resp.StatusCode != 503 || !strings.HasPrefix(resp.Headers["Content-Type"], "text/html") ||
		!strings.Contains(resp.Headers["Content-Security-Policy"], "default-src 'none'") {
		t.Fatalf("response %d %v", resp.StatusCode, resp.Headers)
	}
	for _, want := range []string{
		"localeflow health: blocked", "lifecycle_monitor.state_invalid", "evt-tampered", "evt-failed", "cms.http_503",
		"evt-remote", "terminal (remote failure)", "evidence.http_503", "≈ 1007", "health.monitor.failed",
		"pending (due)", "2025-11-30 00:00:00",
	} {
		if !strings.Contains(resp.Body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(resp.Body, "<script") {
		t.Fatal("page has a script")
	}
}

// TestPageEscapesEverything: whatever a report carries is escaped.
func TestPageEscapesEverything(t *testing.T) {
	r := okReport()
	r.Items = append(r.Items, health.Item{Kind: "monitor", EventID: `<script>alert(1)</script>`, State: "failed",
		ErrorCode: `"><img src=x onerror=alert(1)>`, Attention: true})
	r.Reasons = []string{"<b>x</b>"}
	page, err := handler.RenderPage(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"<script>", "<img", "<b>x"} {
		if bytes.Contains(page, []byte(bad)) {
			t.Fatalf("page contains %q unescaped", bad)
		}
	}
	if !bytes.Contains(page, []byte("&lt;script&gt;alert(1)&lt;/script&gt;")) {
		t.Fatal("escaped id missing")
	}
}

func TestFunctionURLUnavailableAndMethods(t *testing.T) {
	b := setup(t, reportChecker{err: core.Retry(health.CodeUnavailable)})
	resp := urlResponse(t, b.h, "url_get_json.json")
	if resp.StatusCode != 503 || resp.Body != `{"code":"health.unavailable","retryable":true}` {
		t.Fatalf("unavailable: %d %s", resp.StatusCode, resp.Body)
	}
	resp = urlResponse(t, b.h, "url_get_html.json")
	if resp.StatusCode != 503 || !strings.Contains(resp.Body, "localeflow health: unavailable") {
		t.Fatalf("unavailable page: %d %s", resp.StatusCode, resp.Body)
	}
	b = setup(t, reportChecker{report: okReport()})
	resp = urlResponse(t, b.h, "url_post.json")
	if resp.StatusCode != 405 || resp.Headers["Allow"] != "GET, HEAD" {
		t.Fatalf("POST: %d %v", resp.StatusCode, resp.Headers)
	}
	resp = urlResponse(t, b.h, "url_head.json")
	if resp.StatusCode != 200 || resp.Body != "" {
		t.Fatalf("HEAD: %d %q", resp.StatusCode, resp.Body)
	}
}

type emf struct {
	AWS struct {
		Timestamp         int64 `json:"Timestamp"`
		CloudWatchMetrics []struct {
			Namespace  string     `json:"Namespace"`
			Dimensions [][]string `json:"Dimensions"`
			Metrics    []struct {
				Name string `json:"Name"`
				Unit string `json:"Unit"`
			} `json:"Metrics"`
		} `json:"CloudWatchMetrics"`
	} `json:"_aws"`
}

// parseEMF checks one EMF line: every declared metric has a numeric value.
func parseEMF(t *testing.T, line []byte) (emf, map[string]float64) {
	t.Helper()
	var doc emf
	var values map[string]any
	if err := json.Unmarshal(line, &doc); err != nil {
		t.Fatalf("EMF line %s: %v", line, err)
	}
	if err := json.Unmarshal(line, &values); err != nil {
		t.Fatal(err)
	}
	if len(doc.AWS.CloudWatchMetrics) != 1 || doc.AWS.CloudWatchMetrics[0].Namespace != handler.Namespace {
		t.Fatalf("EMF metadata %s", line)
	}
	nums := map[string]float64{}
	for _, m := range doc.AWS.CloudWatchMetrics[0].Metrics {
		v, ok := values[m.Name].(float64)
		if !ok || m.Unit != contract.MetricUnit(m.Name) {
			t.Fatalf("metric %s has no number: %s", m.Name, line)
		}
		nums[m.Name] = v
	}
	return doc, nums
}

func TestScheduled(t *testing.T) {
	t.Run("ok: metrics, no event", func(t *testing.T) {
		b := setup(t, reportChecker{report: okReport()})
		out, err := invoke(t, b.h, "scheduled.json")
		if err != nil || string(out) != `{"status":"ok","reasons":[]}` {
			t.Fatalf("scheduled = %s, %v", out, err)
		}
		doc, m := parseEMF(t, bytes.TrimSpace(b.metrics.Bytes()))
		if doc.AWS.Timestamp != base+10_000 || m["HealthBlocked"] != 0 || m["MonitorPending"] != 1 || m["MonitorWatching"] != 1 ||
			m["MonitorDue"] != 1 || m["DeliveryOpen"] != 1 || m["InvalidRecords"] != 0 {
			t.Fatalf("metrics %v", m)
		}
		if len(b.bus.events) != 0 {
			t.Fatalf("events %v", b.bus.events)
		}
	})
	t.Run("blocked: metrics and one content-free event", func(t *testing.T) {
		b := setup(t, reportChecker{report: blockedReport()})
		out, err := invoke(t, b.h, "scheduled.json")
		if err != nil || !strings.Contains(string(out), `"status":"blocked"`) {
			t.Fatalf("scheduled = %s, %v", out, err)
		}
		_, m := parseEMF(t, bytes.TrimSpace(b.metrics.Bytes()))
		if m["HealthBlocked"] != 1 || m["MonitorFailed"] != 2 || m["MonitorRemoteFailures"] != 1 || m["InvalidRecords"] != 1 || m["EvidenceFailed"] != 1 {
			t.Fatalf("metrics %v", m)
		}
		if len(b.bus.events) != 1 || b.bus.events[0].detailType != contract.DetailHealthBlocked {
			t.Fatalf("events %v", b.bus.events)
		}
		var detail handler.BlockedDetail
		if err := json.Unmarshal(b.bus.events[0].detail, &detail); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(detail.Reasons, monitor.CodeStateInvalid) || detail.Monitor == nil || detail.Monitor.Failed != 2 {
			t.Fatalf("detail %s", b.bus.events[0].detail)
		}
		if bytes.Contains(b.bus.events[0].detail, []byte("evt-")) {
			t.Fatalf("detail names records: %s", b.bus.events[0].detail)
		}
	})
	t.Run("unavailable: blocked metric, event, error", func(t *testing.T) {
		b := setup(t, reportChecker{err: core.Retry(health.CodeUnavailable)})
		if _, err := invoke(t, b.h, "scheduled.json"); err == nil {
			t.Fatal("a failed check succeeded")
		}
		_, m := parseEMF(t, bytes.TrimSpace(b.metrics.Bytes()))
		if m["HealthBlocked"] != 1 || m["HealthCheckFailed"] != 1 {
			t.Fatalf("metrics %v", m)
		}
		if len(b.bus.events) != 1 || !bytes.Contains(b.bus.events[0].detail, []byte(health.CodeUnavailable)) {
			t.Fatalf("events %v", b.bus.events)
		}
	})
	t.Run("bus down: the invocation fails", func(t *testing.T) {
		b := setup(t, reportChecker{report: blockedReport()})
		b.bus.err = errors.New("bus down")
		if _, err := invoke(t, b.h, "scheduled.json"); err == nil {
			t.Fatal("a lost blocked event was not reported")
		}
	})
}

func TestUnknownInvocation(t *testing.T) {
	b := setup(t, reportChecker{report: okReport()})
	for _, file := range []string{"sqs_event.json"} {
		if _, err := invoke(t, b.h, file); err == nil || !strings.Contains(err.Error(), handler.CodeEventInvalid) {
			t.Fatalf("%s: %v", file, err)
		}
	}
	if _, err := lambda.NewHandler(b.h.Handle).Invoke(context.Background(), []byte(`[1,2]`)); err == nil {
		t.Fatal("a JSON array was accepted")
	}
}

func TestFunctionURLHTMLOK(t *testing.T) {
	b := setup(t, reportChecker{report: okReport()})
	resp := urlResponse(t, b.h, "url_get_html.json")
	for _, want := range []string{"localeflow health: ok", "Nothing needs attention.", "Open items (3)", "evt-watching"} {
		if !strings.Contains(resp.Body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if resp.StatusCode != 200 || strings.Contains(resp.Body, "Blocked by") {
		t.Fatalf("ok page: %d", resp.StatusCode)
	}
}

// TestMetricsCarryDeploymentDimension: without a Deployment dimension two
// deployments in one account published one HealthBlocked series, so one
// stack's blocked health raised the other's alarm.
func TestMetricsCarryDeploymentDimension(t *testing.T) {
	for _, tc := range []struct{ deployment, want string }{{"ops-a", "ops-a"}, {"", handler.DefaultDeployment}} {
		metrics := &bytes.Buffer{}
		h, err := handler.New(handler.Config{Checker: reportChecker{report: okReport()}, Bus: &recordingBus{}, Metrics: metrics,
			Clock:      core.ClockFunc(func() time.Time { return core.FromMillis(base + 20_000) }),
			Deployment: tc.deployment})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := invoke(t, h, "scheduled.json"); err != nil {
			t.Fatal(err)
		}
		doc, _ := parseEMF(t, bytes.TrimSpace(metrics.Bytes()))
		var values map[string]any
		if err := json.Unmarshal(bytes.TrimSpace(metrics.Bytes()), &values); err != nil {
			t.Fatal(err)
		}
		dims := doc.AWS.CloudWatchMetrics[0].Dimensions
		if len(dims) != 1 || len(dims[0]) != 1 || dims[0][0] != "Deployment" || values["Deployment"] != tc.want {
			t.Fatalf("deployment %q: dimensions %v, Deployment = %v", tc.deployment, dims, values["Deployment"])
		}
	}
}
