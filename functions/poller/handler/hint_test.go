package handler_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/adapters/cms/cmstest"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/monitor"
)

const hintEvent = "evt-poller-0001"

// hintBody is the EventBridge envelope of a localeflow.change.hint as the
// rule delivers it to the poll queue.
func hintBody(eventID, siteID string) string {
	return fmt.Sprintf(`{"version":"0","id":"h-1","detail-type":%q,"source":%q,"account":"000000000000","time":"2026-11-30T00:00:00Z","region":"eu-central-1","resources":[],"detail":{"event_id":%q,"site_id":%q}}`,
		contract.DetailChangeHint, contract.EventSource, eventID, siteID)
}

// watchingLong registers the testdata change with a 10-minute poll
// interval and polls it once (processing): it is watching, next poll in
// 10 minutes.
func watchingLong(t *testing.T, steps ...cmstest.Step) *env {
	t.Helper()
	e := setupWith(t, monitor.Config{WorkerID: "poller-test", PollInterval: 10 * time.Minute})
	e.cms.Script(hintEvent, append([]cmstest.Step{cmstest.StatusStep("processing")}, steps...)...)
	e.intake()
	e.follow()
	if st := e.status(hintEvent); st.State != monitor.StateWatching || !st.NextPoll.Equal(e.clock.Now().Add(10*time.Minute)) {
		t.Fatalf("before the hint: %s, next poll %v", st.State, st.NextPoll)
	}
	return e
}

func (e *env) hint(bodies ...string) {
	e.t.Helper()
	resp := e.invokeSQS(batchOf(e.t, 1, bodies...))
	if len(resp.BatchItemFailures) != 0 {
		e.t.Fatalf("hint failures: %+v", resp.BatchItemFailures)
	}
}

// A change watched every 10 minutes reaches terminal on the hint, not on
// the timer.
func TestHintPollsLongIntervalChangeAtOnce(t *testing.T) {
	e := watchingLong(t, cmstest.StatusStep("published"))
	e.clock.Advance(2 * time.Second)
	sentBefore := len(e.sqs.Sent())
	if resp := e.invokeSQS(testdata(t, "sqs_hint.json")); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("hint failures: %+v", resp.BatchItemFailures)
	}
	st := e.status(hintEvent)
	if st.State != monitor.StateTerminal || st.RemoteStatus != "published" || st.PollAttempts != 2 {
		t.Fatalf("after the hint: %s %s attempts %d", st.State, st.RemoteStatus, st.PollAttempts)
	}
	details := e.bus.Details()
	if last := details[len(details)-1]; last["event_id"] != hintEvent || last["state"] != "terminal" {
		t.Fatalf("terminal event %v", last)
	}
	if n := len(e.cms.RequestsFor(hintEvent)); n != 2 {
		t.Fatalf("CMS saw %d requests, want 2", n)
	}
	if n := len(e.sqs.Sent()); n != sentBefore {
		t.Fatalf("%d messages scheduled after terminal", n-sentBefore)
	}
	if !strings.Contains(e.logs.String(), "poller hint accepted") {
		t.Fatal("accepted hint not logged")
	}
}

// 1,000 hints for one change within one second cost at most one CMS
// request; after the gap a hint polls again.
func TestHintFloodCausesOneExtraRequest(t *testing.T) {
	e := watchingLong(t)
	before := len(e.cms.RequestsFor(hintEvent))
	bodies := make([]string, 10)
	for i := range bodies {
		bodies[i] = hintBody(hintEvent, "site-berlin")
	}
	for range 100 {
		e.hint(bodies...) // 10 per batch, concurrently
		e.clock.Advance(10 * time.Millisecond)
	}
	if extra := len(e.cms.RequestsFor(hintEvent)) - before; extra != 1 {
		t.Fatalf("1000 hints caused %d CMS requests, want 1", extra)
	}
	st := e.status(hintEvent)
	if st.State != monitor.StateWatching || st.ConsecutiveFailures != 0 || st.PollAttempts != 2 {
		t.Fatalf("after the flood: %+v", st)
	}
	if !strings.Contains(e.logs.String(), monitor.CodeHintTooSoon) {
		t.Fatal("refused hints not logged with their code")
	}
	// The gap (5 s by default) has passed since the hinted poll.
	e.clock.Advance(4 * time.Second)
	e.hint(hintBody(hintEvent, "site-berlin"))
	if extra := len(e.cms.RequestsFor(hintEvent)) - before; extra != 2 {
		t.Fatalf("a hint after the gap caused %d requests in all, want 2", extra)
	}
}

