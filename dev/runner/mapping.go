package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// SQSAPI is the part of *sqs.Client a mapping uses.
type SQSAPI interface {
	ReceiveMessage(ctx context.Context, params *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, params *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
}

var _ SQSAPI = (*sqs.Client)(nil)

// Limits of the mapping.
const (
	// MaxReceive is SQS's per-call limit; larger batches take several calls.
	MaxReceive = 10
	// MaxBatchSize is the Lambda limit for a standard queue.
	MaxBatchSize = 10_000
	// DefaultIdle is the sleep after an empty receive.
	DefaultIdle = 200 * time.Millisecond
	// DefaultTimeout is the function timeout when none is set.
	DefaultTimeout = 120 * time.Second
)

// Mapping is one SQS event source mapping (standard queue,
// ReportBatchItemFailures).
type Mapping struct {
	// Function names the target in logs.
	Function string
	SQS      SQSAPI
	QueueURL string
	QueueARN string
	Region   string
	// BatchSize is the maximum number of messages per invocation (1..10,000).
	BatchSize int
	// Timeout is the function timeout: an invocation still running after it
	// fails the whole batch.
	Timeout time.Duration
	// VisibilityTimeout, when non-zero, is passed on ReceiveMessage instead
	// of the queue's own (whole seconds). AWS uses the queue's: leave it 0
	// unless a demo or test needs failed messages back sooner.
	VisibilityTimeout time.Duration
	// Idle is the sleep after an empty receive (default 200 ms).
	Idle    time.Duration
	Invoker Invoker
	Log     *slog.Logger
	// OnBatch, if set, is called after every invocation.
	OnBatch func(BatchResult)

	stats Stats
}

// BatchResult is what one invocation did.
type BatchResult struct {
	Function  string
	Messages  int
	Deleted   int
	Failed    int
	FailedIDs []string
	// Err is the reason the whole batch failed (function error, timeout,
	// invalid response), nil otherwise.
	Err error
}

// Stats are a mapping's running totals.
type Stats struct {
	Batches, Messages, Deleted, Failed, BatchErrors atomic.Int64
}

// Stats returns the running totals.
func (m *Mapping) Stats() *Stats { return &m.stats }

func (m *Mapping) validate() error {
	switch {
	case m.SQS == nil || m.Invoker == nil:
		return errors.New("runner: mapping needs SQS and Invoker")
	case m.QueueURL == "":
		return errors.New("runner: mapping needs QueueURL")
	case m.BatchSize < 1 || m.BatchSize > MaxBatchSize:
		return fmt.Errorf("runner: batch size %d not in 1..%d", m.BatchSize, MaxBatchSize)
	case m.VisibilityTimeout < 0 || m.VisibilityTimeout%time.Second != 0 || m.VisibilityTimeout > 12*time.Hour:
		return errors.New("runner: visibility timeout must be whole seconds in 0..12h")
	}
	return nil
}

func (m *Mapping) log() *slog.Logger {
	if m.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return m.Log
}

// Run polls the queue until ctx ends. Receive errors are logged and
// retried after the idle sleep.
func (m *Mapping) Run(ctx context.Context) error {
	if err := m.validate(); err != nil {
		return err
	}
	idle := m.Idle
	if idle <= 0 {
		idle = DefaultIdle
	}
	for ctx.Err() == nil {
		res, err := m.PollOnce(ctx)
		if err != nil && ctx.Err() == nil {
			m.log().Warn("runner receive failed", "function", m.Function, "error", err.Error())
		}
		if err != nil || res.Messages == 0 {
			select {
			case <-ctx.Done():
			case <-time.After(idle):
			}
		}
	}
	return nil
}

// PollOnce receives up to BatchSize visible messages and, if there are
// any, invokes the function once and settles the batch. It returns a zero
// result when the queue had nothing visible.
func (m *Mapping) PollOnce(ctx context.Context) (BatchResult, error) {
	if err := m.validate(); err != nil {
		return BatchResult{}, err
	}
	msgs, err := m.receive(ctx)
	if err != nil || len(msgs) == 0 {
		return BatchResult{Function: m.Function}, err
	}
	event := m.event(msgs)
	payload, err := json.Marshal(event)
	if err != nil {
		return BatchResult{}, fmt.Errorf("runner: encode event: %w", err)
	}
	res := BatchResult{Function: m.Function, Messages: len(msgs)}
	timeout := m.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ictx, cancel := context.WithTimeout(ctx, timeout)
	out, err := m.Invoker.Invoke(ictx, payload)
	cancel()
	var failed map[string]bool
	if err == nil {
		failed, err = FailedItems(out, event)
	}
	if err != nil {
		// A whole-batch failure: nothing is deleted, every message comes back
		// after its visibility timeout (and counts towards maxReceiveCount).
		res.Err, res.Failed = err, len(msgs)
		for _, r := range event.Records {
			res.FailedIDs = append(res.FailedIDs, r.MessageId)
		}
		m.log().Warn("runner batch failed", "function", m.Function, "messages", len(msgs), "error", err.Error())
	} else {
		var del []types.Message
		for _, msg := range msgs {
			if failed[aws.ToString(msg.MessageId)] {
				res.FailedIDs = append(res.FailedIDs, aws.ToString(msg.MessageId))
				continue
			}
			del = append(del, msg)
		}
		res.Failed = len(res.FailedIDs)
		res.Deleted = m.delete(ctx, del)
	}
	m.record(res)
	return res, nil
}

func (m *Mapping) record(res BatchResult) {
	m.stats.Batches.Add(1)
	m.stats.Messages.Add(int64(res.Messages))
	m.stats.Deleted.Add(int64(res.Deleted))
	m.stats.Failed.Add(int64(res.Failed))
	if res.Err != nil {
		m.stats.BatchErrors.Add(1)
	}
	if m.OnBatch != nil {
		m.OnBatch(res)
	}
}

// receive gathers up to BatchSize messages with short polls: it stops at
// the first call that returns fewer than it asked for.
func (m *Mapping) receive(ctx context.Context) ([]types.Message, error) {
	var out []types.Message
	for len(out) < m.BatchSize {
		n := min(MaxReceive, m.BatchSize-len(out))
		in := &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(m.QueueURL),
			MaxNumberOfMessages:         int32(n),
			WaitTimeSeconds:             0,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		}
		if m.VisibilityTimeout > 0 {
			in.VisibilityTimeout = int32(m.VisibilityTimeout / time.Second)
		}
		got, err := m.SQS.ReceiveMessage(ctx, in)
		if err != nil {
			if len(out) > 0 {
				// Invoke with what was received; the error repeats next poll.
				return out, nil
			}
			return nil, fmt.Errorf("receive %s: %w", m.QueueURL, err)
		}
		out = append(out, got.Messages...)
		if len(got.Messages) < n {
			break
		}
	}
	return out, nil
}

