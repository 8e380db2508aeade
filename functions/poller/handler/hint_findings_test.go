package handler_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/localeflow/localeflow/adapters/cms"
	"github.com/localeflow/localeflow/adapters/cms/cmstest"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/functions/poller/handler"
)

// countingStore counts the store's hint writes.
type countingStore struct {
	monitor.Store
	hints *atomic.Int32
}

func (s countingStore) Hint(ctx context.Context, h monitor.Hint) (monitor.Record, bool, error) {
	s.hints.Add(1)
	return s.Store.Hint(ctx, h)
}

// rewire rebuilds the handler on a monitor service over store.
func (e *env) rewire(store monitor.Store) {
	e.t.Helper()
	svc, err := monitor.NewService(store, e.clock, e.cfg.Log, monitor.Config{WorkerID: "poller-test", PollInterval: e.svc.Config().PollInterval})
	if err != nil {
		e.t.Fatal(err)
	}
	e.cfg.Monitor = svc
	if e.h, err = handler.New(e.cfg); err != nil {
		e.t.Fatal(err)
	}
	e.lambda = lambda.NewHandler(e.h.Handle)
}

// A hint for a change whose lease is held (a poll in flight) costs one
// conditional write and returns at once (issue 24): it used to try again
// every 200 ms for the whole CMS timeout, so 10 hints cost 110 writes and a
// flood of hints could hold the poll queue's workers.
func TestHintForLeasedChangeCostsOneWrite(t *testing.T) {
	e := watchingLong(t, cmstest.StatusStep("published"))
	hints := &atomic.Int32{}
	e.rewire(countingStore{Store: e.store, hints: hints})
	e.clock.Advance(10 * time.Minute)
	if _, ok, err := e.svc.Claim(context.Background(), hintEvent); err != nil || !ok {
		t.Fatalf("claim = %v, %v", ok, err)
	}
	requests, sent := len(e.cms.RequestsFor(hintEvent)), len(e.sqs.Sent())
	bodies := make([]string, 10)
	for i := range bodies {
		bodies[i] = hintBody(hintEvent, "site-berlin")
	}
	start := time.Now()
	e.hint(bodies...)
	if n := hints.Load(); n != 10 {
		t.Fatalf("10 hints for a leased change cost %d hint writes, want 10", n)
	}
	if wall := time.Since(start); wall > time.Second {
		t.Errorf("10 hints for a leased change took %v (a wait for the lease)", wall)
	}
	if len(e.cms.RequestsFor(hintEvent)) != requests || len(e.sqs.Sent()) != sent {
		t.Fatal("a hint for a leased change caused a CMS request or a message")
	}
	if !strings.Contains(e.logs.String(), `"code":"`+monitor.CodeHintNotWatching+`","state":"leased"`) {
		t.Fatalf("refused hint not logged with %s:\n%s", monitor.CodeHintNotWatching, e.logs.String())
	}
}

// A hinted poll whose finishing write is refused (here: applied, with its
// answer lost) is followed up like one on the SQS and sweep paths (issue
// 24): the record is read, its next poll scheduled and the hint
// acknowledged. It used to be quarantined with nothing scheduled, leaving
// the change to the sweep.
func TestHintedPollWhoseWriteIsRefusedSchedulesTheNextPoll(t *testing.T) {
	e := watchingLong(t, cmstest.StatusStep("processing"))
	lose := &atomic.Int32{}
	lose.Store(1)
	e.rewire(lostAnswerStore{Store: e.store, lose: lose})
	e.clock.Advance(time.Second)
	sent := len(e.sqs.Sent())
	e.hint(hintBody(hintEvent, "site-berlin"))
	if lose.Load() > 0 {
		t.Fatal("the hinted poll's write answer was not lost")
	}
	logs := e.logs.String()
	if strings.Contains(logs, "poller message dropped") || !strings.Contains(logs, "poller lease lost") {
		t.Fatalf("a hinted poll's refused write must be followed up, not quarantined:\n%s", logs)
	}
	st := e.status(hintEvent)
	if st.State != monitor.StateWatching || st.PollAttempts != 2 {
		t.Fatalf("after the hinted poll: %+v", st)
	}
	got := e.sqs.Sent()
	if len(got) != sent+1 {
		t.Fatalf("%d messages after the refused write, want 1 (the next poll)", len(got)-sent)
	}
	if want := int32(st.NextPoll.Sub(e.clock.Now()) / time.Second); got[len(got)-1].DelaySeconds != want {
		t.Fatalf("next poll scheduled in %d s, want %d s", got[len(got)-1].DelaySeconds, want)
	}
}

