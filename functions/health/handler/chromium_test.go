package handler_test

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/localeflow/localeflow/core/health"
	"github.com/localeflow/localeflow/core/health/healthtest"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/functions/health/handler"
)

// chromium finds the browser, or skips (fails with
// LOCALEFLOW_REQUIRE_CHROMIUM=1, which make test sets on a root machine
// with apt-get, where its install step provides chromium). Install:
// apt-get install -y chromium.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	if os.Getenv("LOCALEFLOW_REQUIRE_CHROMIUM") == "1" {
		t.Fatal("chromium is not installed (apt-get install -y chromium) and LOCALEFLOW_REQUIRE_CHROMIUM=1")
	}
	t.Skip("chromium is not installed, so the health page browser test is skipped: install it (as root: apt-get install -y chromium); set LOCALEFLOW_REQUIRE_CHROMIUM=1 to make this a failure")
	return ""
}

// artifactsDir is $LOCALEFLOW_ARTIFACTS or <module root>/artifacts
// (git-ignored).
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("LOCALEFLOW_ARTIFACTS")
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		for root := wd; ; root = filepath.Dir(root) {
			if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
				dir = filepath.Join(root, "artifacts")
				break
			}
			if filepath.Dir(root) == root {
				t.Fatal("no go.mod above the test directory")
			}
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// pageReport is a realistic blocked report: open items of every kind, a
// failed poll, a remote failure, a tampered record and a failed evidence
// request.
func pageReport() health.Report {
	tampered := healthtest.MonitorRecord("evt-2025-11-30-0007", healthtest.Watching, base)
	tampered.ChangeSHA256 = strings.Repeat("0", 64)
	recs := []monitor.Record{
		healthtest.MonitorRecord("evt-2025-11-30-0001", healthtest.Pending, base),
		healthtest.MonitorRecord("evt-2025-11-30-0002", healthtest.Watching, base),
		healthtest.MonitorRecord("evt-2025-11-30-0003", healthtest.Leased, base),
		healthtest.MonitorRecord("evt-2025-11-30-0004", healthtest.RetryWait, base),
		healthtest.MonitorRecord("evt-2025-11-30-0005", healthtest.Failed, base),
		healthtest.MonitorRecord("evt-2025-11-30-0006", healthtest.RemoteFailure, base),
		tampered,
	}
	rel := []health.ReleaseRecord{
		{EventID: "evt-2025-11-30-0002", SortKey: release.SKEvidencePrefix + "req-de-DE", Evidence: healthtest.Evidence("evt-2025-11-30-0002", "req-de-DE", "leased", base)},
		{EventID: "evt-2025-11-30-0002", SortKey: release.SKEvidencePrefix + "req-fr-FR", Evidence: healthtest.Evidence("evt-2025-11-30-0002", "req-fr-FR", "failed", base)},
		{EventID: "evt-2025-11-30-0001", SortKey: release.SKDelivery, Delivery: healthtest.Delivery("evt-2025-11-30-0001", "retry_wait", base)},
	}
	return health.Evaluate(base+4_000, health.Census{MonitorItemCount: 1_010, Monitor: recs, Release: rel})
}

// serve answers browser requests through the handler, as the Function URL
// does.
func serve(t *testing.T, h *handler.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := events.LambdaFunctionURLRequest{Headers: map[string]string{}, RawPath: r.URL.Path}
		for k := range r.Header {
			req.Headers[strings.ToLower(k)] = r.Header.Get(k)
		}
		req.RequestContext.HTTP.Method = r.Method
		resp := h.ServeURL(r.Context(), req)
		for k, v := range resp.Headers {
			w.Header().Set(k, v)
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.WriteString(w, resp.Body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func runChromium(t *testing.T, browser string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
		"--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, browser, append(base, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.Bytes()
}

// TestPageInChromium renders the page in headless Chromium: the DOM holds
// every count and attention item, and the screenshot (kept as
// artifacts/health.png) shows the blocked banner in its colour — which
// also proves the Content-Security-Policy allows the page's own style.
func TestPageInChromium(t *testing.T) {
	browser := chromium(t)
	b := setup(t, reportChecker{report: pageReport()})
	srv := serve(t, b.h)

	dom := string(runChromium(t, browser, "--dump-dom", srv.URL+"/"))
	for _, want := range []string{
		"localeflow health: blocked", "Lifecycle monitor", "Quality evidence", "Deliveries",
		"Needing attention (4)", "Open items (6)",
		"evt-2025-11-30-0005", "cms.http_503", "evt-2025-11-30-0006", "terminal (remote failure)",
		"evt-2025-11-30-0007", "invalid record", "lifecycle_monitor.state_invalid",
		"req-fr-FR", "evidence.http_503", "lease ends", "pending (due)",
		"health.monitor.remote_failures", "≈ 1004",
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered DOM lacks %q", want)
		}
	}

	shot := filepath.Join(artifactsDir(t), "health.png")
	_ = os.Remove(shot)
	runChromium(t, browser, "--screenshot="+shot, "--window-size=1200,900", srv.URL+"/")
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1200 || b.Dy() != 900 {
		t.Fatalf("screenshot is %v", b)
	}
	// The banner's background (#b3261e) is applied: the style was allowed.
	r, g, bl, _ := img.At(600, 8).RGBA()
	if got := fmt.Sprintf("%02x%02x%02x", r>>8, g>>8, bl>>8); got != "b3261e" {
		t.Fatalf("banner colour %s, want b3261e (style blocked by the CSP?)", got)
	}
	t.Logf("screenshot: %s", shot)
}
