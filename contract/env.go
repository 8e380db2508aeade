package contract

import "slices"

// Environment variables of the functions. The CDK stack (infra/) and the
// local tools set them; each function's config loader reads exactly the
// variables of its list below (PollerEnv, CoordinatorEnv, HealthEnv), and
// tests check both the loaders and the stack against these lists.
// Durations are Go duration strings ("30s", "10m").
const (
	// Resources (from the topology).
	EnvMonitorTable       = "LOCALEFLOW_MONITOR_TABLE"
	EnvReleaseTable       = "LOCALEFLOW_RELEASE_TABLE"
	EnvPollQueueURL       = "LOCALEFLOW_POLL_QUEUE_URL"
	EnvReleaseQueueURL    = "LOCALEFLOW_RELEASE_QUEUE_URL"
	EnvQuarantineQueueURL = "LOCALEFLOW_QUARANTINE_QUEUE_URL"
	EnvEventBus           = "LOCALEFLOW_EVENT_BUS"
	// EnvDeployment is the resource prefix, the Deployment dimension of
	// every custom metric the functions publish (default localeflow).
	EnvDeployment = "LOCALEFLOW_DEPLOYMENT"

	// Services: https base URLs (http only with EnvAllowInsecureHTTP).
	EnvCMSBaseURL      = "LOCALEFLOW_CMS_BASE_URL"
	EnvEvidenceBaseURL = "LOCALEFLOW_EVIDENCE_BASE_URL"
	// EnvAllowInsecureHTTP "1" lets a function talk to the CMS and the
	// evidence provider over plain http://: local runs only (their fake
	// services listen on 127.0.0.1); a deployed function requires https://.
	EnvAllowInsecureHTTP = "LOCALEFLOW_ALLOW_INSECURE_HTTP"

	// Common settings.
	EnvLogLevel = "LOCALEFLOW_LOG_LEVEL" // DEBUG, INFO (default), WARN, ERROR
	// EnvLambdaLogLevel is Lambda's own log-level control: Lambda sets it
	// from the function's ApplicationLogLevel (TRACE, DEBUG, INFO, WARN,
	// ERROR, FATAL) and drops JSON lines whose "level" is below it. It
	// wins over EnvLogLevel; both set to different levels stop the cold
	// start naming both.
	EnvLambdaLogLevel = "AWS_LAMBDA_LOG_LEVEL"
	// EnvWorkerID is the lease owner id (default <function>-<random>):
	// local runs only. Every instance of a deployed function must own its
	// leases under its own id; one id given to all instances would let two
	// of them hold one lease, so a deployment never sets it.
	EnvWorkerID       = "LOCALEFLOW_WORKER_ID"
	EnvDeadlineMargin = "LOCALEFLOW_DEADLINE_MARGIN"
	EnvCMSTimeout     = "LOCALEFLOW_CMS_TIMEOUT"
	EnvKeyTTL         = "LOCALEFLOW_KEY_TTL" // key sets re-read after (default 5m)
	// Signed input events: the oldest v2 event accepted, and whether v1
	// signatures (no signed time) are accepted: EventV1 values,
	// V1Refuse (the default) or V1Accept while a producer still signs v1.
	EnvEventMaxAge = "LOCALEFLOW_EVENT_MAX_AGE"
	EnvEventV1     = "LOCALEFLOW_EVENT_V1"
	// EnvEventRefuseV1Retired is the retired 0/1 form of EnvEventV1 (it
	// could not be set to accept from the stack's typed settings): the
	// poller and the coordinator refuse to start while it is set, naming
	// EnvEventV1.
	EnvEventRefuseV1Retired = "LOCALEFLOW_EVENT_REFUSE_V1"
	// EnvMonitorRetention: finished monitor records that need no attention
	// expire (DynamoDB TTL) this long after they finished; the
	// coordinator's content-free release records this long after their
	// last write once they need nothing more (default 2160h).
	EnvMonitorRetention = "LOCALEFLOW_MONITOR_RETENTION"

	// Poller settings (core/monitor.Config).
	EnvMonitorLease           = "LOCALEFLOW_MONITOR_LEASE"
	EnvPollInterval           = "LOCALEFLOW_POLL_INTERVAL"
	EnvRetryBaseDelay         = "LOCALEFLOW_RETRY_BASE_DELAY"
	EnvRetryMaxDelay          = "LOCALEFLOW_RETRY_MAX_DELAY"
	EnvMaxConsecutiveFailures = "LOCALEFLOW_MAX_CONSECUTIVE_FAILURES"
	EnvHintMinGap             = "LOCALEFLOW_HINT_MIN_GAP"
	EnvPollConcurrency        = "LOCALEFLOW_POLL_CONCURRENCY"
	// EnvSweepGrace is how long past its wake time a due change is left
	// to its queued message before the poller's sweep claims it
	// (core/monitor.Config.SweepGrace: default 30s, whole milliseconds in
	// (0, 900s]; docs/design.md "The sweep's grace period").
	EnvSweepGrace = "LOCALEFLOW_SWEEP_GRACE"

	// Health settings (core/health.Limits): a change open for longer than
	// EnvHealthMaxChangeAge (default 336h), an open release record older
	// than EnvHealthMaxReleaseAge (default 168h), a record still owing
	// work whose TTL expiry is within EnvHealthExpiryWarning (default
	// 336h) block health with an age reason; whole seconds in (0, 8760h].
	EnvHealthMaxChangeAge  = "LOCALEFLOW_HEALTH_MAX_CHANGE_AGE"
	EnvHealthMaxReleaseAge = "LOCALEFLOW_HEALTH_MAX_RELEASE_AGE"
	EnvHealthExpiryWarning = "LOCALEFLOW_HEALTH_EXPIRY_WARNING"

	// Coordinator settings (core/release.Config).
	EnvEvidenceRevision    = "LOCALEFLOW_EVIDENCE_REVISION"
	EnvEvidenceLease       = "LOCALEFLOW_EVIDENCE_LEASE"
	EnvEvidenceMaxAttempts = "LOCALEFLOW_EVIDENCE_MAX_ATTEMPTS"
	EnvEvidenceTimeout     = "LOCALEFLOW_EVIDENCE_TIMEOUT"
	EnvApprovalTTL         = "LOCALEFLOW_APPROVAL_TTL"
	EnvDeliveryMaxAttempts = "LOCALEFLOW_DELIVERY_MAX_ATTEMPTS"
	// EnvTextRetention keeps source and result texts after the release is
	// delivered or blocked for good (default 168h).
	EnvTextRetention = "LOCALEFLOW_TEXT_RETENTION"
	// The receipt issuers' Ed25519 public keys ("issuer=<64 hex>,..."), one
	// variable per receipt kind: the coordinator trusts each issuer for its
	// own kind only.
	EnvReceiptIssuersQuality           = "LOCALEFLOW_RECEIPT_ISSUERS_QUALITY"
	EnvReceiptIssuersHumanReview       = "LOCALEFLOW_RECEIPT_ISSUERS_HUMAN_REVIEW"
	EnvReceiptIssuersIndependentReview = "LOCALEFLOW_RECEIPT_ISSUERS_INDEPENDENT_REVIEW"
	// EnvReceiptIssuersRetired is the retired single issuer set for every
	// receipt kind: the coordinator refuses to start while it is set.
	EnvReceiptIssuersRetired = "LOCALEFLOW_RECEIPT_ISSUERS"
)

