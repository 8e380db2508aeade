package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/localeflow/localeflow/adapters/delayqueue"
	"github.com/localeflow/localeflow/adapters/quarantine"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/functions/coordinator/handler"
)

// TestFarFutureEnvelopeIsRefusedNotChained: an envelope due a year ahead
// was chained on every receive forever; it is now acknowledged with
// delayqueue.envelope_too_far and not re-sent.
func TestFarFutureEnvelopeIsRefusedNotChained(t *testing.T) {
	b := setup(t)
	e, _ := delayqueue.NewEnvelope(handler.KindRun, "evt-h-1", "", b.now.Add(365*24*time.Hour))
	body, _ := e.Marshal()
	resp := b.invoke(t, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "far", Body: string(body)}}})
	if len(resp.BatchItemFailures) != 0 || len(b.queue.sent) != 0 {
		t.Fatalf("far-future envelope: failures %+v, sent %+v", resp, b.queue.sent)
	}
	if !strings.Contains(b.logs.String(), "delayqueue.envelope_too_far") {
		t.Fatalf("no envelope_too_far log:\n%s", b.logs.String())
	}
}

// quarantineSQS records quarantine sends.
type quarantineSQS struct {
	mu   sync.Mutex
	sent []*sqs.SendMessageInput
	err  error
}

func (q *quarantineSQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err != nil {
		return nil, q.err
	}
	q.sent = append(q.sent, in)
	return &sqs.SendMessageOutput{}, nil
}

func withRejecter(q *quarantineSQS, metrics *bytes.Buffer) func(*handler.Config) {
	return func(c *handler.Config) {
		c.Rejecter = &quarantine.Rejecter{SQS: q, QueueURL: "https://sqs.local/quarantine", Source: "ReleaseQueue",
			Function: "coordinator", Metrics: metrics}
	}
}

// TestRejectedInputsAreQuarantined: inputs that can never succeed (bad
// signature, unknown detail-type, not JSON) were acknowledged with a WARN
// line only; they are now quarantined with their code and counted.
func TestRejectedInputsAreQuarantined(t *testing.T) {
	q, metrics := &quarantineSQS{}, &bytes.Buffer{}
	b := setup(t, withRejecter(q, metrics))
	raw := readTestdata(t, "sqs_invalid.json")
	var batch events.SQSEvent
	if err := json.Unmarshal(raw, &batch); err != nil {
		t.Fatal(err)
	}
	if resp := b.invokeRaw(t, raw); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("%+v", resp)
	}
	if len(q.sent) != len(batch.Records) {
		t.Fatalf("%d quarantined, want %d", len(q.sent), len(batch.Records))
	}
	codes := map[string]bool{}
	for _, in := range q.sent {
		codes[*in.MessageAttributes[quarantine.AttrCode].StringValue] = true
		if *in.MessageAttributes[quarantine.AttrSource].StringValue != "ReleaseQueue" {
			t.Errorf("source %v", in.MessageAttributes)
		}
	}
	for _, code := range []string{release.CodeEventSignatureInvalid, handler.CodeMessageInvalid, release.CodeEventDetailType} {
		if !codes[code] {
			t.Errorf("no message quarantined with %s (%v)", code, codes)
		}
	}
	if n := strings.Count(metrics.String(), `"MessagesRejected":1`); n != len(batch.Records) {
		t.Fatalf("%d metric lines:\n%s", n, metrics.String())
	}
}