// event builds the aws:sqs event Lambda passes to the function.
func (m *Mapping) event(msgs []types.Message) events.SQSEvent {
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
			EventSourceARN:         m.QueueARN,
			AWSRegion:              m.Region,
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

// delete removes the settled messages (DeleteMessageBatch, 10 per call)
// and returns how many were deleted. A message whose delete fails comes
// back after its visibility timeout: at-least-once, as on AWS.
func (m *Mapping) delete(ctx context.Context, msgs []types.Message) int {
	deleted := 0
	for start := 0; start < len(msgs); start += MaxReceive {
		chunk := msgs[start:min(start+MaxReceive, len(msgs))]
		entries := make([]types.DeleteMessageBatchRequestEntry, len(chunk))
		for i, msg := range chunk {
			entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: msg.ReceiptHandle}
		}
		out, err := m.SQS.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(m.QueueURL), Entries: entries})
		if err != nil {
			m.log().Warn("runner delete failed", "function", m.Function, "messages", len(chunk), "error", err.Error())
			continue
		}
		deleted += len(out.Successful)
		for _, f := range out.Failed {
			m.log().Warn("runner delete refused", "function", m.Function, "code", aws.ToString(f.Code))
		}
	}
	return deleted
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
		// only empty/null responses as success; the runner errs on the side
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
