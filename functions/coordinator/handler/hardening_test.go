package handler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/localeflow/localeflow/adapters/delayqueue"
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
