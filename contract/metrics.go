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
	MetricOldestDueSeconds      = "OldestDueSeconds"
	MetricEvidenceOpen          = "EvidenceOpen"
	MetricEvidenceDue           = "EvidenceDue"
	MetricEvidenceExpiredLeases = "EvidenceExpiredLeases"
	MetricEvidenceFailed        = "EvidenceFailed"
	MetricDeliveryOpen          = "DeliveryOpen"
	MetricDeliveryDue           = "DeliveryDue"
	MetricDeliveryExpiredLeases = "DeliveryExpiredLeases"
	MetricDeliveryFailed        = "DeliveryFailed"
)

// Work metrics (one line per poll or release step).
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
)

// Metrics maps each custom metric to the function (topology.Function.Dir)
// that emits it.
var Metrics = map[string][]string{
	MetricHealthBlocked: {"health"}, MetricHealthCheckFailed: {"health"}, MetricInvalidRecords: {"health"},
	MetricMonitorPending: {"health"}, MetricMonitorLeased: {"health"}, MetricMonitorWatching: {"health"},
	MetricMonitorRetryWait: {"health"}, MetricMonitorFailed: {"health"}, MetricMonitorDue: {"health"},
	MetricMonitorExpiredLeases: {"health"}, MetricMonitorRemoteFailures: {"health"}, MetricOldestDueSeconds: {"health"},
	MetricEvidenceOpen: {"health"}, MetricEvidenceDue: {"health"}, MetricEvidenceExpiredLeases: {"health"},
	MetricEvidenceFailed: {"health"}, MetricDeliveryOpen: {"health"}, MetricDeliveryDue: {"health"},
	MetricDeliveryExpiredLeases: {"health"}, MetricDeliveryFailed: {"health"},
	MetricMessagesRejected: {"poller", "coordinator"},
	MetricPolls:            {"poller"}, MetricPollFailures: {"poller"},
	MetricEvidenceSteps: {"coordinator"}, MetricDeliverySteps: {"coordinator"},
	MetricEvidenceFailures: {"coordinator"}, MetricDeliveryFailures: {"coordinator"},
}
