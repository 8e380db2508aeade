package handler

import (
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/health"
	"github.com/localeflow/localeflow/internal/emf"
)

// Namespace is the CloudWatch namespace of the health metrics.
const Namespace = contract.MetricNamespace

// DefaultDeployment is the Deployment dimension when none is configured
// (the default resource prefix).
const DefaultDeployment = emf.DefaultDeployment

// emfLine is one CloudWatch Embedded Metric Format document (internal/emf)
// with one dimension set, [Deployment] (the resource prefix): one series
// per metric and deployment, so two deployments in one account never
// share an alarm.
func emfLine(deployment string, timestampMS int64, metrics []emf.Metric) []byte {
	return emf.Line(deployment, timestampMS, nil, emf.Group{Metrics: metrics})
}

func boolMetric(b bool) int {
	if b {
		return 1
	}
	return 0
}

// reportMetrics is the EMF line of a report: HealthBlocked plus every
// count and the age of the oldest due record. counts.terminal is
// approximate and not published.
func reportMetrics(deployment string, r health.Report) []byte {
	invalid := 0
	var oldestDueMS int64
	for _, it := range r.Items {
		if it.Invalid {
			invalid++
		}
		if it.Due && it.NextDueMS > 0 {
			oldestDueMS = max(oldestDueMS, r.CheckedAtMS-it.NextDueMS)
		}
	}
	m, ev, dl := r.Monitor, r.Release.Evidence, r.Release.Delivery
	return emfLine(deployment, r.CheckedAtMS, []emf.Metric{
		{Name: contract.MetricHealthBlocked, Value: boolMetric(r.Status == health.StatusBlocked)},
		{Name: contract.MetricHealthCheckFailed, Value: 0},
		{Name: contract.MetricInvalidRecords, Value: invalid},
		{Name: contract.MetricMonitorPending, Value: m.Counts["pending"]},
		{Name: contract.MetricMonitorLeased, Value: m.Counts["leased"]},
		{Name: contract.MetricMonitorWatching, Value: m.Counts["watching"]},
		{Name: contract.MetricMonitorRetryWait, Value: m.Counts["retry_wait"]},
		{Name: contract.MetricMonitorFailed, Value: m.Failed},
		{Name: contract.MetricMonitorDue, Value: m.Due},
		{Name: contract.MetricMonitorExpiredLeases, Value: m.ExpiredLeases},
		{Name: contract.MetricMonitorRemoteFailures, Value: m.RemoteFailures},
		{Name: contract.MetricOldestDueSeconds, Value: int(oldestDueMS / 1000)},
		{Name: contract.MetricEvidenceOpen, Value: ev.Open},
		{Name: contract.MetricEvidenceDue, Value: ev.Due},
		{Name: contract.MetricEvidenceExpiredLeases, Value: ev.ExpiredLeases},
		{Name: contract.MetricEvidenceFailed, Value: ev.Failed},
		{Name: contract.MetricDeliveryOpen, Value: dl.Open},
		{Name: contract.MetricDeliveryDue, Value: dl.Due},
		{Name: contract.MetricDeliveryExpiredLeases, Value: dl.ExpiredLeases},
		{Name: contract.MetricDeliveryFailed, Value: dl.Failed},
		{Name: contract.MetricHealthBlockedOperations, Value: boolMetric(r.Blocked(health.SeverityOperations))},
		{Name: contract.MetricHealthBlockedBusiness, Value: boolMetric(r.Blocked(health.SeverityBusiness))},
		{Name: contract.MetricOldestOpenChangeSeconds, Value: int(r.Ages.OldestOpenChangeMS / 1000)},
		{Name: contract.MetricOldestOpenReleaseSeconds, Value: int(r.Ages.OldestOpenReleaseMS / 1000)},
		{Name: contract.MetricRecordsExpiringUnfinished, Value: r.Ages.ExpiringUnfinished},
	})
}

// failedMetrics is the EMF line of a check that could not read the tables:
// blocked for operations (the on-call must look), so the alarm fires.
func failedMetrics(deployment string, nowMS int64) []byte {
	return emfLine(deployment, nowMS, []emf.Metric{{Name: contract.MetricHealthBlocked, Value: 1}, {Name: contract.MetricHealthCheckFailed, Value: 1},
		{Name: contract.MetricHealthBlockedOperations, Value: 1}})
}
