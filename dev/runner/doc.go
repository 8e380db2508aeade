// Package runner plays, on a local stack, the two pieces of AWS that no
// local emulator here provides: the SQS event source mappings that invoke a
// Lambda function with batches of queue messages, and the EventBridge
// schedules that invoke a function on a fixed rate. The functions
// themselves are the real `bootstrap` binaries running under
// aws-lambda-rie (see RIE and StartRIE); SQS is kumo (Docker-free stack)
// or LocalStack, addressed through the standard AWS_ENDPOINT_URL_* variables.
//
// # SQS event source mapping (Mapping)
//
// A Mapping loops package esm's player over one queue: the documented
// behaviour of a Lambda event source mapping on a standard queue with
// ReportBatchItemFailures (batch shape, partial batch responses, complete
// failures, redrive by the queue itself) is described and implemented
// there, shared with the proof harness. The mapping short-polls in a loop
// with a small idle sleep (kumo's long poll does not wake when an
// in-flight message becomes visible again), deletes with
// DeleteMessageBatch, and logs failed batches and deletes.
//
// # Schedules (Schedule)
//
// A rate schedule invokes its function with the EventBridge "Scheduled
// Event" JSON (source aws.events, detail-type "Scheduled Event", resources
// = the rule ARN, detail {}). Every can be shorter than the topology's rate
// to accelerate a demo. Schedules invoke asynchronously on AWS; the runner
// logs a failed invocation and does not replay Lambda's asynchronous
// retries: the next tick runs the same sweep again.
package runner
