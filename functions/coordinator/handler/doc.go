// Package handler is the release coordinator's Lambda handler.
//
// The function consumes the release queue (SQS, ReportBatchItemFailures):
//
//   - EventBridge envelopes of `localeflow.plan.accepted` and
//     `localeflow.job.completed` (routed by the ReleaseInputRule): the signed
//     detail is verified and stored (release.Coordinator.Ingest), then one
//     release step runs for the event;
//   - delayed envelopes (adapters/delayqueue) of kind "release.run" or
//     "release.deliver": an early one is re-sent with its remaining delay
//     (waits over 900 s are chained), a due one runs its step.
//
// A step is run whole by release.Coordinator.Step (publish, settle, the
// completing read, the texts' expiry; docs/design.md "Release steps"):
// the handler decodes the message, checks the time, calls it with its
// ports (the bus, the text expirer, the metrics, the hand-on check) and
// sends the message it schedules. After each step the next one is
// enqueued: `approved` → a run at once
// (none after a named step that left its release's tally incomplete:
// release.Outcome.Quiet);
// `delivery_ready` → a delivery at once (or at its backoff); `waiting` on a
// lease or backoff → a delayed run at that time; an error with a stored
// wake time (evidence retry_wait, an abandoned lease) → a delayed step at
// that time.
//
// Outputs `localeflow.release.approved`, `localeflow.delivery.ready` and
// `localeflow.delivery.delivered` are published at least once. The step
// that made the change publishes it after the state write, so a plain
// duplicate or reordered message (ApproximateReceiveCount 1) publishes
// nothing. If the publish fails, the message is a batch item failure; its
// redelivery (ApproximateReceiveCount > 1) finds the change already
// stored, so before its step it re-publishes the events of the event's
// stored state, with the same content-free details: release.approved for
// every stored approval (its signed token must open and name the plan's
// job), delivery.ready for a prepared delivery, delivery.delivered for a
// delivered one (only the current delivery state: a delivery that is
// already delivered does not re-publish ready). Consumers therefore see
// duplicates — after any redelivery, not only after a failed publish —
// and must dedupe on the ids (event_id with approval_id or delivery_id
// and status).
//
// An approval's event is also owed durably (docs/design.md "Owed events
// of compact approvals"): its evidence record stays leased, in the wake
// index, until the event is published and settled
// (release.Coordinator.SettleApproval); a step that stored an approval
// publishes it even when it then fails, and a run the sweep schedules for
// the lease's expiry publishes what is still owed, so a lost or
// dead-lettered message loses no approval event.
//
// The scheduled sweep pages through the release table's wake index with
// its cursor and schedules a step for every due release (evidence and
// delivery records, never-claimed jobs, the approval that completed a plan
// without a delivery); releases blocked for good are not in that index.
//
// Errors: a message whose error is retryable and has no stored wake time
// is reported in BatchItemFailures (SQS redelivers it, then the DLQ); a
// non-retryable coded error is logged and acknowledged. Evidence and
// delivery steps start only when the invocation has at least the lease
// left (the operation guard); otherwise the step is re-enqueued at once.
package handler
