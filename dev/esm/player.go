package esm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

// API is the part of *sqs.Client a player uses.
type API interface {
	ReceiveMessage(ctx context.Context, params *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, params *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, params *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
}

var _ API = (*sqs.Client)(nil)

// Invoker invokes the function synchronously with the aws:sqs event and
// returns its response payload; an error is a failed invocation (the
// whole batch fails).
type Invoker interface {
	Invoke(ctx context.Context, payload []byte) ([]byte, error)
}

// Limits of the mapping.
const (
	// MaxReceive is SQS's per-call limit; larger batches take several calls.
	MaxReceive = 10
	// MaxBatchSize is the Lambda limit for a standard queue.
	MaxBatchSize = 10_000
	// DefaultTimeout is the function timeout when none is set.
	DefaultTimeout = 120 * time.Second
)

// codeStaleHandle is kumo's answer to a delete with a receipt handle that
// is no longer the message's latest.
const codeStaleHandle = "ReceiptHandleIsInvalid"

// Player is one SQS event source mapping (standard queue,
// ReportBatchItemFailures). It keeps no state between polls: its callers
// loop, count and log.
type Player struct {
	SQS      API
	QueueURL string
	// QueueARN and Region are the records' eventSourceARN and awsRegion.
	QueueARN string
	Region   string
	// BatchSize is the maximum number of messages per invocation (1..10,000).
	BatchSize int
	// Timeout is the function timeout: an invocation still running after it
	// fails the whole batch (default DefaultTimeout).
	Timeout time.Duration
	// VisibilityTimeout, when non-zero, is passed on ReceiveMessage instead
	// of the queue's own (whole seconds). AWS uses the queue's: leave it 0
	// unless a demo or test needs failed messages back sooner.
	VisibilityTimeout time.Duration
	Invoker           Invoker
	// DeleteEach deletes every settled message with its own DeleteMessage
	// call instead of DeleteMessageBatch calls of up to 10 (the cost
	// benchmarks count and price one DeleteMessage per message).
	DeleteEach bool
	// Select, when set, sees the received messages before the invocation and
	// returns those to invoke the function with, in that order (a proof
	// player holds messages back or reorders them here). A message it
	// leaves out is its own to settle.
	Select func(ctx context.Context, msgs []types.Message) ([]types.Message, error)
}

// Batch is what one poll did.
type Batch struct {
	// Receives counts ReceiveMessage calls, Received the messages they
	// returned (0: nothing was visible, the function was not invoked).
	Receives int
	Received int
	// Records are the messages the function was invoked with (none when
	// Select left none); Duration is how long the invocation took.
	Records  []events.SQSMessage
	Duration time.Duration
	// Err is the reason the whole batch failed (function error, timeout,
	// invalid response), nil otherwise.
	Err error
	// FailedIDs are the messages left on the queue: those the response
	// listed, or every record when the whole batch failed.
	FailedIDs []string
	// Settled are the records whose delete succeeded or was stale, in the
	// order of the batch; Deleted counts the successful deletes and
	// StaleDeletes the stale ones.
	Settled      []events.SQSMessage
	Deleted      int
	StaleDeletes int
	// DeleteErr is why deletes failed (other than stale): the messages come
	// back after their visibility timeout, as on AWS. With DeleteEach the
	// first such failure ends the deletes.
	DeleteErr error
}

// Validate reports a player that cannot poll.
func (p *Player) Validate() error {
	switch {
	case p.SQS == nil || p.Invoker == nil:
		return errors.New("esm: player needs SQS and Invoker")
	case p.QueueURL == "":
		return errors.New("esm: player needs QueueURL")
	case p.BatchSize < 1 || p.BatchSize > MaxBatchSize:
		return fmt.Errorf("esm: batch size %d not in 1..%d", p.BatchSize, MaxBatchSize)
	case p.VisibilityTimeout < 0 || p.VisibilityTimeout%time.Second != 0 || p.VisibilityTimeout > 12*time.Hour:
		return errors.New("esm: visibility timeout must be whole seconds in 0..12h")
	}
	return nil
}

// PollOnce receives up to BatchSize visible messages and, if there are
// any, invokes the function once and settles the batch. The error is a
// receive (or Select) error with nothing received; a failed invocation or
// delete is reported in the Batch.
func (p *Player) PollOnce(ctx context.Context) (Batch, error) {
	if err := p.Validate(); err != nil {
		return Batch{}, err
	}
	var b Batch
	msgs, err := p.receive(ctx, &b)
	if err != nil || len(msgs) == 0 {
		return b, err
	}
	if p.Select != nil {
		if msgs, err = p.Select(ctx, msgs); err != nil {
			return b, err
		}
		if len(msgs) == 0 {
			return b, nil
		}
	}
	event := p.event(msgs)
	b.Records = event.Records
	payload, err := json.Marshal(event)
	if err != nil {
		return b, fmt.Errorf("esm: encode event: %w", err)
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ictx, cancel := context.WithTimeout(ctx, timeout)
	start := time.Now()
	out, err := p.Invoker.Invoke(ictx, payload)
	b.Duration = time.Since(start)
	cancel()
	var failed map[string]bool
	if err == nil {
		failed, err = FailedItems(out, event)
	}
	if err != nil {
		// A whole-batch failure: nothing is deleted, every message comes back
		// after its visibility timeout (and counts towards maxReceiveCount).
		b.Err = err
		for _, r := range event.Records {
			b.FailedIDs = append(b.FailedIDs, r.MessageId)
		}
		return b, nil
	}
	var settle []events.SQSMessage
	for _, r := range event.Records {
		if failed[r.MessageId] {
			b.FailedIDs = append(b.FailedIDs, r.MessageId)
			continue
		}
		settle = append(settle, r)
	}
	if p.DeleteEach {
		p.deleteEach(ctx, settle, &b)
	} else {
		p.deleteBatches(ctx, settle, &b)
	}
	return b, nil
}

// receive gathers up to BatchSize messages with short polls: it stops at
// the first call that returns fewer than it asked for.
func (p *Player) receive(ctx context.Context, b *Batch) ([]types.Message, error) {
	var out []types.Message
	for len(out) < p.BatchSize {
		n := min(MaxReceive, p.BatchSize-len(out))
		in := &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(p.QueueURL),
			MaxNumberOfMessages:         int32(n),
			WaitTimeSeconds:             0,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		}
		if p.VisibilityTimeout > 0 {
			in.VisibilityTimeout = int32(p.VisibilityTimeout / time.Second)
		}
		b.Receives++
		got, err := p.SQS.ReceiveMessage(ctx, in)
		if err != nil {
			if len(out) > 0 {
				// Invoke with what was received; the error repeats next poll.
				return out, nil
			}
			return nil, fmt.Errorf("receive %s: %w", p.QueueURL, err)
		}
		out = append(out, got.Messages...)
		b.Received = len(out)
		if len(got.Messages) < n {
			break
		}
	}
	return out, nil
}

// event builds the aws:sqs event Lambda passes to the function.
func (p *Player) event(msgs []types.Message) events.SQSEvent {
	ev := events.SQSEvent{Records: make([]events.SQSMessage, 0, len(msgs))}
	for _, msg := range msgs {
		rec := events.SQSMessage{
			MessageId:              aws.ToString(msg.MessageId),
			ReceiptHandle:          aws.ToString(msg.ReceiptHandle),
			Body:                   aws.ToString(msg.Body),
			Md5OfBody:              aws.ToString(msg.MD5OfBody),
			Md5OfMessageAttributes: aws.ToString(msg.MD5OfMessageAttributes),
			Attributes:             map[string]string{},
			MessageAttributes:      map[string]events.SQSMessageAttribute{},
			EventSource:            "aws:sqs",
			EventSourceARN:         p.QueueARN,
			AWSRegion:              p.Region,
		}
		for k, v := range msg.Attributes {
			rec.Attributes[k] = v
		}
		if _, ok := rec.Attributes["ApproximateReceiveCount"]; !ok {
			rec.Attributes["ApproximateReceiveCount"] = "1"
		}
		for k, v := range msg.MessageAttributes {
			rec.MessageAttributes[k] = events.SQSMessageAttribute{
				StringValue: v.StringValue, BinaryValue: v.BinaryValue, DataType: aws.ToString(v.DataType),
			}
		}
		ev.Records = append(ev.Records, rec)
	}
	return ev
}

// deleteBatches removes the settled messages with DeleteMessageBatch, 10
// per call. A message whose delete fails comes back after its visibility
// timeout: at-least-once, as on AWS.
func (p *Player) deleteBatches(ctx context.Context, recs []events.SQSMessage, b *Batch) {
	var errs []error
	for start := 0; start < len(recs); start += MaxReceive {
		chunk := recs[start:min(start+MaxReceive, len(recs))]
		entries := make([]types.DeleteMessageBatchRequestEntry, len(chunk))
		for i, r := range chunk {
			entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(r.ReceiptHandle)}
		}
		out, err := p.SQS.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(p.QueueURL), Entries: entries})
		if err != nil {
			errs = append(errs, fmt.Errorf("delete %d messages: %w", len(chunk), err))
			continue
		}
		settled := map[string]bool{}
		for _, s := range out.Successful {
			settled[aws.ToString(s.Id)] = true
		}
		b.Deleted += len(out.Successful)
		for _, f := range out.Failed {
			if aws.ToString(f.Code) == codeStaleHandle {
				settled[aws.ToString(f.Id)] = true
				b.StaleDeletes++
				continue
			}
			errs = append(errs, fmt.Errorf("delete refused: %s", aws.ToString(f.Code)))
		}
		for i, r := range chunk {
			if settled[strconv.Itoa(i)] {
				b.Settled = append(b.Settled, r)
			}
		}
	}
	b.DeleteErr = errors.Join(errs...)
}