// EventV1 is a value of EnvEventV1: whether the consumers accept input
// events signed with the original (v1) scheme, which signs no time (a
// replayed v1 event is accepted at any age, so registration is idempotent
// only for the records' retention; docs/design.md "Retention and the
// replay window").
type EventV1 string

// The values of EnvEventV1; unset means EventV1Refuse.
const (
	EventV1Refuse EventV1 = "refuse"
	EventV1Accept EventV1 = "accept"
)

// Keys. Each key is read from one of two variables: <stem>_SECRET_ARN, a
// Secrets Manager secret (deployed; the stack sets it), or <stem>_HEX, the
// key in hex (local runs only); exactly one of the two.
const (
	KeyCMS         = "LOCALEFLOW_CMS_KEY"         // HMAC: signed CMS requests and answers
	KeyEvent       = "LOCALEFLOW_EVENT_KEY"       // HMAC: signed input events
	KeyEvidence    = "LOCALEFLOW_EVIDENCE_KEY"    // HMAC: signed evidence requests
	KeyApproval    = "LOCALEFLOW_APPROVAL_KEY"    // Ed25519: approvals
	KeyPublication = "LOCALEFLOW_PUBLICATION_KEY" // Ed25519: delivery bundles

	SecretARNSuffix = "_SECRET_ARN"
	HexSuffix       = "_HEX"
)

// SecretARN is the deployed variable of a key stem.
func SecretARN(stem string) string { return stem + SecretARNSuffix }

// Hex is the local variable of a key stem.
func Hex(stem string) string { return stem + HexSuffix }

// SetBy says who sets a variable a function reads.
type SetBy int

// Who sets a variable.
const (
	// Stack: the CDK stack sets it on the function.
	Stack SetBy = iota + 1
	// Operator: the function has a default and the stack leaves it unset;
	// an operator may set it.
	Operator
	// Local: only local runs set it (key material in hex, plain http, a
	// fixed worker id); a deployed function never has it.
	Local
	// Retired: the function refuses to start while it is set.
	Retired
	// Runtime: Lambda sets it from the function's configuration (not a
	// setting of the stack or the operator).
	Runtime
)