// TestFinalStepFailureIsNotQuarantined: a release that fails for good
// (evidence attempts exhausted) is an outcome, not a rejected input.
func TestFinalStepFailureIsNotQuarantined(t *testing.T) {
	q := &quarantineSQS{}
	b := setup(t, withRejecter(q, &bytes.Buffer{}))
	b.resp.FailFirst = 100
	b.invokeRaw(t, readTestdata(t, "sqs_plan.json"))
	b.invokeRaw(t, readTestdata(t, "sqs_jobs.json"))
	for range 30 {
		batch := b.queue.take(t)
		if len(batch.Records) == 0 {
			break
		}
		for _, m := range batch.Records {
			env, _ := delayqueue.Parse([]byte(m.Body))
			if at := env.NotBefore(); at.After(*b.now) {
				*b.now = at
			}
		}
		b.invoke(t, batch)
	}
	if !strings.Contains(b.logs.String(), release.CodeAttemptsExhausted) {
		t.Fatal("exhaustion not reached")
	}
	if len(q.sent) != 0 {
		t.Fatalf("a final step failure was quarantined: %d", len(q.sent))
	}
}

// TestQuarantineOutageRedeliversTheInput: a rejected input that cannot be
// quarantined is a batch item failure, never acknowledged.
func TestQuarantineOutageRedeliversTheInput(t *testing.T) {
	q := &quarantineSQS{err: errors.New("sqs down")}
	b := setup(t, withRejecter(q, &bytes.Buffer{}))
	resp := b.invoke(t, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "bad", Body: `{not json`}}})
	if len(resp.BatchItemFailures) != 1 {
		t.Fatalf("%+v", resp)
	}
}

// recordingExpirer records ExpireTexts calls.
type recordingExpirer struct {
	mu    sync.Mutex
	calls map[string]time.Time
}

func (r *recordingExpirer) ExpireTexts(_ context.Context, eventID string, at time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.calls == nil {
		r.calls = map[string]time.Time{}
	}
	r.calls[eventID] = at
	return nil
}

func drainQueue(t *testing.T, b *bundle) {
	t.Helper()
	for range 30 {
		batch := b.queue.take(t)
		if len(batch.Records) == 0 {
			return
		}
		for _, m := range batch.Records {
			env, _ := delayqueue.Parse([]byte(m.Body))
			if at := env.NotBefore(); at.After(*b.now) {
				*b.now = at
			}
		}
		b.invoke(t, batch)
	}
}

// TestTextsExpireAfterDeliveryOrBlock: the texts of a release were kept
// forever; once it is delivered or blocked for good the handler sets their
// expiry a retention (default 7 days) later, and not before.
func TestTextsExpireAfterDeliveryOrBlock(t *testing.T) {
	t.Run("delivered", func(t *testing.T) {
		texts := &recordingExpirer{}
		b := setup(t, func(c *handler.Config) { c.Texts = texts })
		b.invokeRaw(t, readTestdata(t, "sqs_plan.json"))
		if len(texts.calls) != 0 {
			t.Fatal("texts expire before the release ends")
		}
		b.invokeRaw(t, readTestdata(t, "sqs_jobs.json"))
		drainQueue(t, b)
		if b.bus.count(contract.DetailDeliveryDelivered) != 1 || len(texts.calls) != 1 {
			t.Fatalf("delivered %d, expiries %v", b.bus.count(contract.DetailDeliveryDelivered), texts.calls)
		}
		for _, at := range texts.calls {
			if got := at.Sub(*b.now); got != handler.DefaultTextRetention {
				t.Fatalf("expiry %s after delivery, want %s", got, handler.DefaultTextRetention)
			}
		}
	})
	t.Run("blocked", func(t *testing.T) {
		texts := &recordingExpirer{}
		b := setup(t, func(c *handler.Config) { c.Texts = texts; c.TextRetention = 48 * time.Hour })
		b.resp.FailFirst = 100
		b.invokeRaw(t, readTestdata(t, "sqs_plan.json"))
		b.invokeRaw(t, readTestdata(t, "sqs_jobs.json"))
		drainQueue(t, b)
		if !strings.Contains(b.logs.String(), release.CodeAttemptsExhausted) || len(texts.calls) != 1 {
			t.Fatalf("blocked release: expiries %v", texts.calls)
		}
		for _, at := range texts.calls {
			if got := at.Sub(*b.now); got != 48*time.Hour {
				t.Fatalf("expiry %s after the block, want 48h", got)
			}
		}
	})
}
