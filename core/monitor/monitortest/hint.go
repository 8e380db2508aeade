package monitortest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/lifecycle"
	"github.com/localeflow/localeflow/core/monitor"
)

// watching stores eventID as a watching record polled at T0+20 whose next
// poll is at T0+20+interval.
func watching(t *testing.T, s monitor.Store, eventID string, interval int64) monitor.Record {
	t.Helper()
	create(t, s, NewRecord(eventID, T0))
	held := claim(t, s, eventID, lease("w1", T0+10))
	return finish(t, s, held, monitor.StateWatching, T0+20, T0+20+interval, "")
}

func finish(t *testing.T, s monitor.Store, held monitor.Record, state monitor.State, nowMS, nextMS int64, code string) monitor.Record {
	t.Helper()
	status := "processing"
	if state == monitor.StateTerminal {
		status = "published"
	}
	snap := Snapshot(held, status)
	u := monitor.Update{State: state, NextPollMS: nextMS, SetSnapshot: code == "", LastErrorCode: code, UpdatedMS: nowMS,
		RemoteStatus: snap.Status, LifecycleSHA256: snap.SHA256, Lifecycle: snap.Canonical}
	if code != "" {
		u.RemoteStatus, u.LifecycleSHA256, u.Lifecycle = "", "", nil
		u.ConsecutiveFailures = held.ConsecutiveFailures + 1
	}
	rec, err := s.Transition(context.Background(), monitor.FenceOf(held, nowMS), u)
	if err != nil {
		t.Fatalf("Transition(%s → %s) = %v", held.EventID, state, err)
	}
	return rec
}

func hintAt(eventID string, nowMS int64) monitor.Hint {
	return monitor.Hint{EventID: eventID, SiteID: "site-berlin", NowMS: nowMS, MinGapMS: 5_000}
}

// refused checks that a hint writes nothing and returns the stored record.
func refused(t *testing.T, s monitor.Store, h monitor.Hint) {
	t.Helper()
	ctx := context.Background()
	before, err := s.Get(ctx, h.EventID)
	if err != nil {
		t.Fatal(err)
	}
	cur, ok, err := s.Hint(ctx, h)
	if err != nil || ok {
		t.Fatalf("Hint(%s at +%d) = %v, %v; want refused", h.EventID, h.NowMS-T0, ok, err)
	}
	equalRecords(t, cur, before)
	after, _ := s.Get(ctx, h.EventID)
	equalRecords(t, after, before)
}

