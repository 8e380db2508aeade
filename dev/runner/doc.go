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
// It follows the documented behaviour of a Lambda event source mapping on a
// standard queue with FunctionResponseTypes = [ReportBatchItemFailures]
// (AWS Lambda developer guide, "Using Lambda with Amazon SQS" and
// "Handling errors for an SQS event source"):
//
//   - the mapping polls the queue and invokes the function synchronously
//     with up to BatchSize messages in the `aws:sqs` event shape
//     (messageId, receiptHandle, body, attributes with
//     ApproximateReceiveCount…, eventSource, eventSourceARN, awsRegion);
//     receiving makes the messages invisible for the queue's visibility
//     timeout;
//   - on success every message not listed in the response's
//     batchItemFailures is deleted; the listed ones are left alone and
//     become visible again when their visibility timeout ends;
//   - the batch is a complete success when the response is empty, null,
//     has no batchItemFailures or an empty/null list; it is a complete
//     failure (nothing deleted) when the function errors, times out, or the
//     response is not valid JSON or lists an itemIdentifier that is empty,
//     null, badly named or not a message id of the batch;
//   - moving a message to the dead-letter queue after maxReceiveCount
//     receives is done by the queue itself through its RedrivePolicy, as on
//     AWS: kumo v0.33.1 implements it (internal/service/sqs/storage.go,
//     deliverMessage and requeueExpiredMessages) and LocalStack does too, so
//     the runner never touches the DLQ. TestIntegrationRedriveAfterMaxReceiveCount
//     checks it against the real kumo queue.
//
// kumo's long poll does not wake when an in-flight message becomes visible
// again, so the mapping short-polls (WaitTimeSeconds 0) in a loop with a
// small idle sleep instead of long polling.
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