// A hint for a change in retry_wait, terminal or failed changes nothing:
// no write, no CMS request, nothing scheduled or published.
func TestHintChangesNothingOutsideWatching(t *testing.T) {
	tests := []struct {
		name  string
		step  cmstest.Step
		state monitor.State
		code  string
	}{
		{"retry_wait", cmstest.HTTPStep(503), monitor.StateRetryWait, monitor.CodeHintNotWatching},
		{"terminal", cmstest.StatusStep("published"), monitor.StateTerminal, monitor.CodeHintNotWatching},
		{"failed", cmstest.HTTPStep(404), monitor.StateFailed, monitor.CodeHintNotWatching},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := setup(t)
			e.cms.Script(hintEvent, tt.step, cmstest.StatusStep("published"))
			e.intake()
			e.follow()
			e.clock.Advance(time.Second)
			before, err := e.store.Get(context.Background(), hintEvent)
			if err != nil || before.State != tt.state {
				t.Fatalf("before the hint: %s, %v", before.State, err)
			}
			requests, sent, published := len(e.cms.RequestsFor(hintEvent)), len(e.sqs.Sent()), len(e.bus.Details())
			e.hint(hintBody(hintEvent, "site-berlin"))
			after, _ := e.store.Get(context.Background(), hintEvent)
			if fmt.Sprintf("%+v", after) != fmt.Sprintf("%+v", before) {
				t.Fatalf("hint changed the record:\n%+v\n%+v", before, after)
			}
			if len(e.cms.RequestsFor(hintEvent)) != requests || len(e.sqs.Sent()) != sent || len(e.bus.Details()) != published {
				t.Fatal("hint caused a request, a message or an event")
			}
			if !strings.Contains(e.logs.String(), tt.code) {
				t.Fatalf("hint no-op not logged with %s", tt.code)
			}
		})
	}
}

func TestHintUnknownOrForeignIsLoggedNoOp(t *testing.T) {
	e := watchingLong(t, cmstest.StatusStep("published"))
	requests := len(e.cms.RequestsFor(hintEvent))
	e.hint(hintBody("evt-unknown", "site-berlin"), hintBody(hintEvent, "site-paris"))
	if len(e.cms.RequestsFor(hintEvent)) != requests {
		t.Fatal("a hint for another site polled the change")
	}
	logs := e.logs.String()
	for _, code := range []string{monitor.CodeHintUnknown, monitor.CodeHintSiteMismatch} {
		if !strings.Contains(logs, code) {
			t.Errorf("no-op not logged with %s", code)
		}
	}
}

func TestMalformedHintsAreAcknowledged(t *testing.T) {
	e := setup(t)
	for _, body := range []string{
		strings.Replace(hintBody(hintEvent, "site-berlin"), `"site_id":"site-berlin"`, `"site_id":"site-berlin","status":"published"`, 1),
		strings.Replace(hintBody(hintEvent, "site-berlin"), `"source":"localeflow"`, `"source":"someone-else"`, 1),
		strings.Replace(hintBody(hintEvent, "site-berlin"), `"detail":{`, `"detail":[{`, 1) + "]",
		hintBody("evt 1", "site-berlin"),
	} {
		resp := e.invokeSQS(batchOf(t, 1, body))
		if len(resp.BatchItemFailures) != 0 {
			t.Fatalf("malformed hint %s redelivered", body)
		}
	}
	if strings.Count(e.logs.String(), "poller message dropped") != 4 {
		t.Fatalf("malformed hints not logged as dropped:\n%s", e.logs.String())
	}
}

// A hint for a change that is already due polls it only when the hint is
// redelivered (its first attempt may have moved the poll and then failed
// before polling); a first delivery leaves it to the poll message.
func TestRedeliveredHintPollsDueChange(t *testing.T) {
	e := watchingLong(t)
	e.clock.Advance(10 * time.Minute)
	requests := len(e.cms.RequestsFor(hintEvent))
	e.hint(hintBody(hintEvent, "site-berlin"))
	if n := len(e.cms.RequestsFor(hintEvent)); n != requests {
		t.Fatalf("first delivery of a hint for a due change polled it (%d requests)", n-requests)
	}
	if !strings.Contains(e.logs.String(), monitor.CodeHintAlreadyDue) {
		t.Fatal("already-due hint not logged with its code")
	}
	resp := e.invokeSQS(batchOf(t, 2, hintBody(hintEvent, "site-berlin")))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("redelivered hint failed: %+v", resp.BatchItemFailures)
	}
	if n := len(e.cms.RequestsFor(hintEvent)); n != requests+1 {
		t.Fatalf("redelivered hint made %d requests, want 1", n-requests)
	}
	if st := e.status(hintEvent); st.PollAttempts != 2 || st.State != monitor.StateWatching {
		t.Fatalf("after the redelivered hint: %+v", st)
	}
}