func runHintSuite(t *testing.T, h Harness) {
	ctx := context.Background()
	t.Run("hint moves a watching record's next poll to now, once per gap", func(t *testing.T) {
		s := h.New(t)
		rec := watching(t, s, "evt-1", 600_000)
		hint := hintAt("evt-1", T0+100)
		got, ok, err := s.Hint(ctx, hint)
		if err != nil || !ok {
			t.Fatalf("Hint = %v, %v", ok, err)
		}
		equalRecords(t, got, monitor.ApplyHint(rec, hint))
		read, _ := s.Get(ctx, "evt-1")
		equalRecords(t, read, got)
		if _, err := monitor.Validate(read); err != nil {
			t.Fatalf("hinted record invalid: %v", err)
		}
		if ids, _ := s.Due(ctx, T0+100, 10); len(ids) != 1 || ids[0] != "evt-1" {
			t.Fatalf("Due after hint = %v", ids)
		}
		// Due now: a second hint has nothing to move.
		refused(t, s, hintAt("evt-1", T0+200))
		// Polled again (next poll far away): within the gap a hint is refused.
		held := claim(t, s, "evt-1", lease("w2", T0+300))
		if held.HintMS != T0+100 {
			t.Fatalf("claim lost hint_ms: %d", held.HintMS)
		}
		polled := finish(t, s, held, monitor.StateWatching, T0+310, T0+600_310, "")
		if polled.HintMS != T0+100 {
			t.Fatalf("transition lost hint_ms: %d", polled.HintMS)
		}
		refused(t, s, hintAt("evt-1", T0+5_099))
		if _, ok, err := s.Hint(ctx, hintAt("evt-1", T0+5_100)); err != nil || !ok {
			t.Fatalf("Hint after the gap = %v, %v", ok, err)
		}
		_, _, err = s.Hint(ctx, hintAt("evt-none", T0))
		wantCode(t, err, monitor.CodeEventMissing)
	})
	t.Run("hint refuses another site, a regressed clock and other states", func(t *testing.T) {
		s := h.New(t)
		watching(t, s, "evt-site", 600_000)
		other := hintAt("evt-site", T0+100)
		other.SiteID = "site-paris"
		refused(t, s, other)
		refused(t, s, hintAt("evt-site", T0+19))

		pending := NewRecord("evt-pending", T0)
		pending.NextPollMS = T0 + 600_000
		create(t, s, pending)
		refused(t, s, hintAt("evt-pending", T0+100))

		create(t, s, NewRecord("evt-leased", T0))
		claim(t, s, "evt-leased", lease("w", T0+10))
		refused(t, s, hintAt("evt-leased", T0+100))

		create(t, s, NewRecord("evt-retry", T0))
		held := claim(t, s, "evt-retry", lease("w", T0+10))
		retry := finish(t, s, held, monitor.StateRetryWait, T0+20, T0+300_000, "cms.http_503")
		refused(t, s, hintAt("evt-retry", T0+100))
		if read, _ := s.Get(ctx, "evt-retry"); read.NextPollMS != retry.NextPollMS || read.ConsecutiveFailures != 1 {
			t.Fatalf("retry_wait changed: %+v", read)
		}

		create(t, s, NewRecord("evt-terminal", T0))
		held = claim(t, s, "evt-terminal", lease("w", T0+10))
		finish(t, s, held, monitor.StateTerminal, T0+20, T0+20, "")
		refused(t, s, hintAt("evt-terminal", T0+100))

		create(t, s, NewRecord("evt-failed", T0))
		held = claim(t, s, "evt-failed", lease("w", T0+10))
		finish(t, s, held, monitor.StateFailed, T0+20, T0+20, "cms.http_400")
		refused(t, s, hintAt("evt-failed", T0+100))

		watching(t, s, "evt-altered", 600_000)
		h.Tamper(t, s, "evt-altered", func(r *monitor.Record) { r.SchemaVersion = monitor.SchemaVersion + 1 })
		refused(t, s, hintAt("evt-altered", T0+100))
	})
	t.Run("concurrent hints: exactly one wins", func(t *testing.T) {
		h.skipNotAtomic(t)
		s := h.New(t)
		watching(t, s, "evt-1", 600_000)
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := 0
		for i := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, ok, err := s.Hint(ctx, hintAt("evt-1", T0+100+int64(i)))
				if err != nil {
					t.Errorf("hint: %v", err)
				}
				if ok {
					mu.Lock()
					wins++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if wins != 1 {
			t.Fatalf("%d hints won", wins)
		}
	})
	t.Run("service hint polls a long-interval change at once", func(t *testing.T) {
		runServiceHint(t, h)
	})
	runHintEdges(t, h)
}

func runServiceHint(t *testing.T, h Harness) {
	ctx := context.Background()
	s := h.New(t)
	clock := &fixedClock{now: core.FromMillis(T0 + 30)}
	svc, err := monitor.NewService(s, clock, nil, monitor.Config{WorkerID: "suite", PollInterval: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	rec := watching(t, s, "evt-1", (10 * time.Minute).Milliseconds())
	d := monitor.HintDetail{EventID: "evt-1", SiteID: rec.SiteID}
	res, err := svc.Hint(ctx, d)
	if err != nil || !res.Advanced {
		t.Fatalf("Hint = %+v, %v", res, err)
	}
	out, err := svc.PollOnce(ctx, "evt-1", statusReader{"published"})
	if err != nil || !out.Polled || out.State != monitor.StateTerminal {
		t.Fatalf("poll after hint = %+v, %v", out, err)
	}
	st, _ := svc.Status(ctx, "evt-1")
	if st.ConsecutiveFailures != 0 || st.PollAttempts != 2 {
		t.Fatalf("status after hinted poll = %+v", st)
	}
	for _, c := range []struct {
		detail monitor.HintDetail
		code   string
	}{
		{monitor.HintDetail{EventID: "evt-1", SiteID: rec.SiteID}, monitor.CodeHintNotWatching},
		{monitor.HintDetail{EventID: "evt-none", SiteID: rec.SiteID}, monitor.CodeHintUnknown},
	} {
		res, err := svc.Hint(ctx, c.detail)
		if err != nil || res.Advanced || res.Code != c.code {
			t.Fatalf("Hint(%+v) = %+v, %v; want %s", c.detail, res, err, c.code)
		}
	}
	_, err = svc.Hint(ctx, monitor.HintDetail{EventID: "evt 1", SiteID: rec.SiteID})
	wantCode(t, err, monitor.CodeHintInvalid)
}

// failingReader answers every read with err.
type failingReader struct{ err error }

func (r failingReader) Timeout() time.Duration { return time.Second }

func (r failingReader) ReadLifecycle(context.Context, lifecycle.Target) (lifecycle.Response, error) {
	return lifecycle.Response{}, r.err
}

// hintedService is a service over s with a 10-minute poll interval and a
// change evt-h watching since T0+20 (its regular poll at T0+20+10 min);
// the returned clock is at T0+30.
func hintedService(t *testing.T, s monitor.Store) (*monitor.Service, *fixedClock) {
	t.Helper()
	clock := &fixedClock{now: core.FromMillis(T0 + 30)}
	svc, err := monitor.NewService(s, clock, nil, monitor.Config{WorkerID: "suite", PollInterval: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	create(t, s, NewRecord("evt-h", T0))
	clock.set(core.FromMillis(T0 + 20))
	if out, err := svc.PollOnce(context.Background(), "evt-h", statusReader{"processing"}); err != nil || out.State != monitor.StateWatching {
		t.Fatalf("first poll = %+v, %v", out, err)
	}
	clock.set(core.FromMillis(T0 + 30))
	return svc, clock
}

// runHintEdges: a hint never shortens a wait the CMS asked for, and hinted
// polls that fail early never spend the failure budget, however many
// (issue 39 findings 1, 2 and 4).
func runHintEdges(t *testing.T, h Harness) {
	ctx := context.Background()
	hintPoll := func(t *testing.T, svc *monitor.Service, reader monitor.LifecycleReader) (monitor.HintResult, monitor.Outcome) {
		t.Helper()
		res, err := svc.Hint(ctx, monitor.HintDetail{EventID: "evt-h", SiteID: "site-berlin"})
		if err != nil {
			t.Fatalf("Hint = %v", err)
		}
		if !res.Advanced {
			return res, monitor.Outcome{}
		}
		out, err := svc.PollOnce(ctx, "evt-h", reader)
		if err != nil || !out.Polled {
			t.Fatalf("hinted poll = %+v, %v", out, err)
		}
		return res, out
	}
	t.Run("a hint never polls before a Retry-After ends", func(t *testing.T) {
		s := h.New(t)
		svc, clock := hintedService(t, s)
		reads := &countingReader{r: failingReader{core.WithRetryAfter(core.Wrap("cms.http_503", true, nil), 1800*time.Second)}}
		_, out := hintPoll(t, svc, reads)
		if out.State != monitor.StateWatching || out.ConsecutiveFailures != 0 || out.FailureCode != "cms.http_503" {
			t.Fatalf("hinted 503 = %+v", out)
		}
		waitEnds := T0 + 30 + 1_800_000
		if got := core.Millis(out.NextPoll); got != waitEnds {
			t.Fatalf("next poll at +%d ms, want the Retry-After's end +%d", got-T0, waitEnds-T0)
		}
		// Hints every 5 s for the whole wait: none polls.
		for now := T0 + 5_030; now < waitEnds; now += 5_000 {
			clock.set(core.FromMillis(now))
			if res, _ := hintPoll(t, svc, reads); res.Advanced || res.Code != monitor.CodeHintRetryAfter {
				t.Fatalf("hint at +%d ms during the Retry-After = %+v, want %s", now-T0, res, monitor.CodeHintRetryAfter)
			}
		}
		if reads.n != 1 {
			t.Fatalf("%d CMS reads during the Retry-After wait, want 1", reads.n)
		}
	})
	t.Run("a short Retry-After holds hints until it ends, the regular time stays", func(t *testing.T) {
		s := h.New(t)
		svc, clock := hintedService(t, s)
		_, out := hintPoll(t, svc, failingReader{core.WithRetryAfter(core.Wrap("cms.http_429", true, nil), 60*time.Second)})
		if got := core.Millis(out.NextPoll); got != T0+20+600_000 {
			t.Fatalf("next poll at +%d ms, want the regular time", got-T0)
		}
		clock.set(core.FromMillis(T0 + 30 + 59_999))
		if res, _ := hintPoll(t, svc, statusReader{"processing"}); res.Advanced {
			t.Fatalf("hint inside the 60 s Retry-After advanced: %+v", res)
		}
		clock.set(core.FromMillis(T0 + 30 + 60_000))
		if res, out := hintPoll(t, svc, statusReader{"processing"}); !res.Advanced || out.State != monitor.StateWatching {
			t.Fatalf("hint once the Retry-After ended = %+v, %+v", res, out)
		}
	})
	t.Run("early hinted failures never spend the budget, however many", func(t *testing.T) {
		s := h.New(t)
		svc, clock := hintedService(t, s)
		unavailable := failingReader{core.Wrap("cms.http_503", true, nil)}
		// A hint every 5 s for 3 minutes of outage: 36 early failures,
		// far more than the 5-entry timeline holds.
		polls := 0
		for now := T0 + 30; now < T0+30+180_000; now += 5_000 {
			clock.set(core.FromMillis(now))
			res, out := hintPoll(t, svc, unavailable)
			if !res.Advanced {
				t.Fatalf("hint at +%d ms refused: %+v", now-T0, res)
			}
			polls++
			if out.State != monitor.StateWatching || out.ConsecutiveFailures != 0 || out.FailureCode != "cms.http_503" || out.ErrorCode != "" {
				t.Fatalf("early hinted failure %d counted: %+v", polls, out)
			}
			if got := core.Millis(out.NextPoll); got != T0+20+600_000 {
				t.Fatalf("early hinted failure %d moved the regular poll to +%d ms", polls, got-T0)
			}
		}
		// The outage is over by the regular poll.
		clock.set(core.FromMillis(T0 + 20 + 600_000))
		out, err := svc.PollOnce(ctx, "evt-h", statusReader{"published"})
		if err != nil || out.State != monitor.StateTerminal {
			t.Fatalf("regular poll after the outage = %+v, %v", out, err)
		}
	})
	t.Run("a record written before regular_poll_ms reads its regular time from the timeline", func(t *testing.T) {
		s := h.New(t)
		svc, _ := hintedService(t, s)
		h.Tamper(t, s, "evt-h", func(r *monitor.Record) { r.RegularPollMS = 0 })
		_, out := hintPoll(t, svc, failingReader{core.Wrap("cms.http_503", true, nil)})
		if out.State != monitor.StateWatching || out.ConsecutiveFailures != 0 || core.Millis(out.NextPoll) != T0+20+600_000 {
			t.Fatalf("early hinted failure of a record without regular_poll_ms = %+v", out)
		}
		if rec, _ := s.Get(ctx, "evt-h"); rec.RegularPollMS != T0+20+600_000 {
			t.Fatalf("regular_poll_ms after the failure = %d, want it stored", rec.RegularPollMS)
		}
	})
	t.Run("a failure at the regular time counts", func(t *testing.T) {
		s := h.New(t)
		svc, clock := hintedService(t, s)
		unavailable := failingReader{core.Wrap("cms.http_503", true, nil)}
		hintPoll(t, svc, unavailable)
		clock.set(core.FromMillis(T0 + 20 + 600_000))
		out, err := svc.PollOnce(ctx, "evt-h", unavailable)
		if err != nil || out.State != monitor.StateRetryWait || out.ConsecutiveFailures != 1 || out.FailureCode != "cms.http_503" {
			t.Fatalf("regular poll failing = %+v, %v", out, err)
		}
	})
}

// countingReader counts the reads it passes on.
type countingReader struct {
	r monitor.LifecycleReader
	n int
}

func (c *countingReader) Timeout() time.Duration { return c.r.Timeout() }

func (c *countingReader) ReadLifecycle(ctx context.Context, target lifecycle.Target) (lifecycle.Response, error) {
	c.n++
	return c.r.ReadLifecycle(ctx, target)
}
