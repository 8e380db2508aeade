package handler

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/adapters/quarantine"
	"github.com/localeflow/localeflow/adapters/secretkey"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/internal/emf"
	"github.com/localeflow/localeflow/internal/remotecall"
)

// TestStepMetrics: the dashboard's evidence and delivery outcomes had no
// metric behind them. Each release step writes EvidenceSteps or
// DeliverySteps by outcome and, for an error, the failures metric by code.
func TestStepMetrics(t *testing.T) {
	var buf bytes.Buffer
	h := &Handler{metrics: emf.NewWriter(&buf, "dep-a", func() time.Time { return time.UnixMilli(1_764_460_800_000) })}
	h.stepMetrics(context.Background(), KindRun, release.Outcome{EventID: "evt-1", Status: release.OutcomeApproved}, nil)
	h.stepMetrics(context.Background(), KindRun, release.Outcome{}, core.Fail("evidence.http_400"))
	h.stepMetrics(context.Background(), KindDeliver, release.Outcome{EventID: "evt-1", Status: release.OutcomeDelivered}, nil)
	h.stepMetrics(context.Background(), KindDeliver, release.Outcome{}, errors.New("not a coded error"))
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	want := []struct {
		names []string
		has   []string
	}{
		{[]string{contract.MetricEvidenceSteps}, []string{`"State":"approved"`}},
		{[]string{contract.MetricEvidenceSteps, contract.MetricEvidenceFailures}, []string{`"State":"error"`, `"Code":"evidence.http_400"`}},
		{[]string{contract.MetricDeliverySteps}, []string{`"State":"delivered"`}},
		{[]string{contract.MetricDeliverySteps, contract.MetricDeliveryFailures}, []string{`"State":"error"`, `"Code":"unknown"`}},
	}
	if len(lines) != len(want) {
		t.Fatalf("lines %q", lines)
	}
	var emitted []string
	for i, w := range want {
		names, err := emf.Names([]byte(lines[i]))
		if err != nil || !slices.Equal(names, w.names) {
			t.Fatalf("line %d names %v (%v), want %v", i, names, err, w.names)
		}
		emitted = append(emitted, names...)
		for _, s := range append(w.has, `"Deployment":"dep-a"`) {
			if !strings.Contains(lines[i], s) {
				t.Errorf("%s lacks %s", lines[i], s)
			}
		}
		if strings.Contains(lines[i], "evt-1") {
			t.Errorf("metric line carries the event id: %s", lines[i])
		}
	}
	rejected, err := emf.Names(quarantine.MetricLine("dep-a", "coordinator", "x.y", time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	emitted = append(emitted, rejected...)
	// The remote calls' latencies: one document per invocation
	// (internal/remotecall, wrapped around Handle in main.go), the kinds
	// this function's adapters measure.
	rctx, rec := remotecall.With(context.Background())
	remotecall.Observe(rctx, remotecall.KindCMSDelivery, "req-1", time.Millisecond)
	remotecall.Observe(rctx, remotecall.KindEvidence, "req-1", time.Millisecond)
	for _, line := range rec.Lines(rctx, "dep-a", 1) {
		emitted = append(emitted, mustNamesOf(t, line)...)
	}
	reload, err := emf.Names(secretkey.MetricLine("dep-a", "coordinator", "event", time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	emitted = append(emitted, reload...)
	for name, fns := range contract.Metrics {
		if slices.Contains(fns, "coordinator") != slices.Contains(emitted, name) {
			t.Errorf("metric %s: topology says coordinator emits it: %v; emitted: %v", name, slices.Contains(fns, "coordinator"), slices.Contains(emitted, name))
		}
	}
}

func mustNamesOf(t *testing.T, line []byte) []string {
	t.Helper()
	names, err := emf.Names(line)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestStepMetricsOneDocumentPerInvocation: the coordinator wrote one EMF
// line per release step (issue 28). Within an invocation's scope (Handle,
// HandleSQS) the steps are summed: one document per distinct kind, state
// and code, written when the scope ends, the counts summing to the steps.
func TestStepMetricsOneDocumentPerInvocation(t *testing.T) {
	var buf bytes.Buffer
	h := &Handler{metrics: emf.NewWriter(&buf, "dep-a", nil)}
	ctx, flush := h.metrics.Scope(context.Background())
	for range 5 {
		h.stepMetrics(ctx, KindRun, release.Outcome{Status: release.OutcomeWaiting}, nil)
	}
	h.stepMetrics(ctx, KindDeliver, release.Outcome{}, core.Fail("cms.http_503"))
	h.stepMetrics(ctx, KindDeliver, release.Outcome{}, core.Fail("cms.http_503"))
	if buf.Len() != 0 {
		t.Fatalf("written before the invocation ended: %q", buf.String())
	}
	flush()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines %q, want 2", lines)
	}
	for i, has := range [][]string{
		{`"EvidenceSteps":5`, `"State":"waiting"`},
		{`"DeliverySteps":2`, `"DeliveryFailures":2`, `"State":"error"`, `"Code":"cms.http_503"`},
	} {
		if _, err := emf.Names([]byte(lines[i])); err != nil {
			t.Fatal(err)
		}
		for _, s := range has {
			if !strings.Contains(lines[i], s) {
				t.Errorf("%s lacks %s", lines[i], s)
			}
		}
	}
}
