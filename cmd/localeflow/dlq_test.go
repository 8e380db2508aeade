package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/dev/localtest"
)

func TestDLQUsage(t *testing.T) {
	for _, args := range [][]string{{"dlq"}, {"dlq", "list"}, {"dlq", "list", "bogus"}, {"dlq", "purge", "event"}, {"dlq", "list", "poll", "x"}} {
		r := runCLI(map[string]string{}, args...)
		if r.code != exitUsage || !strings.Contains(r.err, "dlq: list QUEUE or redrive QUEUE") {
			t.Errorf("%v: %+v", args, r)
		}
	}
}

// ebAttrs are the attributes EventBridge puts on a message it sends to a
// target's dead-letter queue.
func ebAttrs(rule, target, code string) map[string]types.MessageAttributeValue {
	s := func(v string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	return map[string]types.MessageAttributeValue{
		ebAttrRule: s(rule), ebAttrTarget: s(target), ebAttrErrorCode: s(code), "ERROR_MESSAGE": s("access denied"),
	}
}

// receiveAll drains url (short polls until two come back empty).
func receiveAll(t *testing.T, q *sqs.Client, url string) []types.Message {
	t.Helper()
	var out []types.Message
	// SQS (and kumo) may answer a receive with nothing while messages are
	// queued: five empty receives in a row end the scan.
	for empty := 0; empty < 5; {
		res, err := q.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Messages) == 0 {
			empty++
		} else {
			empty = 0
		}
		out = append(out, res.Messages...)
	}
	return out
}

// TestDLQOnLocalStack: undeliverable events had nowhere to go and the DLQs
// no command. On kumo's SQS (kumo's EventBridge does not deliver to target
// DLQs, so the test puts the messages EventBridge would: the event as
// body, RULE_ARN / TARGET_ARN / ERROR_CODE attributes): `dlq list event`
// shows them without their bodies; `dlq redrive event` sends the input
// event to its target queue unchanged, drops the schedule tick, keeps the
// message whose target is not this deployment's (exit 1 with its code);
// `dlq redrive poll` sends a poll DLQ message back to the poll queue.
func TestDLQOnLocalStack(t *testing.T) {
	localtest.Require(t)
	topo, res := localtest.Stack(t)
	q := localtest.SQS(t)
	ctx := context.Background()
	const secret = "SOURCE-TEXT-MUST-NOT-BE-PRINTED"
	event := fmt.Sprintf(`{"version":"0","id":"eb-1","detail-type":%q,"source":%q,"account":"000000000000","time":"2026-12-01T12:00:00Z","region":"us-east-1","resources":[],"detail":{"note":%q}}`,
		contract.DetailChangeDispatched, contract.EventSource, secret)
	ruleARN := "arn:aws:events:us-east-1:000000000000:rule/" + topo.BusName + "/" + topo.Rules[0].Name
	send := func(url, body string, attrs map[string]types.MessageAttributeValue) {
		if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body), MessageAttributes: attrs}); err != nil {
			t.Fatal(err)
		}
	}
	send(res.EventDLQ.URL, event, ebAttrs(ruleARN, res.PollQueue.ARN, "NoPermissions"))
	send(res.EventDLQ.URL, `{"version":"0","id":"eb-tick","detail-type":"Scheduled Event","source":"aws.events","detail":{}}`,
		ebAttrs("arn:aws:events:us-east-1:000000000000:rule/"+topo.Schedules[0].Name, "arn:aws:lambda:us-east-1:000000000000:function:"+topo.Prefix+"-poller", "Throttling"))
	send(res.EventDLQ.URL, `{"version":"0","id":"eb-other","detail-type":"x","source":"y","detail":{}}`,
		ebAttrs(ruleARN, "arn:aws:sqs:us-east-1:000000000000:someone-elses-queue", "NoPermissions"))
	p := "--prefix=" + topo.Prefix

	r := runCLI(nil, p, "--json", "dlq", "list", "event")
	var view dlqListView
	if r.code != exitOK || json.Unmarshal([]byte(r.out), &view) != nil || len(view.Messages) != 3 || view.Seen != 3 || !view.Complete || strings.Contains(r.out, secret) {
		t.Fatalf("dlq list event: %+v", r)
	}
	listed := view.Messages
	byBus := map[string]dlqMessage{}
	for _, m := range listed {
		byBus[m.BusEventID] = m
	}
	if m := byBus["eb-1"]; m.DetailType != contract.DetailChangeDispatched || m.Rule != topo.Rules[0].Name ||
		m.Target != topo.PollQueue.Name || m.ErrorCode != "NoPermissions" || len(m.BodySHA256) != 64 || m.SentMS == 0 {
		t.Errorf("listed %+v", m)
	}
	// Listing leaves every message queued: a second list sees them all.
	if r := runCLI(nil, p, "dlq", "list", "event"); r.code != exitOK || !strings.Contains(r.out, "3 in the DLQ") || strings.Contains(r.out, secret) {
		t.Fatalf("second list: %+v", r)
	}

	r = runCLI(nil, p, "dlq", "redrive", "event")
	if r.code != exitBad || !strings.Contains(r.err, codeDLQTarget) || !strings.Contains(r.out, "1 redriven, 1 schedule ticks dropped, 1 kept of 3 seen") {
		t.Fatalf("dlq redrive event: %+v", r)
	}
	got := receiveAll(t, q, res.PollQueue.URL)
	if len(got) != 1 || aws.ToString(got[0].Body) != event {
		t.Fatalf("poll queue after redrive: %d messages %v", len(got), got)
	}
	left := receiveAll(t, q, res.EventDLQ.URL)
	if len(left) != 1 || !strings.Contains(aws.ToString(left[0].Body), "eb-other") {
		t.Fatalf("event DLQ after redrive: %v", left)
	}

	delayed := `{"schema":"localeflow.delayed.v1","kind":"poll","event_id":"evt-dlq-1","not_before_ms":0}`
	send(res.PollQueue.DLQURL, delayed, nil)
	r = runCLI(nil, p, "dlq", "list", "poll")
	if r.code != exitOK || !strings.Contains(r.out, "evt-dlq-1") || !strings.Contains(r.out, "1 in the DLQ") {
		t.Fatalf("dlq list poll: %+v", r)
	}
	if r := runCLI(nil, p, "dlq", "redrive", "poll"); r.code != exitOK || !strings.Contains(r.out, "1 redriven, 0 schedule ticks dropped, 0 kept") {
		t.Fatalf("dlq redrive poll: %+v", r)
	}
	if got := receiveAll(t, q, res.PollQueue.URL); len(got) != 1 || aws.ToString(got[0].Body) != delayed {
		t.Fatalf("poll queue after the poll DLQ redrive: %v", got)
	}
	if got := receiveAll(t, q, res.PollQueue.DLQURL); len(got) != 0 {
		t.Fatalf("poll DLQ not empty: %v", got)
	}
}
