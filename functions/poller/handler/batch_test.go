package handler_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/adapters/cms/cmstest"
	"github.com/localeflow/localeflow/adapters/delayqueue"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/monitor/monitortest"
)

// registerMany stores n pending changes due now that the test CMS answers
// with status, and returns their ids.
func (e *env) registerMany(n int, status string) []string {
	e.t.Helper()
	var ids []string
	for i := range n {
		id := fmt.Sprintf("evt-batch-%03d", i)
		rec := monitortest.NewRecord(id, core.Millis(e.clock.Now()))
		if _, ok, err := e.store.Create(context.Background(), rec); err != nil || !ok {
			e.t.Fatalf("create %s: %v %v", id, ok, err)
		}
		e.cms.Put(cmstest.Change{EventID: id, SiteID: rec.SiteID, PlanID: rec.PlanID, WebsiteVersion: rec.WebsiteVersion,
			SourceSequence: rec.SourceSequence, RequiredLocales: []string{"de-DE", "fr-FR"}})
		e.cms.Script(id, cmstest.StatusStep(status))
		ids = append(ids, id)
	}
	return ids
}

func pollBody(t *testing.T, id string, at time.Time) string {
	t.Helper()
	env, err := delayqueue.NewEnvelope("poll", id, "", at)
	if err != nil {
		t.Fatal(err)
	}
	b, err := env.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The next polls of one sweep go out ten to a SendMessageBatch request,
// never one SendMessage per poll.
func TestSweepSendsNextPollsInBatchesOfTen(t *testing.T) {
	e := setup(t)
	ids := e.registerMany(23, "processing")
	if res := e.sweep(); res.Polled != 23 || res.Errors != 0 {
		t.Fatalf("sweep %+v", res)
	}
	singles, batches := e.sqs.requests()
	if singles != 0 || batches != 3 {
		t.Fatalf("%d SendMessage and %d SendMessageBatch requests for 23 next polls; want 0 and 3", singles, batches)
	}
	var scheduled []string
	for _, m := range e.sqs.Sent() {
		env, err := delayqueue.Parse([]byte(*m.MessageBody))
		if err != nil {
			t.Fatal(err)
		}
		if m.DelaySeconds != int32(monitor.DefaultPollInterval/time.Second) {
			t.Fatalf("next poll of %s delayed %d s", env.EventID, m.DelaySeconds)
		}
		scheduled = append(scheduled, env.EventID)
	}
	slices.Sort(scheduled)
	if strings.Join(scheduled, ",") != strings.Join(ids, ",") {
		t.Fatalf("scheduled %v, want %v", scheduled, ids)
	}
}

// A sweep's failed batch entry is a failed follow-up of that poll: counted
// and logged, the others sent.
func TestSweepCountsAFailedBatchEntryAsAFailedFollowUp(t *testing.T) {
	e := setup(t)
	e.registerMany(12, "processing")
	e.sqs.refuse = map[string]bool{"evt-batch-004": true}
	if res := e.sweep(); res.Polled != 12 || res.Errors != 1 {
		t.Fatalf("sweep %+v; want 12 polled, 1 error", res)
	}
	if n := len(e.sqs.Sent()); n != 11 {
		t.Fatalf("%d next polls sent, want 11", n)
	}
	if !strings.Contains(e.logs.String(), `"event_id":"evt-batch-004"`) || !strings.Contains(e.logs.String(), delayqueue.CodeSendFailed) {
		t.Fatalf("failed send not logged:\n%s", e.logs.String())
	}
}

// An SQS batch sends its records' next polls in one SendMessageBatch
// request; a record whose entry failed is redelivered exactly as when its
// own SendMessage failed, the others are acknowledged.
func TestSQSBatchSendsNextPollsTogetherAndRedeliversAFailedEntry(t *testing.T) {
	e := setup(t)
	ids := e.registerMany(10, "processing")
	var bodies []string
	for _, id := range ids {
		bodies = append(bodies, pollBody(t, id, e.clock.Now()))
	}
	e.sqs.refuse = map[string]bool{ids[3]: true}
	resp := e.invokeSQS(batchOf(t, 1, bodies...))
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "m-3" {
		t.Fatalf("batch item failures %+v; want only m-3", resp.BatchItemFailures)
	}
	singles, batches := e.sqs.requests()
	if singles != 0 || batches != 1 || len(e.sqs.Sent()) != 9 {
		t.Fatalf("%d SendMessage, %d SendMessageBatch, %d sent; want 0, 1, 9", singles, batches, len(e.sqs.Sent()))
	}
	if st := e.status(ids[3]); st.State != monitor.StateWatching {
		t.Fatalf("%s is %s", ids[3], st.State)
	}
	if !strings.Contains(e.logs.String(), `"message_id":"m-3"`) || !strings.Contains(e.logs.String(), delayqueue.CodeSendFailed) {
		t.Fatalf("failed send not logged:\n%s", e.logs.String())
	}
}
