package handler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/adapters/delayqueue"
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