// EnvVar is one variable a function reads.
type EnvVar struct {
	Name  string
	SetBy SetBy
}

// key is a key's two variables.
func key(stem string) []EnvVar {
	return []EnvVar{{SecretARN(stem), Stack}, {Hex(stem), Local}}
}

func concat(lists ...[]EnvVar) []EnvVar {
	var out []EnvVar
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// Functions are the functions' directories under functions/ (topology's
// Function.Dir), the keys of FunctionEnv.
const (
	FunctionPoller      = "poller"
	FunctionCoordinator = "coordinator"
	FunctionHealth      = "health"
)

// PollerEnv is every variable the poller reads.
var PollerEnv = concat([]EnvVar{
	{EnvMonitorTable, Stack}, {EnvPollQueueURL, Stack}, {EnvQuarantineQueueURL, Stack}, {EnvEventBus, Stack},
	{EnvDeployment, Stack}, {EnvCMSBaseURL, Stack},
	{EnvMaxConsecutiveFailures, Stack}, {EnvRetryMaxDelay, Stack}, {EnvMonitorRetention, Stack},
	{EnvSweepGrace, Stack},
	{EnvAllowInsecureHTTP, Local},
	{EnvWorkerID, Local},
	{EnvLogLevel, Operator}, {EnvLambdaLogLevel, Runtime}, {EnvDeadlineMargin, Operator}, {EnvCMSTimeout, Operator},
	{EnvKeyTTL, Operator}, {EnvEventMaxAge, Operator}, {EnvEventV1, Operator}, {EnvEventRefuseV1Retired, Retired},
	{EnvMonitorLease, Operator}, {EnvPollInterval, Operator}, {EnvRetryBaseDelay, Operator},
	{EnvHintMinGap, Operator}, {EnvPollConcurrency, Operator},
}, key(KeyCMS), key(KeyEvent))

// CoordinatorEnv is every variable the coordinator reads.
var CoordinatorEnv = concat([]EnvVar{
	{EnvReleaseTable, Stack}, {EnvReleaseQueueURL, Stack}, {EnvQuarantineQueueURL, Stack}, {EnvEventBus, Stack},
	{EnvDeployment, Stack}, {EnvCMSBaseURL, Stack}, {EnvEvidenceBaseURL, Stack},
	{EnvTextRetention, Stack}, {EnvMonitorRetention, Stack},
	{EnvReceiptIssuersQuality, Stack}, {EnvReceiptIssuersHumanReview, Stack}, {EnvReceiptIssuersIndependentReview, Stack},
	{EnvReceiptIssuersRetired, Retired},
	{EnvAllowInsecureHTTP, Local},
	{EnvWorkerID, Local},
	{EnvLogLevel, Operator}, {EnvLambdaLogLevel, Runtime}, {EnvDeadlineMargin, Operator}, {EnvCMSTimeout, Operator},
	{EnvKeyTTL, Operator}, {EnvEventMaxAge, Operator}, {EnvEventV1, Operator}, {EnvEventRefuseV1Retired, Retired},
	{EnvEvidenceRevision, Operator}, {EnvEvidenceLease, Operator}, {EnvEvidenceMaxAttempts, Operator},
	{EnvEvidenceTimeout, Operator}, {EnvApprovalTTL, Operator}, {EnvDeliveryMaxAttempts, Operator},
}, key(KeyEvent), key(KeyCMS), key(KeyEvidence), key(KeyApproval), key(KeyPublication))

// HealthEnv is every variable the health function reads.
var HealthEnv = []EnvVar{
	{EnvMonitorTable, Stack}, {EnvReleaseTable, Stack}, {EnvEventBus, Stack}, {EnvDeployment, Stack},
	{EnvLogLevel, Operator}, {EnvLambdaLogLevel, Runtime},
	{EnvHealthMaxChangeAge, Operator}, {EnvHealthMaxReleaseAge, Operator}, {EnvHealthExpiryWarning, Operator},
}

// FunctionEnv maps each function (Function constants) to the variables it
// reads.
var FunctionEnv = map[string][]EnvVar{
	FunctionPoller:      PollerEnv,
	FunctionCoordinator: CoordinatorEnv,
	FunctionHealth:      HealthEnv,
}

// Names returns the names of vars set by any of by (all names when by is
// empty), in list order.
func Names(vars []EnvVar, by ...SetBy) []string {
	var out []string
	for _, v := range vars {
		if len(by) == 0 || slices.Contains(by, v.SetBy) {
			out = append(out, v.Name)
		}
	}
	return out
}
