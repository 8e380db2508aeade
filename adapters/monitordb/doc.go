// Package monitordb is the DynamoDB implementation of monitor.Store.
//
// One item per registered change, keyed by event_id (topology.Monitor),
// written with schema_version monitor.SchemaVersion; every write is
// conditional on it, and an item of another version (or none) is read as
// lifecycle_monitor.schema_altered and never written. Every state change
// is one conditional write:
//
//   - Create: PutItem if attribute_not_exists(event_id), ALL_OLD on failure.
//   - Claim: UpdateItem if state ∈ {pending, watching, retry_wait} AND
//     next_poll_ms ≤ now AND updated_ms ≤ now, returning ALL_NEW; the lease
//     token is random (crypto/rand, made by the core).
//   - Transition (complete/retry/fail/reclaim): UpdateItem fenced on
//     state = leased AND lease_token AND lease_owner AND lease_expires_ms
//     (> now live, ≤ now for a reclaim) AND updated_ms ≤ now; on failure
//     ReturnValuesOnConditionCheckFailure=ALL_OLD tells claim_lost,
//     lease_expired and clock_regressed apart.
//
// Due discovery never scans: items that can wake carry wake_shard (FNV-1a
// of event_id mod topology.WakeShards) and wake_ms (next_poll_ms, leased
// items included: the claim does not touch the wake keys, so it writes no
// index) and appear in the sparse KEYS_ONLY index "wake"; a terminal or
// failed item keeps them while its outcome is owed (outbox_ms) and the
// announcement REMOVEs them with outbox_ms. Items needing attention
// (failed, or terminal with a remote failure) carry attention_shard and
// attention_ms for the "attention" index, which health reads with the wake
// index instead of scanning.
//
// Numbers go through attributevalue and expression as integers (ms). The
// store keeps no text: ids, counts, codes, hashes and the canonical
// lifecycle snapshot, stored compressed (snapshot.go: a binary attribute)
// so that the
// item of a watched change stays under 1 KB, one write unit per write. SDK errors never leave the package: conditional
// failures become monitor codes, everything else
// lifecycle_monitor.store_unavailable (retryable) wrapping the cause.
package monitordb
