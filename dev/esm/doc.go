// Package esm plays an SQS event source mapping of a Lambda function on a
// local stack (kumo, LocalStack): the one player behind the runner's
// mappings (dev/runner, which invokes the real bootstraps under
// aws-lambda-rie) and the proof harness's (dev/proof/harness, which
// invokes the handlers in process).
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
//     timeout (or the player's VisibilityTimeout, when set);
//   - on success every message not listed in the response's
//     batchItemFailures is deleted; the listed ones are left alone and
//     become visible again when their visibility timeout ends;
//   - the batch is a complete success when the response is empty, null,
//     has no batchItemFailures or an empty/null list; it is a complete
//     failure (nothing deleted) when the function errors, times out, or the
//     response is not valid JSON or lists an itemIdentifier that is empty,
//     null, badly named or not a message id of the batch;
//   - a delete whose receipt handle is no longer the message's latest (its
//     visibility ran out during the invocation and it was received again)
//     succeeds on AWS without deleting; kumo answers ReceiptHandleIsInvalid
//     instead, which the player counts as a stale delete, not an error: the
//     message is handled again when it comes back;
//   - moving a message to the dead-letter queue after maxReceiveCount
//     receives is done by the queue itself through its RedrivePolicy, as on
//     AWS: kumo v0.33.1 implements it (internal/service/sqs/storage.go,
//     deliverMessage and requeueExpiredMessages) and LocalStack does too, so
//     the player never touches the DLQ (dev/runner's
//     TestIntegrationRedriveAfterMaxReceiveCount checks it against kumo).
//
// kumo's long poll does not wake when an in-flight message becomes visible
// again, so the player short-polls (WaitTimeSeconds 0); its callers loop
// with a small idle sleep instead of long polling.
package esm
