package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/localeflow/localeflow/adapters/delayqueue"
	"github.com/localeflow/localeflow/adapters/eventbus"
	"github.com/localeflow/localeflow/adapters/quarantine"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/topology"
)

// message is one SQS message copy.
type message struct {
	id        string
	body      string
	visibleAt time.Time
	receives  int
	// code is the quarantine code (the message attribute the rejecter
	// sets), for quarantined messages.
	code string
	// faulted counts the receives that were not acknowledged by an
	// invocation into which a fault was injected (or that crashed): a
	// message in the DLQ is explained when every receive counts here.
	faulted int
}

// explained reports whether injected faults explain why m reached the
// DLQ: every receive ended in an invocation with an injected fault.
func (m *message) explained() bool { return m.faulted >= m.receives }

// Queue is a standard SQS queue drained by a Lambda event source mapping
// with ReportBatchItemFailures: at-least-once delivery (duplicates),
// DelaySeconds, a visibility timeout after each receive, redelivery of
// what the function did not acknowledge, and a DLQ after MaxReceiveCount
// receives.
type Queue struct {
	w        *World
	def      topology.Queue
	fn       string
	msgs     []*message
	DLQ      []*message
	sent     int
	Received int
}

var _ delayqueue.SQSAPI = (*Queue)(nil)

func newQueue(w *World, def topology.Queue, fn string) *Queue {
	return &Queue{w: w, def: def, fn: fn}
}

// put enqueues a body (with a duplicate copy when the seed says so).
func (q *Queue) put(body string, delay time.Duration) {
	copies := 1
	if q.w.faultsOn() && q.w.chance(q.w.Faults.Duplicate) {
		copies = 2
	}
	for range copies {
		q.sent++
		q.msgs = append(q.msgs, &message{id: fmt.Sprintf("%s-m%d", q.def.Logical, q.sent), body: body,
			visibleAt: time.Now().Add(delay)})
	}
}

// SendMessage implements delayqueue.SQSAPI.
func (q *Queue) SendMessage(ctx context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	body := aws.ToString(in.MessageBody)
	name := "sqs.Send " + q.def.Logical + " " + envelopeLabel(body)
	var out *sqs.SendMessageOutput
	err := q.w.do(ctx, KindSQS, name, func() error { return fmt.Errorf("sqs send: %w", errInjected) },
		func() (string, error) {
			if in.DelaySeconds < 0 || in.DelaySeconds > 900 {
				return "refused: DelaySeconds out of range", fmt.Errorf("InvalidParameterValue: DelaySeconds %d", in.DelaySeconds)
			}
			n := len(q.msgs)
			q.put(body, time.Duration(in.DelaySeconds)*time.Second)
			q.w.noteSent(ctx, body)
			if a, ok := in.MessageAttributes[quarantine.AttrCode]; ok {
				for _, m := range q.msgs[n:] {
					m.code = aws.ToString(a.StringValue)
				}
			}
			out = &sqs.SendMessageOutput{MessageId: aws.String(fmt.Sprintf("%s-m%d", q.def.Logical, q.sent))}
			return fmt.Sprintf("delay %ds", in.DelaySeconds), nil
		})
	return out, err
}

// SendMessageBatch implements delayqueue.SQSBatchAPI: one gated call; while
// faults last, each entry may fail on its own (a failed entry, the rest
// sent), with the chance of an SQS call failing.
func (q *Queue) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	labels := make([]string, 0, len(in.Entries))
	for _, e := range in.Entries {
		labels = append(labels, envelopeLabel(aws.ToString(e.MessageBody)))
	}
	name := "sqs.SendBatch " + q.def.Logical + " " + strings.Join(labels, ", ")
	var out *sqs.SendMessageBatchOutput
	err := q.w.do(ctx, KindSQS, name, func() error { return fmt.Errorf("sqs send batch: %w", errInjected) },
		func() (string, error) {
			if len(in.Entries) == 0 || len(in.Entries) > 10 {
				return "refused: batch size", fmt.Errorf("TooManyEntriesInBatchRequest: %d", len(in.Entries))
			}
			out = &sqs.SendMessageBatchOutput{}
			var failed []string
			for _, e := range in.Entries {
				if e.DelaySeconds < 0 || e.DelaySeconds > 900 {
					return "refused: DelaySeconds out of range", fmt.Errorf("InvalidParameterValue: DelaySeconds %d", e.DelaySeconds)
				}
				if q.w.faultsOn() && q.w.chance(q.w.Faults.Fail[KindSQS]) {
					out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError")})
					failed = append(failed, envelopeLabel(aws.ToString(e.MessageBody)))
					q.w.noteSendFailed(ctx)
					continue
				}
				q.put(aws.ToString(e.MessageBody), time.Duration(e.DelaySeconds)*time.Second)
				q.w.noteSent(ctx, aws.ToString(e.MessageBody))
				out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id,
					MessageId: aws.String(fmt.Sprintf("%s-m%d", q.def.Logical, q.sent))})
			}
			if len(failed) > 0 {
				return "entries failed: " + strings.Join(failed, ", "), nil
			}
			return fmt.Sprintf("%d sent", len(in.Entries)), nil
		})
	return out, err
}

