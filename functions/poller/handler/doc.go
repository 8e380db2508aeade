// Package handler is the poller function's logic: one Lambda entry point
// that accepts two event shapes and tells them apart by shape.
//
// # Scheduled sweep
//
// An EventBridge scheduled event (detail-type "Scheduled Event") runs a
// sweep: due event ids are listed page by page through the monitor service
// (which reads the sharded sparse wake index with a cursor per shard, so
// entries that cannot be claimed never hide the ones behind them) and each
// is polled once with monitor.Service.PollOnce by a bounded pool of workers
// (Concurrency, default 64). No poll is started when the time left before
// the Lambda deadline is below the CMS client's timeout plus Margin; each
// event id is polled at most once per sweep. Then the sweep publishes the
// outcomes still owed (the monitor's outbox: final records whose
// localeflow.change.terminal was not published within
// monitor.Config.OutboxGrace). An owed final record stays in the wake
// index until its outcome is announced (docs/design.md "Owed outcomes in
// the wake index"), so the due listing meets it too: its claim is refused
// and the sweep announces what it owes once it is owed for OutboxGrace
// (younger, it is the finishing path's). The sweep is the safety net for a
// lost delayed message and a lost terminal event.
//
// # Outcomes
//
// Every write that ends a change (a terminal CMS answer, a failure, a
// reclaim at the failure limit, a record marked state_invalid, a superseded
// or cancelled registration) owes localeflow.change.terminal, and nothing
// publishes it before that write succeeded (one outcome per change: a
// final record never changes again): the handler publishes it
// with its stable outcome_id and then clears the outbox
// (monitor.Service.Announced); a failure in between leaves it owed, and it
// is published again (same outcome_id) by a redelivery or a sweep.
//
// The delayed messages one invocation sends go out with SendMessageBatch,
// ten to a request; a message whose entry failed is settled as if its own
// send had failed.
//
// # SQS batches
//
// A batch from the poll queue holds two kinds of bodies:
//
//   - intake: the EventBridge envelope of localeflow.change.dispatched
//     (routed by the bus rule). The detail is parsed with
//     monitor.ParseDispatched and registered; while the change is pending
//     its first poll is enqueued (DelaySeconds 0). A change that is terminal
//     at once (superseded/cancelled dispatch) emits
//     localeflow.change.terminal.
//   - delayed poll envelopes (package delayqueue, kind "poll"): an early
//     message is re-sent with the remaining delay (chaining waits over 900
//     s); a due one polls the change once.
//
// After a poll this handler made (Outcome.Polled), it schedules the next
// poll: watching at NextPoll (poll interval), retry_wait at NextPoll
// (backoff); terminal and failed emit localeflow.change.terminal. A message
// whose change is not claimable (a duplicate, a stale chain, another
// worker's live lease) is acknowledged without scheduling anything, so
// duplicate chains collapse at their next poll. When a message is a
// redelivery (ApproximateReceiveCount > 1), the work a failed earlier
// attempt may have left undone is redone: the next poll is re-sent for a
// waiting change, the terminal event re-published for a finished one whose
// outcome is still owed (consumers dedupe on outcome_id; events may arrive
// twice by design).
//
// Per-message results (events.SQSEventResponse, ReportBatchItemFailures):
//
//   - a body that can never succeed (not JSON, unknown shape or kind, an
//     invalid envelope, an invalid or colliding dispatch) is acknowledged
//     and logged with code poller.message_invalid plus the parser's code and
//     the SQS message id: retrying cannot fix it, and the DLQ is kept for
//     messages that failed for transient reasons;
//   - transient failures (store, SQS, EventBridge, an error without a
//     code, no time left before the deadline) are batch item failures, so
//     SQS redelivers and finally moves the message to the DLQ.
//
// Logs are JSON (log/slog) with the Lambda request id, and carry only ids,
// counts and codes.
package handler
