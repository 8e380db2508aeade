package monitor

import "github.com/localeflow/localeflow/core/lifecycle"

// Error codes. They are stable strings and part of the contract
// (docs/design.md "Monitor error codes").
const (
	// Configuration.
	CodeDelayInvalid       = "lifecycle_monitor.delay_invalid"
	CodeLeaseInvalid       = "lifecycle_monitor.lease_invalid"
	CodeMaxFailuresInvalid = "lifecycle_monitor.max_failures_invalid"
	CodeWorkerInvalid      = "lifecycle_monitor.worker_invalid"
	CodeTimeInvalid        = "lifecycle_monitor.time_invalid"
	CodeClientInvalid      = "lifecycle_monitor.client_invalid"
	CodeLeaseTooShort      = "lifecycle_monitor.lease_too_short"

	// Registration.
	CodeChangeInvalid        = "lifecycle_monitor.change_invalid"
	CodeDispatchInvalid      = "lifecycle_monitor.dispatch_invalid"
	CodeBindingInvalid       = "lifecycle_monitor.binding_invalid"
	CodeIdempotencyCollision = "lifecycle_monitor.idempotency_collision"
	CodeEventInvalid         = "lifecycle_monitor.event_invalid"
	CodeEventMissing         = "lifecycle_monitor.event_missing"

	// Leases and polls.
	CodeClaimInvalid    = "lifecycle_monitor.claim_invalid"
	CodeClaimMissing    = "lifecycle_monitor.claim_missing"
	CodeClaimLost       = "lifecycle_monitor.claim_lost"
	CodeLeaseExpired    = "lifecycle_monitor.lease_expired"
	CodeClockRegressed  = "lifecycle_monitor.clock_regressed"
	CodeCompletionLost  = "lifecycle_monitor.completion_lost"
	CodeFailureLost     = "lifecycle_monitor.failure_lost"
	CodeResponseInvalid = lifecycle.CodeResponseInvalid
	CodeClientFailure   = "lifecycle_monitor.client_failure"
	// CodeErrorInvalid refuses a Retry/Fail whose error code is not a
	// stable code: the monitor checks the code itself before it stores it
	// as last_error_code, whoever the caller is.
	CodeErrorInvalid = "lifecycle_monitor.error_code_invalid"

	// Hints (localeflow.change.hint). CodeHintInvalid refuses a hint
	// detail; the others name why a valid hint changed nothing.
	CodeHintInvalid      = "lifecycle_monitor.hint_invalid"
	CodeHintUnknown      = "lifecycle_monitor.hint_unknown"
	CodeHintSiteMismatch = "lifecycle_monitor.hint_site_mismatch"
	CodeHintNotWatching  = "lifecycle_monitor.hint_not_watching"
	CodeHintAlreadyDue   = "lifecycle_monitor.hint_already_due"
	CodeHintTooSoon      = "lifecycle_monitor.hint_too_soon"
	CodeHintGapInvalid   = "lifecycle_monitor.hint_gap_invalid"
	// CodeHintRaced: the record was written after the hint read its clock
	// (updated_ms > the hint's now), almost always by a poller whose clock
	// read came a moment later. Not clock_regressed: the outcome is right
	// and nothing points at a clock fault.
	CodeHintRaced = "lifecycle_monitor.hint_raced"
	// CodeHintRetryAfter: a hinted poll met a Retry-After and that wait
	// (wait_until_ms) has not ended; a hint never shortens it.
	CodeHintRetryAfter = "lifecycle_monitor.hint_retry_after"

	// Stored data.
	CodeStateInvalid = "lifecycle_monitor.state_invalid"
	// CodeSchemaAltered: a record written by another schema version, or a
	// table whose keys or indexes differ from the topology.
	CodeSchemaAltered = "lifecycle_monitor.schema_altered"
	// CodeDatabaseIntegrity: the store answered something impossible (an
	// index entry without its item after a consistent read, a page that
	// does not decode).
	CodeDatabaseIntegrity = "lifecycle_monitor.database_integrity"
	// CodeTransactionNested is reserved and never returned: a DynamoDB
	// store has no transactions to nest. It stays listed so the code is
	// never given another meaning (docs/design.md "Monitor error codes").
	CodeTransactionNested = "lifecycle_monitor.transaction_nested"

	// CodeStoreUnavailable wraps a store failure (network, throttling):
	// retryable, the state did not change.
	CodeStoreUnavailable = "lifecycle_monitor.store_unavailable"
	// CodeStoreRejected: the store refused the request itself (DynamoDB's
	// ValidationException, e.g. an item above its size limit). Not
	// retryable: the same write would be refused again; the state did not
	// change.
	CodeStoreRejected = "lifecycle_monitor.store_rejected"

	// ReclaimErrorCode is last_error_code of a lease that expired before
	// its holder finished, stored without the lifecycle_monitor. prefix
	// (docs/design.md "Monitor states and transitions").
	ReclaimErrorCode = "lease_expired"
)

// SchemaVersion is the version of the stored record layout.
const SchemaVersion = 1