// noteSent records, for the follow-up check (Monitor.checkFollowUps),
// that the calling invocation sent a message of the envelope's kind for
// its event id.
func (w *World) noteSent(ctx context.Context, body string) {
	inv := invocationOf(ctx)
	if inv == nil {
		return
	}
	var e struct {
		Kind    string `json:"kind"`
		EventID string `json:"event_id"`
	}
	if json.Unmarshal([]byte(body), &e) != nil || e.Kind != contract.KindPoll {
		return
	}
	if w.pollSent == nil {
		w.pollSent = map[readKey]bool{}
	}
	w.pollSent[readKey{inv.ID, e.EventID}] = true
}

// noteSendFailed records that an entry of the calling invocation's send
// batch failed (an injected fault the invocation may only log).
func (w *World) noteSendFailed(ctx context.Context) {
	if inv := invocationOf(ctx); inv != nil {
		if w.sendFailed == nil {
			w.sendFailed = map[int]bool{}
		}
		w.sendFailed[inv.ID] = true
	}
}

func envelopeLabel(body string) string {
	var e struct {
		Kind    string `json:"kind"`
		EventID string `json:"event_id"`
	}
	if json.Unmarshal([]byte(body), &e) == nil && e.Kind != "" {
		return e.Kind + " " + e.EventID
	}
	return ""
}

// receive takes a batch of visible messages (in a seeded order) for the
// mapping; nil when none is visible. Messages past MaxReceiveCount go to
// the DLQ instead.
func (q *Queue) receive(now time.Time) []*message {
	var visible []*message
	for _, m := range q.msgs {
		if !m.visibleAt.After(now) {
			visible = append(visible, m)
		}
	}
	if len(visible) == 0 {
		return nil
	}
	q.w.rng.Shuffle(len(visible), func(i, j int) { visible[i], visible[j] = visible[j], visible[i] })
	n := 1 + q.w.rng.IntN(q.def.BatchSize)
	var batch []*message
	for _, m := range visible {
		if len(batch) == n {
			break
		}
		if m.receives >= q.def.MaxReceiveCount {
			q.remove(m)
			q.DLQ = append(q.DLQ, m)
			q.w.record(nil, "sqs.DLQ "+q.def.Logical, m.id+" "+envelopeLabel(m.body))
			continue
		}
		m.receives++
		m.visibleAt = now.Add(time.Duration(q.def.VisibilityTimeoutSeconds) * time.Second)
		batch = append(batch, m)
	}
	q.Received += len(batch)
	return batch
}

func (q *Queue) remove(m *message) {
	if i := slices.Index(q.msgs, m); i >= 0 {
		q.msgs = slices.Delete(q.msgs, i, i+1)
	}
}

// empty reports whether no message waits (the DLQ aside).
func (q *Queue) empty() bool { return len(q.msgs) == 0 }

// nextVisible is when the next message becomes visible.
func (q *Queue) nextVisible() (time.Time, bool) {
	var t time.Time
	for _, m := range q.msgs {
		if t.IsZero() || m.visibleAt.Before(t) {
			t = m.visibleAt
		}
	}
	return t, !t.IsZero()
}

// sqsEvent is the event the mapping invokes the function with.
func sqsEvent(batch []*message) events.SQSEvent {
	ev := events.SQSEvent{}
	for _, m := range batch {
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: m.id, Body: m.body, EventSource: "aws:sqs",
			Attributes: map[string]string{"ApproximateReceiveCount": strconv.Itoa(m.receives)},
		})
	}
	return ev
}