// deleteEach removes the settled messages one DeleteMessage call each,
// until the first failure other than a stale handle.
func (p *Player) deleteEach(ctx context.Context, recs []events.SQSMessage, b *Batch) {
	for _, r := range recs {
		stale, err := Delete(ctx, p.SQS, p.QueueURL, r.ReceiptHandle)
		if err != nil {
			b.DeleteErr = err
			return
		}
		if stale {
			b.StaleDeletes++
		} else {
			b.Deleted++
		}
		b.Settled = append(b.Settled, r)
	}
}

// Delete deletes one message with DeleteMessage. A receipt handle that is
// no longer the message's latest (kumo answers ReceiptHandleIsInvalid where
// AWS answers success without deleting) is stale, not an error: the message
// is delivered again, as on AWS.
func Delete(ctx context.Context, api API, queueURL, receiptHandle string) (stale bool, err error) {
	_, err = api.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(queueURL), ReceiptHandle: aws.String(receiptHandle)})
	if apiErr, ok := errors.AsType[smithy.APIError](err); ok && apiErr.ErrorCode() == codeStaleHandle {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("delete: %w", err)
	}
	return false, nil
}

// ErrInvalidResponse is a function response the mapping treats as a
// complete batch failure.
var ErrInvalidResponse = errors.New("invalid partial batch response")

