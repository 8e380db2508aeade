package handler_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/localeflow/localeflow/adapters/delayqueue"
	"github.com/localeflow/localeflow/adapters/quarantine"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/dev/logcapture"
	"github.com/localeflow/localeflow/functions/poller/handler"
)

// TestFarFutureEnvelopeIsRefusedNotChained: an envelope due years ahead
// was re-sent (chained) on every receive, forever; it is now acknowledged
// with delayqueue.envelope_too_far and nothing is sent.
func TestFarFutureEnvelopeIsRefusedNotChained(t *testing.T) {
	e := setup(t)
	far, err := delayqueue.NewEnvelope(handler.KindPoll, "evt-poller-0001", "", t0.Add(24*365*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := far.Marshal()
	resp := e.invokeSQS(batchOf(t, 1, string(body)))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("refused envelope must be acknowledged: %+v", resp.BatchItemFailures)
	}
	if n := len(e.sqs.Sent()); n != 0 {
		t.Fatalf("far-future envelope was chained (%d sends)", n)
	}
	if !strings.Contains(e.logs.String(), `"cause":"delayqueue.envelope_too_far"`) {
		t.Fatalf("no envelope_too_far log:\n%s", e.logs.String())
	}
	// Within the horizon (longest wait 1 h + 2 h slack) it is still chained.
	near, _ := delayqueue.NewEnvelope(handler.KindPoll, "evt-poller-0001", "", t0.Add(2*time.Hour))
	body, _ = near.Marshal()
	if resp := e.invokeSQS(batchOf(t, 1, string(body))); len(resp.BatchItemFailures) != 0 || len(e.sqs.Sent()) != 1 {
		t.Fatalf("envelope within the horizon not chained: %+v, %d sends", resp, len(e.sqs.Sent()))
	}
}

// TestRejectedMessagesAreQuarantined: a message that can never succeed was
// acknowledged with one WARN line; it is now put on the quarantine queue
// with its code, counted as MessagesRejected{Function, Code}, and only
// then acknowledged.
func TestRejectedMessagesAreQuarantined(t *testing.T) {
	q := &fakeSQS{}
	metrics := &logcapture.Buffer{}
	e := setup(t, func(c *handler.Config) {
		c.Rejecter = &quarantine.Rejecter{SQS: q, QueueURL: "https://sqs.local/quarantine", Source: "PollQueue",
			Function: "poller", Metrics: metrics}
	})
	raw := testdata(t, "sqs_malformed.json")
	var batch events.SQSEvent
	mustUnmarshal(t, raw, &batch)
	resp := e.invokeSQS(raw)
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %+v", resp.BatchItemFailures)
	}
	sent := q.Sent()
	if len(sent) != len(batch.Records) {
		t.Fatalf("%d quarantined, want all %d", len(sent), len(batch.Records))
	}
	bodies := map[string]string{}
	for _, m := range batch.Records {
		bodies[m.MessageId] = m.Body
	}
	codes := map[string]string{}
	for _, in := range sent {
		id := *in.MessageAttributes[quarantine.AttrMessageID].StringValue
		code := *in.MessageAttributes[quarantine.AttrCode].StringValue
		if *in.MessageBody != bodies[id] || *in.MessageAttributes[quarantine.AttrSource].StringValue != "PollQueue" || *in.QueueUrl != "https://sqs.local/quarantine" {
			t.Errorf("quarantined %s: %+v", id, in)
		}
		codes[id] = code
	}
	for id, want := range map[string]string{
		"m-bad-json": handler.CodeMessageInvalid, "m-bad-schema": "delayqueue.envelope_invalid",
		"m-bad-dispatch": "lifecycle_monitor.dispatch_invalid", "m-unsigned-dispatch": monitor.CodeDispatchEnvelope,
		"m-forged-dispatch": monitor.CodeDispatchSignature,
	} {
		if codes[id] != want {
			t.Errorf("%s quarantined with code %q, want %q", id, codes[id], want)
		}
	}
	lines := strings.Split(strings.TrimSpace(metrics.String()), "\n")
	if len(lines) != len(batch.Records) || !strings.Contains(lines[0], `"MessagesRejected":1`) || !strings.Contains(lines[0], `"Function":"poller"`) {
		t.Fatalf("metric lines:\n%s", metrics.String())
	}
}

// TestQuarantineOutageRedeliversTheMessage: when the quarantine send fails
// the message is a batch item failure (redelivered), never acknowledged.
func TestQuarantineOutageRedeliversTheMessage(t *testing.T) {
	q := &fakeSQS{err: errors.New("sqs down")}
	e := setup(t, func(c *handler.Config) {
		c.Rejecter = &quarantine.Rejecter{SQS: q, QueueURL: "https://sqs.local/quarantine", Source: "PollQueue", Function: "poller"}
	})
	resp := e.invokeSQS(batchOf(t, 1, `{not json`))
	if len(resp.BatchItemFailures) != 1 {
		t.Fatalf("a message that could not be quarantined was acknowledged: %+v", resp)
	}
}
