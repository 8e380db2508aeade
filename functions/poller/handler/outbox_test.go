package handler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/localeflow/localeflow/adapters/cms"
	"github.com/localeflow/localeflow/adapters/cms/cmstest"
	"github.com/localeflow/localeflow/adapters/delayqueue"
	"github.com/localeflow/localeflow/adapters/eventbus"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/functions/poller/handler"
)

func (e *env) sweep() handler.SweepResult {
	e.t.Helper()
	// The scheduled sweep lists only changes due for at least the sweep
	// grace (monitor.Config.SweepGrace): it runs that much later.
	e.clock.Advance(e.svc.Config().SweepGrace)
	out, err := e.invoke(testdata(e.t, "scheduled.json"))
	if err != nil {
		e.t.Fatal(err)
	}
	var res handler.SweepResult
	if err := json.Unmarshal(out, &res); err != nil {
		e.t.Fatal(err)
	}
	return res
}

func (e *env) owedIDs() []string {
	e.t.Helper()
	ids, err := e.store.Owed(context.Background(), 1<<62, 100)
	if err != nil {
		e.t.Fatal(err)
	}
	return ids
}

// A terminal CMS answer's outcome is published only after the finishing
// write made the record final (docs/design.md "One outcome per change"):
// the write sets the outbox key, the publish comes from the record it
// returned, and the clearing write then empties the outbox; the event's
// outcome id is the stored record's.
func TestTerminalOutcomeIsPublishedAfterTheFinishingWrite(t *testing.T) {
	e := setup(t)
	e.cms.Script("evt-poller-0001", cmstest.StatusStep("published"))
	e.intake()
	before := len(e.bus.Details())
	var atPublish []monitor.Record
	e.bus.observe = func(map[string]any) {
		rec, err := e.store.Get(context.Background(), "evt-poller-0001")
		if err != nil {
			t.Error(err)
		}
		atPublish = append(atPublish, rec)
	}
	if res := e.sweep(); res.Polled != 1 || res.Terminal != 1 || res.Errors != 0 {
		t.Fatalf("sweep %+v", res)
	}
	if len(atPublish) != 1 || atPublish[0].State != monitor.StateTerminal || atPublish[0].OutboxMS != atPublish[0].UpdatedMS {
		t.Fatalf("records when the outcome was published: %+v; want one publish of a terminal record owing it", atPublish)
	}
	rec, err := e.store.Get(context.Background(), "evt-poller-0001")
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != monitor.StateTerminal || rec.OutboxMS != 0 || len(e.owedIDs()) != 0 {
		t.Fatalf("record %s outbox %d, owed %v; want terminal owing nothing", rec.State, rec.OutboxMS, e.owedIDs())
	}
	d := e.bus.Details()[before:]
	if len(d) != 1 || d[0]["state"] != "terminal" || d[0]["remote_status"] != "published" ||
		d[0]["outcome_id"] != monitor.OutcomeID("evt-poller-0001", monitor.StateTerminal, rec.UpdatedMS) ||
		d[0]["lifecycle_sha256"] != rec.LifecycleSHA256 || d[0]["site_id"] != "site-berlin" || d[0]["error_code"] != nil {
		t.Fatalf("events %v", d)
	}
}

// A terminal event whose publish fails on the sweep path stays owed and is published by a later sweep, with
// the same outcome id.
func TestSweepRepublishesOutcomeWhosePublishFailed(t *testing.T) {
	e := setup(t)
	e.cms.Script("evt-poller-0001", cmstest.StatusStep("published"))
	e.intake()
	before := len(e.bus.Details())
	e.bus.failNext(1)
	if res := e.sweep(); res.Polled != 1 || res.Terminal != 1 || res.Errors != 1 {
		t.Fatalf("sweep %+v", res)
	}
	if len(e.bus.Details()) != before || len(e.owedIDs()) != 1 {
		t.Fatalf("failed publish: %d events, owed %v", len(e.bus.Details())-before, e.owedIDs())
	}
	// Within the grace nothing is re-published; after it, once.
	if res := e.sweep(); res.Owed != 0 || len(e.bus.Details()) != before {
		t.Fatalf("sweep within the grace %+v", res)
	}
	e.clock.Advance(monitor.OutboxGrace)
	if res := e.sweep(); res.Owed != 1 || res.Announced != 1 || res.Errors != 0 {
		t.Fatalf("sweep after the grace %+v", res)
	}
	d := e.bus.Details()[before:]
	st := e.status("evt-poller-0001")
	if len(d) != 1 || d[0]["event_id"] != "evt-poller-0001" || d[0]["state"] != "terminal" || d[0]["remote_status"] != "published" ||
		d[0]["outcome_id"] != monitor.OutcomeID("evt-poller-0001", monitor.StateTerminal, st.Updated.UnixMilli()) {
		t.Fatalf("re-published events %v", d)
	}
	if len(e.owedIDs()) != 0 {
		t.Fatal("outcome still owed after its publish")
	}
	if res := e.sweep(); res.Owed != 0 || len(e.bus.Details()) != before+1 {
		t.Fatalf("a published outcome was published again: %+v", res)
	}
}

