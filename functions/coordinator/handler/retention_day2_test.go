package handler_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/localeflow/localeflow/adapters/delayqueue"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/functions/coordinator/handler"
	"github.com/localeflow/localeflow/signing"
)

// deliverEnvelope is a release.deliver step message for eventID.
func deliverEnvelope(id, eventID string) events.SQSMessage {
	return events.SQSMessage{MessageId: id, EventSource: "aws:sqs",
		Body:       fmt.Sprintf(`{"schema":"localeflow.delayed.v1","kind":%q,"event_id":%q,"not_before_ms":0}`, handler.KindDeliver, eventID),
		Attributes: map[string]string{"ApproximateReceiveCount": "1"}}
}

// TestTextsExpireOnlyWhenTheReleaseEnds (issue 25, finding 4): a final
// step error that does not block the release (a stray release.deliver
// envelope: cms.delivery.missing) started the texts' retention of a
// release still in progress; only a delivered or blocked release's texts
// expire.
func TestTextsExpireOnlyWhenTheReleaseEnds(t *testing.T) {
	texts := &recordingExpirer{}
	b := setup(t, func(c *handler.Config) { c.Texts = texts })
	b.invokeRaw(t, readTestdata(t, "sqs_plan.json"))
	resp := b.invoke(t, events.SQSEvent{Records: []events.SQSMessage{deliverEnvelope("m-stray", "evt-h-1")}})
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("stray deliver: %+v", resp)
	}
	if len(texts.calls) != 0 {
		t.Fatalf("texts of a release in progress expire after a stray deliver envelope: %v", texts.calls)
	}
	if s, _ := b.store.Load(b.ctxT(), "evt-h-1"); s.Blocked != nil {
		t.Fatalf("stray deliver blocked the release: %+v", s.Blocked)
	}
	// The release goes on and its texts expire once it is delivered.
	b.invokeRaw(t, readTestdata(t, "sqs_jobs.json"))
	drainQueue(t, b)
	if b.bus.count(contract.DetailDeliveryDelivered) != 1 || len(texts.calls) != 1 {
		t.Fatalf("delivered %d, expiries %v", b.bus.count(contract.DetailDeliveryDelivered), texts.calls)
	}
}

// TestRedriveAfterTextsExpiredKeepsDelivered (issue 25, finding 3,
// through the handler): the jobs' input messages come back (a DLQ redrive
// or quarantine replay, receive count > 1) after the delivered release's
// texts were deleted: nothing fails, nothing is blocked.
func TestRedriveAfterTextsExpiredKeepsDelivered(t *testing.T) {
	b := setup(t)
	b.invokeRaw(t, readTestdata(t, "sqs_plan.json"))
	b.invokeRaw(t, readTestdata(t, "sqs_jobs.json"))
	drainQueue(t, b)
	if b.bus.count(contract.DetailDeliveryDelivered) != 1 {
		t.Fatal("not delivered")
	}
	*b.now = b.now.Add(8 * 24 * time.Hour)
	if n := b.store.DeleteTexts("evt-h-1"); n != 4 {
		t.Fatalf("%d texts deleted", n)
	}
	var batch events.SQSEvent
	if err := jsonUnmarshal(readTestdata(t, "sqs_jobs.json"), &batch); err != nil {
		t.Fatal(err)
	}
	for i := range batch.Records {
		batch.Records[i].Attributes["ApproximateReceiveCount"] = "4"
	}
	if resp := b.invoke(t, batch); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("redrive: %+v", resp)
	}
	drainQueue(t, b)
	s, _ := b.store.Load(b.ctxT(), "evt-h-1")
	if s.Blocked != nil {
		t.Fatalf("delivered release blocked after its texts expired: %+v", s.Blocked)
	}
}

