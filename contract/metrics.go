package contract

// The functions' custom metrics (CloudWatch Embedded Metric Format log
// lines): the one list of names the functions emit and the stack's
// dashboard and alarms select. Every series carries the dimension
// MetricDeploymentDimension = the resource prefix.
const (
	MetricNamespace           = "Localeflow"
	MetricDeploymentDimension = "Deployment"
	// Further dimensions.
	MetricFunctionDimension = "Function"
	MetricCodeDimension     = "Code"
	MetricStateDimension    = "State"
	// MetricKeyDimension names a key set ("event", "cms", "evidence",
	// "approval", "publication").
	MetricKeyDimension = "Key"
)

// Health metrics (the health function, one line per check; dimension set
// [Deployment]).
const (
	MetricHealthBlocked         = "HealthBlocked"
	MetricHealthCheckFailed     = "HealthCheckFailed"
	MetricInvalidRecords        = "InvalidRecords"
	MetricMonitorPending        = "MonitorPending"
	MetricMonitorLeased         = "MonitorLeased"
	MetricMonitorWatching       = "MonitorWatching"
	MetricMonitorRetryWait      = "MonitorRetryWait"
	MetricMonitorFailed         = "MonitorFailed"
	MetricMonitorDue            = "MonitorDue"
	MetricMonitorExpiredLeases  = "MonitorExpiredLeases"
	MetricMonitorRemoteFailures = "MonitorRemoteFailures"
	// MetricOldestDueSeconds is the age of the oldest due record (monitor,
	// evidence, delivery or release entry): how far the work is behind.
	// Its unit is Seconds (MetricUnits); every other metric is a Count.
	MetricOldestDueSeconds      = "OldestDueSeconds"
	MetricEvidenceOpen          = "EvidenceOpen"
	MetricEvidenceDue           = "EvidenceDue"
	MetricEvidenceExpiredLeases = "EvidenceExpiredLeases"
	MetricEvidenceFailed        = "EvidenceFailed"
	MetricDeliveryOpen          = "DeliveryOpen"
	MetricDeliveryDue           = "DeliveryDue"
	MetricDeliveryExpiredLeases = "DeliveryExpiredLeases"
	MetricDeliveryFailed        = "DeliveryFailed"
	// Severity of a blocked verdict (0/1): blocked by a reason the
	// on-call must act on (operations), by an outcome another team owns
	// (business: the CMS failed the change, a job failed upstream), by an
	// age reason (core/health.Severity).
	MetricHealthBlockedOperations = "HealthBlockedOperations"
	MetricHealthBlockedBusiness   = "HealthBlockedBusiness"
	// Age signals (Seconds): the oldest open change (monitor record) and
	// the oldest open release record; a count of records about to expire
	// unfinished.
	MetricOldestOpenChangeSeconds   = "OldestOpenChangeSeconds"
	MetricOldestOpenReleaseSeconds  = "OldestOpenReleaseSeconds"
	MetricRecordsExpiringUnfinished = "RecordsExpiringUnfinished"
)

// Work metrics. Polls, PollFailures and the step metrics are summed over
// an invocation: one EMF document per distinct set of dimension values
// when the invocation returns (emf.Writer.Scope); MessagesRejected and
// KeyReloadFailures are one line per event.
const (
	// MetricMessagesRejected: a consumer quarantined a message (poller,
	// coordinator; [Deployment, Function], [Deployment, Function, Code]).
	MetricMessagesRejected = "MessagesRejected"
	// MetricPolls: a finished poll ([Deployment], [Deployment, State]:
	// the state the poll left the change in).
	MetricPolls = "Polls"
	// MetricPollFailures: a poll that failed ([Deployment],
	// [Deployment, Code]).
	MetricPollFailures = "PollFailures"
	// MetricEvidenceSteps and MetricDeliverySteps: a release step of the
	// coordinator (evidence: run; delivery: deliver) ([Deployment],
	// [Deployment, State]: its outcome, or "error").
	MetricEvidenceSteps = "EvidenceSteps"
	MetricDeliverySteps = "DeliverySteps"
	// MetricEvidenceFailures and MetricDeliveryFailures: a step that ended
	// with an error ([Deployment], [Deployment, Code]).
	MetricEvidenceFailures = "EvidenceFailures"
	MetricDeliveryFailures = "DeliveryFailures"
	// MetricKeyReloadFailures: a key set's secret could not be read again
	// or holds a malformed set; the previous set stays in use
	// ([Deployment, Function], [Deployment, Function, Key]).
	MetricKeyReloadFailures = "KeyReloadFailures"
)

