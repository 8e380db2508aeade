// Package eventbus publishes localeflow's output events on the EventBridge
// bus (docs/design.md "Events on the bus"): source "localeflow", a detail-type
// from contract, and a JSON detail that is content-free (ids, statuses,
// codes, hashes — never texts or secrets).
//
// A failed publish is a retryable *core.Error (eventbus.publish_failed for
// an API error, eventbus.entry_failed when EventBridge reports a failed
// entry), so SQS consumers turn it into a batch item failure; a detail that
// cannot be encoded is eventbus.detail_invalid (not retryable).
package eventbus
