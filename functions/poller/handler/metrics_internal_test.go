package handler

import (
	"bytes"
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/adapters/quarantine"
	"github.com/localeflow/localeflow/adapters/secretkey"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/internal/emf"
	"github.com/localeflow/localeflow/internal/remotecall"
)

// TestHintedEarlyFailureCountsInPollFailures (issue 39 finding 4): a hinted
// poll that met a 503 before the regular poll time leaves the change
// watching with no last_error_code (the failure is not counted against the
// change), and it was written as a poll without a failure: a CMS outage met
// only by hinted polls did not show in PollFailures.
func TestHintedEarlyFailureCountsInPollFailures(t *testing.T) {
	var buf bytes.Buffer
	h := &Handler{metrics: emf.NewWriter(&buf, "dep-a", func() time.Time { return time.UnixMilli(1_764_460_800_000) })}
	out := monitor.Outcome{EventID: "evt-1", State: monitor.StateWatching, FailureCode: "cms.http_503", Polled: true}
	h.pollMetrics(context.Background(), out)
	names, err := emf.Names(bytes.TrimSpace(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(names, contract.MetricPollFailures) || !strings.Contains(buf.String(), `"Code":"cms.http_503"`) {
		t.Fatalf("hinted early 503 not in PollFailures: %s", buf.String())
	}
}

// TestPollMetrics: the dashboard's polls, outcomes and failures by code had
// no metric behind them. Every finished poll (afterPoll) writes Polls by
// state and, for a failed poll, PollFailures by code; a message that
// polled nothing writes none.
func TestPollMetrics(t *testing.T) {
	var buf bytes.Buffer
	h := &Handler{metrics: emf.NewWriter(&buf, "dep-a", func() time.Time { return time.UnixMilli(1_764_460_800_000) })}
	ctx := context.Background()
	if err := h.afterPoll(ctx, monitor.Outcome{EventID: "evt-1", State: monitor.StateFailed, ErrorCode: "cms.http_503", FailureCode: "cms.http_503", Polled: true}, false); err != nil {
		t.Fatal(err)
	}
	if err := h.afterPoll(ctx, monitor.Outcome{EventID: "evt-2", State: monitor.StateLeased}, false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 1 {
		t.Fatalf("lines %q, want one (the unpolled outcome writes none)", lines)
	}
	names, err := emf.Names([]byte(lines[0]))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{contract.MetricPolls, contract.MetricPollFailures}; !reflect.DeepEqual(names, want) {
		t.Fatalf("names %v, want %v", names, want)
	}
	for _, s := range []string{`"State":"failed"`, `"Code":"cms.http_503"`, `"Deployment":"dep-a"`} {
		if !strings.Contains(lines[0], s) {
			t.Errorf("%s lacks %s", lines[0], s)
		}
	}
	if strings.Contains(lines[0], "evt-1") {
		t.Errorf("metric line carries the event id: %s", lines[0])
	}
	// Every metric the topology assigns to the poller is emitted by it.
	emitted := append(names, mustNames(t, quarantine.MetricLine("dep-a", "poller", "x.y", time.Now()))...)
	// The remote calls' latencies: one document per invocation
	// (internal/remotecall, wrapped around Handle in main.go), the kinds
	// this function's adapters measure.
	rctx, rec := remotecall.With(context.Background())
	remotecall.Observe(rctx, remotecall.KindCMSLifecycle, "req-1", time.Millisecond)
	for _, line := range rec.Lines(rctx, "dep-a", 1) {
		emitted = append(emitted, mustNamesOf(t, line)...)
	}
	emitted = append(emitted, mustNames(t, secretkey.MetricLine("dep-a", "poller", "cms", time.Now()))...)
	for name, fns := range contract.Metrics {
		if slices.Contains(fns, "poller") != slices.Contains(emitted, name) {
			t.Errorf("metric %s: topology says poller emits it: %v; emitted: %v", name, slices.Contains(fns, "poller"), slices.Contains(emitted, name))
		}
	}
}

func mustNames(t *testing.T, line []byte) []string {
	t.Helper()
	names, err := emf.Names(line)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func mustNamesOf(t *testing.T, line []byte) []string {
	t.Helper()
	names, err := emf.Names(line)
	if err != nil {
		t.Fatal(err)
	}
	return names
}
