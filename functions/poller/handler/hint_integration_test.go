package handler_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/localeflow/localeflow/adapters/cms/cmstest"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/monitor"
)

func (w *timeWarpSQS) peekDelay(body string) int32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if d := w.delays[body]; len(d) > 0 {
		return d[0]
	}
	return 0
}

// handleOnly plays the event source mapping in real time, but only for
// the messages keep selects: the others are received with a long
// visibility timeout and left alone (as if SQS still held them back). It
// returns the number of messages left alone once done reports true, and
// fails after within.
func (e *stackEnv) handleOnly(keep func(body string, delay int32) bool, done func() bool, within time.Duration) int {
	e.t.Helper()
	ctx := context.Background()
	skipped := 0
	for deadline := time.Now().Add(within); time.Now().Before(deadline); {
		if done() {
			return skipped
		}
		out, err := e.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(e.res.queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 900,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		})
		if err != nil {
			e.t.Fatalf("receive: %v", err)
		}
		var ev events.SQSEvent
		for _, m := range out.Messages {
			body := aws.ToString(m.Body)
			if !keep(body, e.warp.peekDelay(body)) {
				skipped++
				continue
			}
			e.warp.takeDelay(body)
			ev.Records = append(ev.Records, events.SQSMessage{
				MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle),
				Body: body, Attributes: m.Attributes, EventSource: "aws:sqs",
			})
		}
		if len(ev.Records) == 0 {
			continue
		}
		if lag := time.Until(e.clock.Now()); lag < 0 {
			e.clock.Advance(-lag) // the monitor's clock follows real time
		}
		payload, _ := json.Marshal(ev)
		raw, err := e.invoke.Invoke(ctx, payload)
		if err != nil {
			e.t.Fatalf("invoke: %v", err)
		}
		var resp events.SQSEventResponse
		mustUnmarshal(e.t, raw, &resp)
		if len(resp.BatchItemFailures) != 0 {
			e.t.Fatalf("batch item failures %v", resp.BatchItemFailures)
		}
		for _, m := range ev.Records {
			if _, err := e.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(e.res.queueURL), ReceiptHandle: aws.String(m.ReceiptHandle)}); err != nil {
				e.t.Fatalf("delete: %v", err)
			}
		}
	}
	e.t.Fatalf("not done within %v", within)
	return skipped
}

// With a 10-minute poll interval, a change whose CMS status becomes
// published reaches terminal within seconds of the hint: the hint goes on
// the bus, the topology's rule routes it to the poll queue, and the poller
// polls at once (the 10-minute poll message is never handled).
func TestIntegrationHintEndsLongIntervalChangeWithinSeconds(t *testing.T) {
	e := setupStackWith(t, monitor.Config{WorkerID: "poller-it", PollInterval: 10 * time.Minute})
	e.cms.Script("evt-poller-0001", cmstest.StatusStep("processing"), cmstest.StatusStep("published"))
	e.dispatch()
	watching := func() bool {
		st, err := e.svc.Status(context.Background(), "evt-poller-0001")
		return err == nil && st.State == monitor.StateWatching
	}
	skipped := e.handleOnly(func(_ string, delay int32) bool { return delay == 0 }, watching, 30*time.Second)
	st, _ := e.svc.Status(context.Background(), "evt-poller-0001")
	if wait := time.Until(st.NextPoll); wait < 9*time.Minute {
		t.Fatalf("next poll in %v, want about 10 minutes", wait)
	}

	// The CMS status is now published; the CMS says so with a hint.
	sent := time.Now()
	out, err := e.eb.PutEvents(context.Background(), &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{
		EventBusName: aws.String(e.res.bus), Source: aws.String(contract.EventSource),
		DetailType: aws.String(contract.DetailChangeHint), Detail: aws.String(`{"event_id":"evt-poller-0001","site_id":"site-berlin"}`),
	}}})
	if err != nil || out.FailedEntryCount != 0 {
		t.Fatalf("put hint: %v %+v", err, out)
	}
	isHint := func(body string, _ int32) bool {
		var env struct {
			DetailType string `json:"detail-type"`
		}
		return json.Unmarshal([]byte(body), &env) == nil && env.DetailType == contract.DetailChangeHint
	}
	skipped += e.handleOnly(isHint, e.final, 20*time.Second)
	latency := time.Since(sent)
	if latency > 5*time.Second {
		t.Fatalf("terminal %v after the hint, want within seconds", latency)
	}
	st, err = e.svc.Status(context.Background(), "evt-poller-0001")
	if err != nil || st.State != monitor.StateTerminal || st.RemoteStatus != "published" || st.PollAttempts != 2 {
		t.Fatalf("status %+v, %v", st, err)
	}
	if n := len(e.cms.RequestsFor("evt-poller-0001")); n != 2 {
		t.Fatalf("CMS saw %d requests, want 2", n)
	}
	if skipped == 0 {
		t.Fatal("the 10-minute poll message never showed up (the test would prove nothing)")
	}
	details := e.bus.Details()
	if len(details) != 1 || details[0]["state"] != "terminal" || details[0]["remote_status"] != "published" {
		t.Fatalf("terminal events %v", details)
	}
	t.Logf("terminal %v after the hint was put on the bus", latency.Round(time.Millisecond))
}