// TestReturningMessagesDoNotReannounce (issue 25, finding 6): after a
// coordinator restart every returning message (receive count > 1)
// re-published every stored approval and the delivery's event — 685
// release.approved events for one 30-locale release. An approval or a
// delivery status whose event was published is not announced again; the
// release's events stay at one per approval, one ready, one delivered.
func TestReturningMessagesDoNotReannounce(t *testing.T) {
	const locales = 30
	fx := releasetest.NewFixture()
	var ls []string
	for i := range locales {
		ls = append(ls, fmt.Sprintf("x%02d-ZZ", i))
	}
	p := releasetest.NewPlan("evt-storm", ls...)
	inputs := []events.SQSMessage{envelopeMessage("m-plan", contract.DetailPlanAccepted, fx.Detail(p.PlanPayload()))}
	for _, l := range ls {
		inputs = append(inputs, envelopeMessage("m-"+l, contract.DetailJobCompleted, fx.Detail(p.ResultPayload(l, releasetest.ResultOptions{}))))
	}
	b := setup(t)
	var steps []events.SQSMessage
	run := func(ms []events.SQSMessage) {
		for start := 0; start < len(ms); start += 10 {
			if resp := b.invoke(t, batch(ms[start:min(start+10, len(ms))]...)); len(resp.BatchItemFailures) != 0 {
				t.Fatalf("batch failures %+v", resp)
			}
		}
	}
	drain := func() {
		for range 200 {
			next := b.queue.take(t)
			if len(next.Records) == 0 {
				return
			}
			for i, m := range next.Records {
				env, _ := delayqueue.Parse([]byte(m.Body))
				if at := env.NotBefore(); at.After(*b.now) {
					*b.now = at
				}
				m.MessageId = fmt.Sprintf("s-%d-%d", len(steps), i)
				steps = append(steps, m)
			}
			run(next.Records)
		}
	}
	run(inputs)
	drain()
	if b.bus.count(contract.DetailDeliveryDelivered) != 1 {
		t.Fatalf("not delivered:\n%s", b.logs.String())
	}
	// The restart: every message the coordinator ever handled comes back
	// once more, as SQS redelivers the messages of a lost invocation.
	var again []events.SQSMessage
	for _, m := range append(append([]events.SQSMessage{}, inputs...), steps...) {
		again = append(again, received(m, 2))
	}
	run(again)
	drain()
	approved, ready, delivered := b.bus.count(contract.DetailReleaseApproved), b.bus.count(contract.DetailDeliveryReady), b.bus.count(contract.DetailDeliveryDelivered)
	if approved != locales || ready != 1 || delivered != 1 {
		t.Fatalf("after the restart: %d approved (want %d), %d ready, %d delivered (want 1 each) from %d returning messages",
			approved, locales, ready, delivered, len(again))
	}
}

// TestDLQRedriveOfAnOldInputIsIngested (issue 25, finding 10): the DLQs
// keep a message 14 days, but inputs older than 96 h were refused as
// stale, so the alarmed recovery path (a DLQ redrive) lost them. With the
// default window a v2 input redriven 13 days after it was signed is
// ingested and its release runs.
func TestDLQRedriveOfAnOldInputIsIngested(t *testing.T) {
	b := setup(t)
	fx := releasetest.NewFixture()
	p := releasetest.NewPlan("evt-redrive", "de-DE")
	signedAt := b.now.Add(-13 * 24 * time.Hour)
	plan, err := signing.EventDetailV2(fx.EventKey, contract.DetailPlanAccepted, signedAt, p.PlanPayload())
	if err != nil {
		t.Fatal(err)
	}
	job, err := signing.EventDetailV2(fx.EventKey, contract.DetailJobCompleted, signedAt, p.ResultPayload("de-DE", releasetest.ResultOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	msgs := []events.SQSMessage{
		received(envelopeMessage("m-plan", contract.DetailPlanAccepted, plan), 6),
		received(envelopeMessage("m-job", contract.DetailJobCompleted, job), 6),
	}
	if resp := b.invoke(t, batch(msgs...)); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("redrive: %+v", resp)
	}
	drainQueue(t, b)
	if s, _ := b.store.Load(b.ctxT(), "evt-redrive"); s.Plan == nil || s.Delivery == nil || s.Delivery.Status != release.StateSucceeded {
		t.Fatalf("redriven inputs not ingested and delivered:\n%s", b.logs.String())
	}
}