// Remote call latency (one document per invocation, internal/remotecall;
// [Deployment]; unit Milliseconds, one value per call).
const (
	MetricCMSLifecycleLatency = "CMSLifecycleLatency"
	MetricCMSDeliveryLatency  = "CMSDeliveryLatency"
	MetricEvidenceLatency     = "EvidenceLatency"
)

// Metrics maps each custom metric to the functions (Function constants,
// topology's Function.Dir) that emit it.
var Metrics = map[string][]string{
	MetricHealthBlocked: {FunctionHealth}, MetricHealthCheckFailed: {FunctionHealth}, MetricInvalidRecords: {FunctionHealth},
	MetricMonitorPending: {FunctionHealth}, MetricMonitorLeased: {FunctionHealth}, MetricMonitorWatching: {FunctionHealth},
	MetricMonitorRetryWait: {FunctionHealth}, MetricMonitorFailed: {FunctionHealth}, MetricMonitorDue: {FunctionHealth},
	MetricMonitorExpiredLeases: {FunctionHealth}, MetricMonitorRemoteFailures: {FunctionHealth}, MetricOldestDueSeconds: {FunctionHealth},
	MetricEvidenceOpen: {FunctionHealth}, MetricEvidenceDue: {FunctionHealth}, MetricEvidenceExpiredLeases: {FunctionHealth},
	MetricEvidenceFailed: {FunctionHealth}, MetricDeliveryOpen: {FunctionHealth}, MetricDeliveryDue: {FunctionHealth},
	MetricDeliveryExpiredLeases: {FunctionHealth}, MetricDeliveryFailed: {FunctionHealth},
	MetricHealthBlockedOperations: {FunctionHealth}, MetricHealthBlockedBusiness: {FunctionHealth},
	MetricOldestOpenChangeSeconds: {FunctionHealth}, MetricOldestOpenReleaseSeconds: {FunctionHealth},
	MetricRecordsExpiringUnfinished: {FunctionHealth},
	MetricMessagesRejected:          {FunctionPoller, FunctionCoordinator},
	MetricPolls:                     {FunctionPoller}, MetricPollFailures: {FunctionPoller},
	MetricEvidenceSteps: {FunctionCoordinator}, MetricDeliverySteps: {FunctionCoordinator},
	MetricEvidenceFailures: {FunctionCoordinator}, MetricDeliveryFailures: {FunctionCoordinator},
	MetricCMSLifecycleLatency: {FunctionPoller}, MetricCMSDeliveryLatency: {FunctionCoordinator}, MetricEvidenceLatency: {FunctionCoordinator},
	MetricKeyReloadFailures: {FunctionPoller, FunctionCoordinator},
}

// MetricUnits are the CloudWatch units of the metrics that are not a Count.
var MetricUnits = map[string]string{
	MetricOldestDueSeconds:         "Seconds",
	MetricOldestOpenChangeSeconds:  "Seconds",
	MetricOldestOpenReleaseSeconds: "Seconds",
	MetricCMSLifecycleLatency:      "Milliseconds",
	MetricCMSDeliveryLatency:       "Milliseconds",
	MetricEvidenceLatency:          "Milliseconds",
}

// MetricUnit is the CloudWatch unit of metric name: MetricUnits, else
// Count.
func MetricUnit(name string) string {
	if u, ok := MetricUnits[name]; ok {
		return u
	}
	return "Count"
}
