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
// After each step the next one is enqueued: `approved` → a run at once;
// `delivery_ready` → a delivery at once (or at its backoff); `waiting` on a
// lease or backoff → a delayed run at that time; an error with a stored
// wake time (evidence retry_wait, an abandoned lease) → a delayed step at
// that time. Outputs `localeflow.release.approved`,
// `localeflow.delivery.ready` and `localeflow.delivery.delivered` are
// published only by the step that made the change, so duplicate or
// reordered messages publish nothing twice.
//
// Errors: a message whose error is retryable and has no stored wake time
// is reported in BatchItemFailures (SQS redelivers it, then the DLQ); a
// non-retryable coded error is logged and acknowledged. Evidence and
// delivery steps start only when the invocation has at least the lease
// left (the operation guard); otherwise the step is re-enqueued at once.
package handler
