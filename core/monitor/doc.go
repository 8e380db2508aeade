// Package monitor is the lifecycle monitor's domain: it registers changes a
// CMS accepted for localization, hands out leased polls of the CMS lifecycle
// API, records each verified answer, and retries failures with bounded
// exponential backoff until the change reaches a terminal CMS status.
//
// Its states, transitions, defaults, limits, validation and error codes
// are those of docs/design.md "Lifecycle monitor", on the AWS shape of
// docs/design.md "Shape": time is integer milliseconds in storage, every
// state change is one conditional write fenced on a random lease token, and
// due items are discovered through a sparse index, never a scan.
//
// The package holds no AWS code. Stores implement the Store port: the
// DynamoDB store in adapters/monitordb and the in-memory store in
// core/monitor/memstore; monitortest.RunStoreSuite checks both against the
// same conformance suite.
//
// Every record read from a store is validated (Validate). A record that is
// impossible or tampered with is marked failed with
// lifecycle_monitor.state_invalid; nothing ever panics on stored data. A
// record whose schema_version is not SchemaVersion (another version, or
// none) is refused with lifecycle_monitor.schema_altered and never
// written: every write is conditional on this version, and health reports
// the record until an operator deals with it.
//
// Every write that makes a record final (terminal, failed, a reclaim at the
// failure limit, state_invalid, a superseded or cancelled registration)
// also sets its outbox key: the outcome (Announcement, with a stable
// OutcomeID) is owed until the caller publishes it and calls Announced;
// OwedOutcomes lists what is still owed after Config.OutboxGrace. Nothing
// is published before the write that made the record final, so every
// announcement of a change is built from its one final record (one outcome
// per change, docs/design.md "One outcome per change").
//
// The binding hash (binding_sha256) is the SHA-256 of the RFC 8785 form of
// the binding object (docs/design.md "Monitor record")
//
//	{"schema": "localeflow.lifecycle-monitor-binding.v1", "event_id", "site_id",
//	 "plan_id", "website_version", "source_sequence", "job_count",
//	 "change_sha256", "max_consecutive_failures"}
//
// The schema string names this binding layout and is hashed with it, so a
// binding hash computed under any other schema string never matches one of
// ours, by design.
package monitor
