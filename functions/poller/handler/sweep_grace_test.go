package handler_test

import (
	"context"
	"testing"
	"time"

	"github.com/localeflow/localeflow/adapters/cms/cmstest"
	"github.com/localeflow/localeflow/core/monitor"
)

// The sweep leaves a change that became due less than the sweep grace ago
// to its queued message (a sweep poll ahead of it made the message's claim
// a refused, billed write: issue 29 measured 733–804 at 1,000 watched
// changes), and still polls a change whose message was lost once the grace
// has passed.
func TestSweepLeavesChangeInsideGraceAndTakesItAfter(t *testing.T) {
	e := setupWith(t, monitor.Config{WorkerID: "poller-test", SweepGrace: monitor.DefaultSweepGrace})
	if g := e.svc.Config().SweepGrace; g != 30*time.Second {
		t.Fatalf("sweep grace %s, want the 30 s default", g)
	}
	const id = "evt-poller-0001"
	e.cms.Script(id, cmstest.StatusStep("processing"), cmstest.StatusStep("processing"))
	e.intake() // registers at t0, due at once; its first poll message is queued
	st := e.status(id)
	if st.PollAttempts != 0 {
		t.Fatalf("after intake: %+v", st)
	}
	next := st.NextPoll
	sweepAt := func(at time.Time) (int, int) {
		t.Helper()
		e.clock.Advance(at.Sub(e.clock.Now()))
		res, err := e.h.Sweep(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return res.Listed, res.Polled
	}
	// Due, but inside the grace: its queued message owns it.
	if listed, polled := sweepAt(next.Add(monitor.DefaultSweepGrace - time.Millisecond)); listed != 0 || polled != 0 {
		t.Fatalf("sweep inside the grace listed %d, polled %d; want 0, 0", listed, polled)
	}
	if st := e.status(id); st.PollAttempts != 0 {
		t.Fatalf("the sweep polled a change inside the grace: %+v", st)
	}
	// The message was lost: once the grace has passed the sweep polls it.
	if listed, polled := sweepAt(next.Add(monitor.DefaultSweepGrace)); listed != 1 || polled != 1 {
		t.Fatalf("sweep after the grace listed %d, polled %d; want 1, 1", listed, polled)
	}
	if st := e.status(id); st.PollAttempts != 1 || st.State != monitor.StateWatching {
		t.Fatalf("the sweep did not rescue the change after the grace: %+v", st)
	}
}