// A hint whose write loses to another poller's (that poller's clock read
// came a moment later, so updated_ms is past the hint's now) is logged
// lifecycle_monitor.hint_raced, not clock_regressed: the outcome is right
// and nothing points at a clock fault (issue 24).
func TestHintRacingAnotherPollersWriteHasItsOwnCode(t *testing.T) {
	e := watchingLong(t, cmstest.StatusStep("processing"))
	e.clock.Advance(10 * time.Minute)
	ahead := core.ClockFunc(func() time.Time { return e.clock.Now().Add(time.Second) })
	other, err := monitor.NewService(e.store, ahead, nil, monitor.Config{WorkerID: "poller-other", PollInterval: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	reader, err := cms.New(cms.Config{BaseURL: e.cmsURL, Key: testKey, Timeout: 2 * time.Second, Clock: ahead})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := other.PollOnce(context.Background(), hintEvent, reader); err != nil || !out.Polled {
		t.Fatalf("the other poller's poll: %+v, %v", out, err)
	}
	requests := len(e.cms.RequestsFor(hintEvent))
	e.hint(hintBody(hintEvent, "site-berlin"))
	logs := e.logs.String()
	if !strings.Contains(logs, `"code":"lifecycle_monitor.hint_raced"`) || strings.Contains(logs, "clock_regressed") {
		t.Fatalf("a hint that lost the race to another poller's write must be logged hint_raced, not clock_regressed:\n%s", logs)
	}
	if len(e.cms.RequestsFor(hintEvent)) != requests {
		t.Fatal("the refused hint polled")
	}
}

// A hinted poll that fails during a CMS outage before the change's regular
// poll time does not count toward the failure limit (issue 24: it used to
// record the failure earlier than the regular poll would, so hints changed
// state indirectly). The change stays watching, due at its regular time;
// the regular poll's failure counts as always.
func TestHintedPollFailureBeforeTheRegularPollDoesNotCount(t *testing.T) {
	e := watchingLong(t, cmstest.Repeat(cmstest.HTTPStep(503), 3)...)
	regular := e.status(hintEvent).NextPoll
	e.clock.Advance(time.Minute)
	e.hint(hintBody(hintEvent, "site-berlin"))
	st := e.status(hintEvent)
	if n := len(e.cms.RequestsFor(hintEvent)); n != 2 {
		t.Fatalf("the hint made %d CMS requests in all, want 2 (it polled once)", n)
	}
	if st.State != monitor.StateWatching || st.ConsecutiveFailures != 0 || st.LastErrorCode != "" || !st.NextPoll.Equal(regular) {
		t.Fatalf("after a hinted poll failed early: %s, %d failures, code %q, next poll %v (regular %v)",
			st.State, st.ConsecutiveFailures, st.LastErrorCode, st.NextPoll, regular)
	}
	// A second hint after the gap, still before the regular time: the same.
	e.clock.Advance(time.Minute)
	e.hint(hintBody(hintEvent, "site-berlin"))
	if st := e.status(hintEvent); st.State != monitor.StateWatching || st.ConsecutiveFailures != 0 || !st.NextPoll.Equal(regular) {
		t.Fatalf("after a second early hinted failure: %+v", st)
	}
	// The regular poll fails and counts.
	e.clock.Advance(regular.Sub(e.clock.Now()))
	if out, err := e.svc.PollOnce(context.Background(), hintEvent, e.cfg.Reader); err != nil || !out.Polled {
		t.Fatalf("regular poll: %+v, %v", out, err)
	}
	if st := e.status(hintEvent); st.State != monitor.StateRetryWait || st.ConsecutiveFailures != 1 || st.LastErrorCode != "cms.http_503" {
		t.Fatalf("after the regular poll failed: %s, %d failures, %q", st.State, st.ConsecutiveFailures, st.LastErrorCode)
	}
}