// FailedItems reads a function's partial batch response: the message ids
// to leave on the queue. It returns ErrInvalidResponse (complete failure)
// for a response that is not a JSON object, or whose batchItemFailures is not a
// list of {"itemIdentifier": <message id of this batch>}.
func FailedItems(resp []byte, ev events.SQSEvent) (map[string]bool, error) {
	resp = bytes.TrimSpace(resp)
	if len(resp) == 0 || bytes.Equal(resp, []byte("null")) {
		return nil, nil
	}
	if !json.Valid(resp) {
		return nil, fmt.Errorf("%w: not JSON", ErrInvalidResponse)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(resp, &obj); err != nil {
		// Valid JSON that is not an object (a string, a list): AWS documents
		// only empty/null responses as success; the player errs on the side
		// of redelivery.
		return nil, fmt.Errorf("%w: not a JSON object", ErrInvalidResponse)
	}
	raw, ok := obj["batchItemFailures"]
	if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, nil
	}
	var items []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("%w: batchItemFailures is not a list of objects", ErrInvalidResponse)
	}
	inBatch := make(map[string]bool, len(ev.Records))
	for _, r := range ev.Records {
		inBatch[r.MessageId] = true
	}
	failed := make(map[string]bool, len(items))
	for _, item := range items {
		var id *string
		if v, ok := item["itemIdentifier"]; ok {
			if err := json.Unmarshal(v, &id); err != nil {
				return nil, fmt.Errorf("%w: itemIdentifier is not a string", ErrInvalidResponse)
			}
		}
		if id == nil || *id == "" || !inBatch[*id] {
			return nil, fmt.Errorf("%w: itemIdentifier missing, empty or not in the batch", ErrInvalidResponse)
		}
		failed[*id] = true
	}
	return failed, nil
}