// The fifth expired lease drives the change to failed: its outcome is
// announced by the sweep that reclaims it.
func TestReclaimToFailedIsAnnounced(t *testing.T) {
	e := setup(t)
	e.intake()
	ctx := context.Background()
	for i := range 5 {
		c, ok, err := e.svc.Claim(ctx, "evt-poller-0001")
		if err != nil || !ok {
			t.Fatalf("claim %d: %v %v", i, ok, err)
		}
		e.clock.Advance(c.LeaseExpires.Sub(e.clock.Now()))
		e.sweep() // reclaims
		if st := e.status("evt-poller-0001"); i < 4 {
			e.clock.Advance(st.NextPoll.Sub(e.clock.Now()))
		}
	}
	st := e.status("evt-poller-0001")
	if st.State != monitor.StateFailed || st.LastErrorCode != monitor.ReclaimErrorCode {
		t.Fatalf("status %s %s", st.State, st.LastErrorCode)
	}
	d := e.bus.Details()
	if len(d) == 0 || d[len(d)-1]["state"] != "failed" || d[len(d)-1]["error_code"] != monitor.ReclaimErrorCode ||
		d[len(d)-1]["site_id"] != "site-berlin" {
		t.Fatalf("terminal events %v", d)
	}
	if len(e.owedIDs()) != 0 {
		t.Fatal("outcome still owed")
	}
}

// A tampered record marked failed with state_invalid while its message is
// handled is announced (with its identity null), then the message is
// acknowledged.
func TestStateInvalidIsAnnounced(t *testing.T) {
	e := setup(t)
	e.intake()
	e.store.Tamper("evt-poller-0001", func(r *monitor.Record) { r.JobCount = 9 })
	before := len(e.bus.Details())
	resp := e.invokeSQS(batchOf(t, 1, *e.sqs.Sent()[0].MessageBody))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %+v", resp.BatchItemFailures)
	}
	d := e.bus.Details()[before:]
	if len(d) != 1 || d[0]["event_id"] != "evt-poller-0001" || d[0]["state"] != "failed" ||
		d[0]["error_code"] != monitor.CodeStateInvalid || d[0]["site_id"] != nil || d[0]["plan_id"] != nil || d[0]["outcome_id"] == nil {
		t.Fatalf("terminal events %v", d)
	}
	if len(e.owedIDs()) != 0 {
		t.Fatal("outcome still owed")
	}
}

// Due entries that cannot be claimed (here: updated in the future, as a
// clock step back leaves them) fill whole pages at the head of the wake
// index; the sweep pages past them and still polls the change behind.
func TestSweepPagesPastUnclaimableHead(t *testing.T) {
	e := setup(t)
	e.h = mustHandler(t, e, 2)
	e.cms.Script("evt-poller-0001", cmstest.StatusStep("processing"))
	e.intake()
	for i := range 5 {
		id := fmt.Sprintf("evt-stuck-%d", i)
		registerDirect(t, e.svc, id, "site-berlin", 1)
		e.store.Tamper(id, func(r *monitor.Record) {
			r.CreatedMS -= 1000
			r.NextPollMS = r.CreatedMS
			r.UpdatedMS = e.clock.Now().Add(time.Hour).UnixMilli()
		})
	}
	e.clock.Advance(e.svc.Config().SweepGrace)
	res, err := e.h.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Polled != 1 || res.Skipped != 5 || res.Listed != 6 || res.Stopped != handler.StopDrained {
		t.Fatalf("sweep %+v", res)
	}
	if st := e.status("evt-poller-0001"); st.State != monitor.StateWatching || st.PollAttempts != 1 {
		t.Fatalf("change behind the unclaimable head was not polled: %s %d", st.State, st.PollAttempts)
	}
}

// mustHandler is e's handler with page size pageSize.
func mustHandler(t *testing.T, e *env, pageSize int) *handler.Handler {
	t.Helper()
	client, err := cms.New(cms.Config{BaseURL: e.cmsURL, Key: testKey, Timeout: 2 * time.Second, Clock: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	h, err := handler.New(handler.Config{
		Monitor: e.svc, Reader: client, Clock: e.clock, Log: slog.New(slog.NewJSONHandler(e.logs, nil)),
		Queue: delayqueue.New(e.sqs, "https://sqs.local/poll"), Bus: eventbus.New(e.bus, "lf-bus"),
		PageSize: pageSize,
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// Owed outcomes that cannot be published now fill whole pages at the head
// of the outbox; the sweep still publishes the ones behind them.
func TestSweepAnnouncesPastUnpublishableOutbox(t *testing.T) {
	e := setup(t)
	e.h = mustHandler(t, e, 2)
	refused := map[string]bool{}
	for i := range 5 {
		id := fmt.Sprintf("evt-owed-%d", i)
		registerDirect(t, e.svc, id, "site-berlin", 1)
		e.cms.Put(cmstest.Change{EventID: id, SiteID: "site-berlin", PlanID: "plan-" + id, WebsiteVersion: "v1",
			SourceSequence: 1, RequiredLocales: []string{"de-DE"}})
		e.cms.Script(id, cmstest.StatusStep("published"))
		if i < 4 {
			refused[id] = true
		}
		// Finish each a moment apart so the refused ones come first.
		if _, err := e.svc.PollOnce(context.Background(), id, e.reader(t)); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(time.Millisecond)
	}
	e.bus.mu.Lock()
	e.bus.refuse = refused
	e.bus.mu.Unlock()
	e.clock.Advance(monitor.OutboxGrace)
	res, err := e.h.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Owed != 5 || res.Announced != 1 || res.Errors != 4 {
		t.Fatalf("sweep %+v", res)
	}
	if ids := e.owedIDs(); len(ids) != 4 || refused["evt-owed-4"] {
		t.Fatalf("still owed %v", ids)
	}
	d := e.bus.Details()
	if len(d) != 1 || d[0]["event_id"] != "evt-owed-4" {
		t.Fatalf("published %v", d)
	}
}

// reader is a CMS client for e's test CMS.
func (e *env) reader(t *testing.T) monitor.LifecycleReader {
	t.Helper()
	client, err := cms.New(cms.Config{BaseURL: e.cmsURL, Key: testKey, Timeout: 2 * time.Second, Clock: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	return client
}
