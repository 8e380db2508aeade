package contract

// EventSource is the EventBridge `source` of every localeflow event.
const EventSource = "localeflow"

// DeploymentResourcePrefix starts the deployment discriminator: the
// EventBridge `resources` entry DeploymentResource(prefix) that tells one
// deployment's events from another's on a shared bus. It lives in the
// event's envelope, not in the detail, so signed details, their
// signatures and the output schemas are unchanged (an additive, optional
// field of the entry).
const DeploymentResourcePrefix = "localeflow:deployment/"

// DeploymentResource is the `resources` entry naming the deployment with
// resource prefix prefix (LOCALEFLOW_DEPLOYMENT). Every output event
// carries it. On a host bus shared with other deployments the input rules
// route only events that carry it, so a producer there puts
// Resources: [DeploymentResource(prefix)] with each input event; on the
// deployment's own bus it is optional.
func DeploymentResource(prefix string) string { return DeploymentResourcePrefix + prefix }

// Input detail-types: put on the bus by the CMS and the translation
// pipeline, signed (SignedDetail), routed by the topology's rules to the
// functions' queues. No function emits one.
const (
	// DetailChangeDispatched registers a change the CMS accepted for
	// localization (poller); payload: ChangeDispatched.
	DetailChangeDispatched = "localeflow.change.dispatched"
	// DetailPlanAccepted is a change's localization plan (coordinator).
	DetailPlanAccepted = "localeflow.plan.accepted"
	// DetailJobCompleted is one locale job's result (coordinator).
	DetailJobCompleted = "localeflow.job.completed"
	// DetailChangeHint: a CMS says "look now" for one change (ChangeHint,
	// unsigned); the poller polls it through the normal signed poll.
	DetailChangeHint = "localeflow.change.hint"
)

// Output detail-types: put on the bus by the functions.
const (
	// DetailChangeTerminal: poller, ChangeTerminal.
	DetailChangeTerminal = "localeflow.change.terminal"
	// DetailReleaseApproved: coordinator, ReleaseApproved.
	DetailReleaseApproved = "localeflow.release.approved"
	// DetailDeliveryReady and DetailDeliveryDelivered: coordinator,
	// Delivery.
	DetailDeliveryReady     = "localeflow.delivery.ready"
	DetailDeliveryDelivered = "localeflow.delivery.delivered"
	// DetailHealthBlocked: health, HealthBlocked.
	DetailHealthBlocked = "localeflow.health.blocked"
)

// Schema versions of the output event details: every output detail
// carries one in its "schema" member. An additive change (a new optional
// member) keeps the version; consumers ignore members they do not know.
// A change that removes, renames or retypes a member, or changes its
// meaning, is a new version (…v2), announced in docs/design.md.
const (
	SchemaChangeTerminal  = "localeflow.change-terminal.v1"
	SchemaReleaseApproved = "localeflow.release-approved.v1"
	SchemaDelivery        = "localeflow.delivery.v1"
	// SchemaHealthBlocked is core/health.Schema (the health document's).
	SchemaHealthBlocked = "localeflow.health.v1"
)

// InputDetailTypes lists every input detail-type.
var InputDetailTypes = []string{DetailChangeDispatched, DetailPlanAccepted, DetailJobCompleted, DetailChangeHint}

// OutputDetailTypes lists every output detail-type.
var OutputDetailTypes = []string{DetailChangeTerminal, DetailReleaseApproved, DetailDeliveryReady, DetailDeliveryDelivered, DetailHealthBlocked}

// The EventBridge schedule's event (the sweeps and the health check): AWS
// sets this source and detail-type.
const (
	ScheduledEventSource     = "aws.events"
	ScheduledEventDetailType = "Scheduled Event"
)

// SignedDetail is the detail of a signed input event: the payload as a JSON
// string next to its signature. v1 has no timestamp and signs the payload
// bytes; v2 signs "localeflow.event.v2\n" + detail-type + "\n" + timestamp
// + "\n" + payload (package signing).
type SignedDetail struct {
	Payload   string `json:"payload"`
	Timestamp string `json:"timestamp,omitempty"`
	Signature string `json:"signature"`
}

// ChangeHint is the detail of localeflow.change.hint: a CMS saying that
// the lifecycle status of one change changed. It carries no status: the
// poller answers it with its normal signed poll. Exactly these two string
// members, both tokens.
type ChangeHint struct {
	EventID string `json:"event_id"`
	SiteID  string `json:"site_id"`
}

// ChangeTerminal is the detail of localeflow.change.terminal: a monitored
// change reached terminal (the CMS's final status) or failed (monitoring
// gave up). Every key is always present; absent values are null. The event
// is published at least once: consumers dedupe on OutcomeID.
type ChangeTerminal struct {
	// Schema is SchemaChangeTerminal.
	Schema  string `json:"schema"`
	EventID string `json:"event_id"`
	// OutcomeID is stable across re-publishes of one outcome (SHA-256 hex
	// of the event id, the final state and the finishing write's time).
	OutcomeID string `json:"outcome_id"`
	// SiteID and PlanID are null only for a record that failed validation
	// (error_code lifecycle_monitor.state_invalid): its stored identity is
	// not trusted.
	SiteID *string `json:"site_id"`
	PlanID *string `json:"plan_id"`
	// State is the monitor state: "terminal" or "failed".
	State string `json:"state"`
	// RemoteStatus is the CMS status last seen (null before any poll).
	RemoteStatus *string `json:"remote_status"`
	// ErrorCode is the stable code of a failed item.
	ErrorCode *string `json:"error_code"`
	// LifecycleSHA256 hashes the stored lifecycle snapshot.
	LifecycleSHA256 *string `json:"lifecycle_sha256"`
}

// ReleaseApproved is the detail of localeflow.release.approved: one
// locale job of a plan is approved (consumers dedupe on ApprovalID).
type ReleaseApproved struct {
	Schema       string `json:"schema"` // SchemaReleaseApproved
	EventID      string `json:"event_id"`
	PlanID       string `json:"plan_id"`
	JobID        string `json:"job_id"`
	TargetLocale string `json:"target_locale"`
	ApprovalID   string `json:"approval_id"`
}

// Delivery is the detail of localeflow.delivery.ready and
// localeflow.delivery.delivered (consumers dedupe on DeliveryID and
// Status).
type Delivery struct {
	Schema     string `json:"schema"` // SchemaDelivery
	EventID    string `json:"event_id"`
	PlanID     string `json:"plan_id"`
	DeliveryID string `json:"delivery_id"`
	Status     string `json:"status"`
}

// HealthBlocked is the content-free detail of localeflow.health.blocked.
// Monitor and Release are the health document's sections (health.go),
// absent when the check itself failed.
type HealthBlocked struct {
	Schema      string         `json:"schema"`
	CheckedAtMS int64          `json:"checked_at_ms"`
	Reasons     []string       `json:"reasons"`
	Monitor     *MonitorHealth `json:"monitor,omitempty"`
	Release     *ReleaseHealth `json:"release,omitempty"`
}
