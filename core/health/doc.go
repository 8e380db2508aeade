// Package health is localeflow's combined health view (docs/design.md
// "Health"): the rules that turn the open records of the lifecycle monitor
// and of the release coordinator into the health document
// {"schema":"localeflow.health.v1","status":"ok"|"blocked",...}, the list
// of items an operator must look at, and the Checker that reads them
// through narrow ports. It imports no AWS SDK; adapters/opsdb reads the
// tables.
//
// # Cost: no Scan, nothing finished is read
//
// A health check reads, from each table, every key of the two sparse
// KEYS_ONLY indexes (8 shards each: "wake" holds only records that can wake
// — monitor pending/leased/watching/retry_wait, evidence and delivery
// pending/leased/retry_wait — and "attention" only records an operator must
// look at — monitor failed or terminal with a remote failure status,
// evidence and delivery failed) and then those items themselves with
// strongly consistent BatchGetItem calls (100 keys per call). Terminal,
// succeeded and other finished records are in neither index, so the cost
// is 32 small index queries plus one item read per open or attention
// record, whatever the number of finished records (measured in
// docs/performance.md "Health").
//
// Why keys then items, and not an index that projects the state: the
// indexes are KEYS_ONLY by the topology (monitordb.Verify refuses another
// projection at cold start), and health must integrity-check every record
// it counts with the monitor's own row validation (monitor.Validate: the
// binding hash, the lifecycle snapshot re-parsed and re-hashed, the lease
// shape), which needs the whole item; a projected state would be counted
// without being checked. The open set is bounded by the intake rate times
// the time to terminal, so one read per open record is the price of an
// honest count.
//
// # What is counted, exactly
//
// monitor.counts holds every monitor state. pending, leased, watching,
// retry_wait and failed are exact (as of the consistent item reads; the
// index may lag a write by a moment, which moves a record between checks,
// never hides it for long). counts.terminal is APPROXIMATE: successful
// terminal records are never read, so it is the terminal records read
// through the attention index (remote failures) plus
// max(0, ItemCount − records read), where ItemCount is DescribeTable's
// item count of the monitor table, which DynamoDB refreshes about every six
// hours. It never drives the status. When the item count cannot be read,
// counts.terminal is only the terminal records read (a lower bound) and
// the check logs health.terminal_count_unavailable.
//
// release.evidence and release.delivery count the open lease states
// (pending, leased, retry_wait) and failed; succeeded records are
// finished and are not counted (the key is absent). "open" is the number
// of records not finished (for deliveries: not yet delivered).
//
// # When health is blocked
//
// The monitor rule: any expired lease, any failed record, any terminal
// remote failure blocks health (docs/design.md "Health"). The release rule
// is its counterpart: any expired evidence or delivery lease, any failed
// evidence request or delivery, any release blocked for good (its "blocked"
// record, reason health.release.blocked, listed as an item of kind
// "release" with the blocking code). A record that fails its integrity
// check is blocked too: it is counted as failed in its part (its stored
// state cannot be trusted) and the reason is its validation code
// (lifecycle_monitor.state_invalid, lifecycle_monitor.schema_altered,
// evidence.state.invalid, cms.delivery.invalid). Health never writes: the
// monitor marks such a record failed the next time a worker touches it.
//
// Age reasons (age.go) block health too: a change open longer than
// Limits.MaxChangeAge (health.monitor.open_too_long), an open release
// record older than Limits.MaxReleaseAge (health.release.open_too_long),
// a record still in an index whose TTL expiry is within
// Limits.ExpiryWarning (health.expiring_unfinished). Severity classes each
// reason (operations, business, age) for the alarms' destinations.
//
// The JSON document keeps the contract's keys only; the reasons and the
// item lists (Report.Reasons, Report.Items) are for the page, the logs,
// the localeflow.health.blocked event and the operator CLI.
package health
