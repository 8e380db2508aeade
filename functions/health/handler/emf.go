package handler

import (
	"encoding/json"

	"github.com/localeflow/localeflow/core/health"
)

// Namespace is the CloudWatch namespace of the health metrics.
const Namespace = "Localeflow"

type emfMetric struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

type emfDirective struct {
	Namespace  string      `json:"Namespace"`
	Dimensions [][]string  `json:"Dimensions"`
	Metrics    []emfMetric `json:"Metrics"`
}

type emfMeta struct {
	Timestamp         int64          `json:"Timestamp"`
	CloudWatchMetrics []emfDirective `json:"CloudWatchMetrics"`
}

// metric is one named value of an EMF line, in a fixed order.
type metric struct {
	name  string
	value int
}

// DefaultDeployment is the Deployment dimension when none is configured
// (the default resource prefix).
const DefaultDeployment = "localeflow"

// emfLine is one CloudWatch Embedded Metric Format document: the metadata
// under "_aws" and every metric value as a top-level member. One dimension,
// Deployment (the resource prefix): one series per metric and deployment,
// so two deployments in one account never share an alarm.
func emfLine(deployment string, timestampMS int64, metrics []metric) []byte {
	if deployment == "" {
		deployment = DefaultDeployment
	}
	doc := map[string]any{"Deployment": deployment}
	directive := emfDirective{Namespace: Namespace, Dimensions: [][]string{{"Deployment"}}}
	for _, m := range metrics {
		directive.Metrics = append(directive.Metrics, emfMetric{Name: m.name, Unit: "Count"})
		doc[m.name] = m.value
	}
	doc["_aws"] = emfMeta{Timestamp: timestampMS, CloudWatchMetrics: []emfDirective{directive}}
	line, err := json.Marshal(doc)
	if err != nil {
		// Only ints and strings: cannot fail.
		return []byte(`{}`)
	}
	return line
}

func boolMetric(b bool) int {
	if b {
		return 1
	}
	return 0
}

// reportMetrics is the EMF line of a report: HealthBlocked plus every
// count. counts.terminal is approximate and not published.
func reportMetrics(deployment string, r health.Report) []byte {
	invalid := 0
	for _, it := range r.Items {
		if it.Invalid {
			invalid++
		}
	}
	m, ev, dl := r.Monitor, r.Release.Evidence, r.Release.Delivery
	return emfLine(deployment, r.CheckedAtMS, []metric{
		{"HealthBlocked", boolMetric(r.Status == health.StatusBlocked)},
		{"HealthCheckFailed", 0},
		{"InvalidRecords", invalid},
		{"MonitorPending", m.Counts["pending"]},
		{"MonitorLeased", m.Counts["leased"]},
		{"MonitorWatching", m.Counts["watching"]},
		{"MonitorRetryWait", m.Counts["retry_wait"]},
		{"MonitorFailed", m.Failed},
		{"MonitorDue", m.Due},
		{"MonitorExpiredLeases", m.ExpiredLeases},
		{"MonitorRemoteFailures", m.RemoteFailures},
		{"EvidenceOpen", ev.Open},
		{"EvidenceDue", ev.Due},
		{"EvidenceExpiredLeases", ev.ExpiredLeases},
		{"EvidenceFailed", ev.Failed},
		{"DeliveryOpen", dl.Open},
		{"DeliveryDue", dl.Due},
		{"DeliveryExpiredLeases", dl.ExpiredLeases},
		{"DeliveryFailed", dl.Failed},
	})
}

// failedMetrics is the EMF line of a check that could not read the tables:
// blocked, so the alarm fires.
func failedMetrics(deployment string, nowMS int64) []byte {
	return emfLine(deployment, nowMS, []metric{{"HealthBlocked", 1}, {"HealthCheckFailed", 1}})
}
