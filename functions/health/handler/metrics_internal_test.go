package handler

import (
	"slices"
	"strings"
	"testing"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/health"
	"github.com/localeflow/localeflow/internal/emf"
)

// TestHealthMetricNames: the health function emits exactly the metrics
// topology assigns to it, among them OldestDueSeconds (the dashboard's
// oldest due age had no metric): the age of the oldest due record.
func TestHealthMetricNames(t *testing.T) {
	const now = 1_764_460_800_000
	r := health.Report{Status: health.StatusOK, CheckedAtMS: now, Items: []health.Item{
		{Kind: health.KindMonitor, EventID: "evt-1", Due: true, NextDueMS: now - 90_000},
		{Kind: health.KindEvidence, EventID: "evt-2", Due: true, NextDueMS: now - 30_000},
		{Kind: health.KindMonitor, EventID: "evt-3", NextDueMS: now - 500_000},
	}}
	line := reportMetrics("dep-a", r)
	names, err := emf.Names(line)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(line), `"OldestDueSeconds":90`) {
		t.Errorf("oldest due age: %s", line)
	}
	// OldestDueSeconds was published with unit Count, so its alarm (in
	// seconds) and the dashboard's axis disagreed with CloudWatch's unit.
	if !strings.Contains(string(line), `{"Name":"OldestDueSeconds","Unit":"Seconds"}`) ||
		!strings.Contains(string(line), `{"Name":"MonitorDue","Unit":"Count"}`) {
		t.Errorf("units: %s", line)
	}
	failed, err := emf.Names(failedMetrics("dep-a", now))
	if err != nil {
		t.Fatal(err)
	}
	emitted := append(names, failed...)
	for name, fns := range contract.Metrics {
		if slices.Contains(fns, "health") != slices.Contains(emitted, name) {
			t.Errorf("metric %s: topology says health emits it: %v; emitted: %v", name, slices.Contains(fns, "health"), slices.Contains(emitted, name))
		}
	}
	for _, n := range emitted {
		if _, ok := contract.Metrics[n]; !ok {
			t.Errorf("health emits %s, which topology does not list", n)
		}
	}
}
