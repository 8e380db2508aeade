package delayqueue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/internal/xray"
)

// Schema is the envelope schema.
const Schema = contract.DelayedSchema

// MaxDelay is the SQS DelaySeconds cap.
const MaxDelay = 900 * time.Second

// MaxBodyBytes bounds an envelope; real ones are ~150 bytes.
const MaxBodyBytes = 4096

// Error codes.
const (
	CodeEnvelopeInvalid = "delayqueue.envelope_invalid"
	CodeSendFailed      = "delayqueue.send_failed"
	// CodeEnvelopeTooFar: an envelope due further ahead than any wait the
	// consumer schedules; refused instead of being chained forever.
	CodeEnvelopeTooFar = "delayqueue.envelope_too_far"
)

// HorizonSlack is added to the longest wait a consumer schedules to give
// the furthest due time it accepts (see CheckHorizon).
const HorizonSlack = 2 * time.Hour

var kindPattern = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,63}$`)

// Envelope is one delayed message: the wire form contract.DelayedMessage,
// with its validation.
type Envelope contract.DelayedMessage

// NewEnvelope builds a validated envelope due at `at`.
func NewEnvelope(kind, eventID, ref string, at time.Time) (Envelope, error) {
	e := Envelope{Schema: Schema, Kind: kind, EventID: eventID, Ref: ref, NotBeforeMS: core.Millis(at)}
	if err := e.validate(); err != nil {
		return Envelope{}, err
	}
	return e, nil
}

func (e Envelope) validate() error {
	if e.Schema != Schema || !kindPattern.MatchString(e.Kind) || !core.ValidToken(e.EventID) ||
		(e.Ref != "" && !core.ValidToken(e.Ref)) || !core.ValidMillis(e.NotBeforeMS) {
		return core.Fail(CodeEnvelopeInvalid)
	}
	return nil
}

// NotBefore is the earliest time the consumer may act.
func (e Envelope) NotBefore() time.Time { return core.FromMillis(e.NotBeforeMS) }

// Marshal encodes a valid envelope.
func (e Envelope) Marshal() ([]byte, error) {
	if err := e.validate(); err != nil {
		return nil, err
	}
	return json.Marshal(e)
}

// Parse reads an envelope strictly: one JSON object of at most MaxBodyBytes
// with exactly the envelope keys ("ref" optional), no duplicates, the right
// types and valid values, nothing after it. Anything else is
// delayqueue.envelope_invalid (not retryable: it can never succeed).
func Parse(body []byte) (Envelope, error) {
	if len(body) > MaxBodyBytes {
		return Envelope{}, core.Fail(CodeEnvelopeInvalid)
	}
	fields, err := objectFields(body)
	if err != nil {
		return Envelope{}, core.Fail(CodeEnvelopeInvalid)
	}
	required := []string{"schema", "kind", "event_id", "not_before_ms"}
	want := len(required)
	if _, ok := fields["ref"]; ok {
		want++
	}
	if len(fields) != want {
		return Envelope{}, core.Fail(CodeEnvelopeInvalid)
	}
	var e Envelope
	ok := jsonString(fields["schema"], &e.Schema) &&
		jsonString(fields["kind"], &e.Kind) &&
		jsonString(fields["event_id"], &e.EventID) &&
		jsonInt(fields["not_before_ms"], &e.NotBeforeMS)
	if raw, has := fields["ref"]; has {
		ok = ok && jsonString(raw, &e.Ref) && e.Ref != ""
	}
	if !ok {
		return Envelope{}, core.Fail(CodeEnvelopeInvalid)
	}
	if err := e.validate(); err != nil {
		return Envelope{}, err
	}
	return e, nil
}

// objectFields decodes one JSON object into its raw fields, refusing
// duplicate keys and trailing data.
func objectFields(body []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, errors.New("not an object")
	}
	fields := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, errors.New("bad key")
		}
		if _, dup := fields[key]; dup {
			return nil, errors.New("duplicate key")
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		fields[key] = raw
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, errors.New("unterminated object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data")
	}
	return fields, nil
}

func jsonString(raw json.RawMessage, out *string) bool {
	return len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, out) == nil
}

// jsonInt accepts a JSON integer written with digits only: null, a bool,
// a string, a sign, a fraction or an exponent is refused (json.Unmarshal
// alone would read null as 0).
func jsonInt(raw json.RawMessage, out *int64) bool {
	if len(raw) == 0 || raw[0] < '0' || raw[0] > '9' || bytes.ContainsAny(raw, ".eE+\"") {
		return false
	}
	return json.Unmarshal(raw, out) == nil
}

// Delay is the DelaySeconds for a message due at `at`: ceil(at − now) in
// whole seconds, capped at 900, 0 when due.
func Delay(at, now time.Time) int32 {
	d := at.Sub(now)
	if d <= 0 {
		return 0
	}
	if d >= MaxDelay {
		return int32(MaxDelay / time.Second)
	}
	return int32((d + time.Second - 1) / time.Second)
}

// Due reports whether the envelope may be acted on at now, and otherwise
// how long remains.
func Due(e Envelope, now time.Time) (remaining time.Duration, due bool) {
	remaining = e.NotBefore().Sub(now)
	if remaining <= 0 {
		return 0, true
	}
	return remaining, false
}

// CheckHorizon refuses (delayqueue.envelope_too_far, not retryable) an
// envelope due more than longestWait + HorizonSlack after now: no consumer
// schedules that far, so it is forged or corrupt and chaining it would keep
// it on the queue forever.
func CheckHorizon(e Envelope, now time.Time, longestWait time.Duration) error {
	if e.NotBefore().After(now.Add(longestWait + HorizonSlack)) {
		return core.Fail(CodeEnvelopeTooFar)
	}
	return nil
}

// SQSAPI is the one SQS method the queue calls, with the SDK's exact
// signature.
type SQSAPI interface {
	SendMessage(ctx context.Context, params *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

var _ SQSAPI = (*sqs.Client)(nil)

// SQSBatchAPI is SQS SendMessageBatch. A client that has it sends
// SendBatch's envelopes ten to a request; one without it sends them one by
// one.
type SQSBatchAPI interface {
	SendMessageBatch(ctx context.Context, params *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

var _ SQSBatchAPI = (*sqs.Client)(nil)

// MaxBatch is the most entries one SendMessageBatch request takes.
const MaxBatch = 10

// Queue sends envelopes to one SQS queue.
type Queue struct {
	client SQSAPI
	url    string
}

// New returns a Queue for queueURL.
func New(client SQSAPI, queueURL string) *Queue { return &Queue{client: client, url: queueURL} }

// Send schedules kind for eventID at `at`.
func (q *Queue) Send(ctx context.Context, kind, eventID string, at, now time.Time) error {
	e, err := NewEnvelope(kind, eventID, "", at)
	if err != nil {
		return err
	}
	return q.Resend(ctx, e, now)
}

// Resend sends e with DelaySeconds = Delay(e.NotBefore(), now): scheduling
// a new envelope, or chaining an early one by its remaining delay.
func (q *Queue) Resend(ctx context.Context, e Envelope, now time.Time) error {
	body, err := e.Marshal()
	if err != nil {
		return err
	}
	_, err = q.client.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:                aws.String(q.url),
		MessageBody:             aws.String(string(body)),
		DelaySeconds:            Delay(e.NotBefore(), now),
		MessageSystemAttributes: traceAttributes(ctx),
	})
	if err != nil {
		return core.Wrap(CodeSendFailed, true, fmt.Errorf("send %s for %s: %w", e.Kind, e.EventID, err))
	}
	return nil
}

// SendBatch sends envs, each with DelaySeconds = Delay(its NotBefore, now),
// in SendMessageBatch requests of up to MaxBatch entries. It returns one
// error per envelope (nil: sent): an envelope SQS did not take (a failed
// entry, or the whole request failed) gets delayqueue.send_failed
// (retryable), exactly what Resend returns for a failed send; an invalid
// one gets delayqueue.envelope_invalid and is not sent.
func (q *Queue) SendBatch(ctx context.Context, envs []Envelope, now time.Time) []error {
	errs := make([]error, len(envs))
	batcher, ok := q.client.(SQSBatchAPI)
	if !ok {
		for i, e := range envs {
			errs[i] = q.Resend(ctx, e, now)
		}
		return errs
	}
	var idx []int
	var entries []types.SendMessageBatchRequestEntry
	flush := func() {
		if len(entries) == 0 {
			return
		}
		q.sendChunk(ctx, batcher, envs, idx, entries, errs)
		idx, entries = idx[:0], entries[:0]
	}
	for i, e := range envs {
		body, err := e.Marshal()
		if err != nil {
			errs[i] = err
			continue
		}
		idx = append(idx, i)
		entries = append(entries, types.SendMessageBatchRequestEntry{
			Id: aws.String(strconv.Itoa(len(entries))), MessageBody: aws.String(string(body)),
			DelaySeconds: Delay(e.NotBefore(), now), MessageSystemAttributes: traceAttributes(ctx),
		})
		if len(entries) == MaxBatch {
			flush()
		}
	}
	flush()
	return errs
}

// sendChunk sends one request; entries[k] is envs[idx[k]] and has Id k.
func (q *Queue) sendChunk(ctx context.Context, api SQSBatchAPI, envs []Envelope, idx []int, entries []types.SendMessageBatchRequestEntry, errs []error) {
	fail := func(k int, cause error) {
		e := envs[idx[k]]
		errs[idx[k]] = core.Wrap(CodeSendFailed, true, fmt.Errorf("send %s for %s: %w", e.Kind, e.EventID, cause))
	}
	out, err := api.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(q.url), Entries: entries})
	if err != nil {
		for k := range entries {
			fail(k, err)
		}
		return
	}
	sent := make([]bool, len(entries))
	for _, ok := range out.Successful {
		if k, err := strconv.Atoi(aws.ToString(ok.Id)); err == nil && k >= 0 && k < len(entries) {
			sent[k] = true
		}
	}
	failed := map[int]string{}
	for _, f := range out.Failed {
		if k, err := strconv.Atoi(aws.ToString(f.Id)); err == nil && k >= 0 && k < len(entries) {
			failed[k] = aws.ToString(f.Code)
		}
	}
	for k := range entries {
		switch code, isFailed := failed[k]; {
		case isFailed:
			fail(k, fmt.Errorf("entry failed: %s", code))
		case !sent[k]:
			// Neither taken nor refused: not known to be sent.
			fail(k, errors.New("entry missing from the answer"))
		}
	}
}

// traceAttributes carries the invocation's X-Ray trace header (the one
// the Lambda runtime hands the invocation, xray.HeaderOf) as the
// AWSTraceHeader system attribute, so the consumer's invocation joins
// the sender's trace: one change's polls, one release's steps, one trace.
// nil without a valid header (local runs, tests).
func traceAttributes(ctx context.Context) map[string]types.MessageSystemAttributeValue {
	h := xray.HeaderOf(ctx)
	if h == "" {
		return nil
	}
	return map[string]types.MessageSystemAttributeValue{
		string(types.MessageSystemAttributeNameForSendsAWSTraceHeader): {DataType: aws.String("String"), StringValue: aws.String(h)},
	}
}