// settle applies the function's answer: on success every message not
// reported as a batch item failure is deleted; an error or a crash
// deletes nothing (the batch becomes visible again).
func (q *Queue) settle(batch []*message, resp any, err error, crashed, faulted bool) {
	if crashed || err != nil {
		if faulted {
			for _, m := range batch {
				m.faulted++
			}
		}
		return
	}
	failed := map[string]bool{}
	switch r := resp.(type) {
	case events.SQSEventResponse:
		for _, f := range r.BatchItemFailures {
			failed[f.ItemIdentifier] = true
		}
	case *events.SQSEventResponse:
		for _, f := range r.BatchItemFailures {
			failed[f.ItemIdentifier] = true
		}
	}
	for _, m := range batch {
		if !failed[m.id] {
			q.remove(m)
		} else if faulted {
			m.faulted++
		}
	}
}

// Event is one event put on the bus.
type Event struct {
	At         time.Duration
	ID         string
	DetailType string
	Detail     json.RawMessage
}

// Bus is the EventBridge bus: the topology's rules route input detail-types
// to their queues; every event is captured.
type Bus struct {
	w      *World
	rules  map[string]*Queue // detail-type → target queue
	Events []Event
	n      int
	// observers see every event put by an invocation, at the moment it
	// is put (inv nil for the world's own producers): checkers that need
	// the state of the world at publish time hook in here.
	observers []func(inv *Invocation, e Event)
}

// Observe adds an observer of every event put on the bus.
func (b *Bus) Observe(f func(inv *Invocation, e Event)) { b.observers = append(b.observers, f) }

var _ eventbus.EventBridgeAPI = (*Bus)(nil)

// PutEvents implements eventbus.EventBridgeAPI.
func (b *Bus) PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	name := "bus.Put"
	for _, e := range in.Entries {
		name += " " + aws.ToString(e.DetailType)
	}
	inv := invocationOf(ctx)
	out := &eventbridge.PutEventsOutput{}
	err := b.w.do(ctx, KindBus, name, func() error { return fmt.Errorf("put events: %w", errInjected) },
		func() (string, error) {
			// While faults last, an entry may fail on its own
			// (FailedEntryCount and the entry's ErrorCode; the others are
			// put), as PutEvents answers under throttling or an internal
			// failure.
			failed := 0
			for _, e := range in.Entries {
				if b.w.faultsOn() && b.w.chance(b.w.Faults.BusEntryFail) {
					failed++
					if inv != nil {
						inv.fault()
					}
					out.Entries = append(out.Entries, ebtypes.PutEventsResultEntry{
						ErrorCode:    aws.String([]string{"InternalFailure", "ThrottlingException"}[b.w.rng.IntN(2)]),
						ErrorMessage: aws.String("injected")})
					continue
				}
				ev := b.put(aws.ToString(e.DetailType), json.RawMessage(aws.ToString(e.Detail)))
				out.Entries = append(out.Entries, ebtypes.PutEventsResultEntry{EventId: aws.String(ev.ID)})
				for _, o := range b.observers {
					o(inv, ev)
				}
			}
			out.FailedEntryCount = int32(failed)
			if failed > 0 {
				return fmt.Sprintf("%d of %d entries failed", failed, len(in.Entries)), nil
			}
			return "ok", nil
		})
	return out, err
}

// put captures an event and routes it.
func (b *Bus) put(detailType string, detail json.RawMessage) Event {
	b.n++
	id := fmt.Sprintf("ev-%d", b.n)
	ev := Event{At: b.w.since(), ID: id, DetailType: detailType, Detail: append(json.RawMessage(nil), detail...)}
	b.Events = append(b.Events, ev)
	q := b.rules[detailType]
	if q == nil {
		return ev
	}
	env, _ := json.Marshal(map[string]any{
		"version": "0", "id": id, "detail-type": detailType, "source": contract.EventSource,
		"account": "000000000000", "time": time.Now().UTC().Format(time.RFC3339), "region": "eu-central-1",
		"resources": []string{}, "detail": detail,
	})
	q.put(string(env), 0)
	return ev
}
