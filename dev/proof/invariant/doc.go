// Package invariant audits localeflow's two tables against every rule of
// both state machines. It is a test and audit tool: it reads each table
// with a consistent parallel Scan (the one place in the repository besides
// adapters/opsdb's operator audit that scans; production code never
// does) and each sparse index with Query, and never writes.
//
// Per item it reuses the domain's own validation instead of restating it:
//
//   - monitor records are read back through adapters/monitordb.Store.Get
//     (the monitor's exact decoding, which marks unknown attributes and
//     index keys that disagree with the state as corrupt) and checked with
//     monitor.Validate: lease fields exactly when leased, binding hash,
//     snapshot hash and shape, error code exactly in retry_wait/failed,
//     consecutive failures ≤ the registration's limit;
//   - evidence and delivery records are decoded with
//     adapters/opsdb.DecodeRelease (index keys as adapters/releasedb
//     writes them) and checked with release.ValidateEvidenceRecord/ValidateDeliveryRecord (the
//     coordinator's lease rules: attempts ≤ max_attempts, lease fields only
//     when leased, codes only where allowed); the other release records
//     with adapters/releasedb.Decode.
//
// On top of those it checks the rules that span attributes, items and
// indexes (each violation names its Rule):
//
//   - wake keys: an item carries wake_shard/wake_ms exactly when it can
//     wake, with wake_ms = next_poll_ms (next_attempt_ms) or the lease
//     expiry when leased, and wake_shard the store's shard; terminal,
//     failed and succeeded items never wake, except a final monitor record
//     owing its outcome, which keeps its claim's wake keys (RuleFinalWakes);
//   - attention keys exactly when an operator is needed (failed, or
//     terminal with a CMS failure status);
//   - the wake and attention indexes, read by Query over every shard, hold
//     exactly the items that carry their keys (no final item is found by
//     the sweep, no wakeable item is invisible to it);
//   - attempts: poll_attempts ≥ consecutive_failures, an optional
//     scenario bound on poll attempts, evidence/delivery attempts ≤ max;
//   - release bindings: every evidence request id is recomputed from the
//     plan job, source text and result (release.BuildEvidenceRequest) and
//     must equal the stored one; result, source, job and approval hashes
//     agree; approvals point at a succeeded evidence record of the same
//     result; a delivery exists only when every job of the plan is
//     approved; with Options.ApprovalKey every approval token opens with
//     the approval authority's public key and binds the stored approval;
//   - a release blocked for good (its "blocked" record) has no record that
//     can wake (RuleBlockedWakes): the sweep never re-runs it;
//   - content-free: no text the test used (Options.Texts) appears in any
//     attribute (strings, binary, nested lists and maps) of a monitor item
//     or of any release item other than the source and result records;
//   - deliveries: with Options.Delivered (the CMS server's receipts by
//     delivery id), no event has more than one distinct delivery, every
//     delivery the CMS received belongs to a delivery record, and a
//     succeeded delivery record was received by the CMS.
//
// Use: Check(ctx, Options{...}) returns a Report whose Violations must be
// empty; RequireClean fails a test with the violations listed.
package invariant
