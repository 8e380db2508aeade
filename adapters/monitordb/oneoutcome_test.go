package monitordb

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/lifecycle"
	"github.com/localeflow/localeflow/core/monitor"
)

// fixedReader answers every read with status, or fails with err.
type fixedReader struct {
	status string
	err    error
}

func (fixedReader) Timeout() time.Duration { return time.Second }

func (r fixedReader) ReadLifecycle(_ context.Context, target lifecycle.Target) (lifecycle.Response, error) {
	if r.err != nil {
		return lifecycle.Response{}, r.err
	}
	body := fmt.Sprintf(`{"schema":"localeflow.cms-lifecycle.v1","request_id":"req-1","event_id":%q,"site_id":%q,"plan_id":%q,"website_version":%q,"source_sequence":%d,"status":%q,"required_locales":["de-DE","fr-FR"],"approved_locales":[],"blocked_locales":[],"queue_counts":{},"delivery":null,"tombstone":null}`,
		target.EventID, target.SiteID, target.PlanID, target.WebsiteVersion, target.SourceSequence, r.status)
	return lifecycle.Parse(target, "req-1", []byte(body))
}

type stepClock struct{ now time.Time }

func (c *stepClock) Now() time.Time { return c.now }

// On DynamoDB Local: the finishing write of a terminal CMS answer sets the
// outbox key in the same conditional write (the outcome is owed before
// anything publishes it, docs/design.md "One outcome per change"); once
// final, neither a reclaim nor a later poll during a CMS outage changes
// it, the owed announcement is the final record's, and the clear empties
// the outbox.
func TestTerminalAnswerIsOwedFinalAndClearedOnDynamoDB(t *testing.T) {
	ctx := context.Background()
	s, db, table := newStore(t)
	clock := &stepClock{now: time.Now().UTC().Truncate(time.Millisecond)}
	svc, err := monitor.NewService(s, clock, nil, monitor.Config{WorkerID: "worker-1"})
	if err != nil {
		t.Fatal(err)
	}
	const id = "evt-0000"
	if _, err := svc.Register(ctx, dispatchedDetail(t, id)); err != nil {
		t.Fatal(err)
	}
	out, err := svc.PollOnce(ctx, id, fixedReader{status: "published"})
	if err != nil || !out.Polled || out.State != monitor.StateTerminal || out.Owed == nil {
		t.Fatalf("terminal poll: %+v, %v", out, err)
	}
	raw := getRaw(t, db, table, id)
	// Owed through the wake index (docs/design.md "Owed outcomes in the
	// wake index"): outbox_ms, the claim's wake keys kept.
	if _, ok := raw[attrOutboxMS]; !ok {
		t.Fatalf("terminal item without its outbox key: %v", raw)
	}
	if _, ok := raw[attrWakeMS]; !ok {
		t.Fatal("owed terminal item left the wake index before its outcome was announced")
	}
	if owed, err := s.Owed(ctx, 1<<62, 10); err != nil || len(owed) != 1 || owed[0] != id {
		t.Fatalf("owed = %v, %v", owed, err)
	}
	// The poller crashes before publishing; a lease later the CMS is down.
	clock.now = clock.now.Add(svc.Config().Lease + time.Second)
	if _, ok, err := svc.Claim(ctx, id); ok || err != nil {
		t.Fatalf("claim of a final record: %v, %v", ok, err)
	}
	again, err := svc.PollOnce(ctx, id, fixedReader{err: core.Retry("cms.http_503")})
	if err != nil || again.Polled || again.State != monitor.StateTerminal || again.Owed == nil || *again.Owed != *out.Owed {
		t.Fatalf("poll during the outage: %+v (owed %+v), %v; want terminal, the same outcome owed", again, again.Owed, err)
	}
	a, ok, err := svc.Announcement(ctx, id)
	if err != nil || !ok || a != *out.Owed || a.OutcomeID != monitor.OutcomeID(id, monitor.StateTerminal, a.FinishedMS) {
		t.Fatalf("announcement %+v, %v, %v; want %+v", a, ok, err, *out.Owed)
	}
	if err := svc.Announced(ctx, a); err != nil {
		t.Fatal(err)
	}
	raw = getRaw(t, db, table, id)
	for _, name := range []string{attrOutboxMS, attrWakeShard, attrWakeMS} {
		if _, ok := raw[name]; ok {
			t.Fatalf("%s not cleared by the announcement", name)
		}
	}
	if owed, err := s.Owed(ctx, 1<<62, 10); err != nil || len(owed) != 0 {
		t.Fatalf("owed after the announcement = %v, %v", owed, err)
	}
	st, err := svc.Status(ctx, id)
	if err != nil || st.State != monitor.StateTerminal || st.RemoteStatus != "published" || st.Updated.UnixMilli() != a.FinishedMS {
		t.Fatalf("final status %+v, %v", st, err)
	}
}

// On DynamoDB Local: a hinted poll that fails before the regular poll time
// writes the change back to watching (failure not counted, timeline entry
// watching with the code); the item decodes and validates.
func TestEarlyHintedFailureRoundTripsOnDynamoDB(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newStore(t)
	clock := &stepClock{now: time.Now().UTC().Truncate(time.Millisecond)}
	svc, err := monitor.NewService(s, clock, nil, monitor.Config{WorkerID: "worker-1", PollInterval: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	const id = "evt-0001"
	if _, err := svc.Register(ctx, dispatchedDetail(t, id)); err != nil {
		t.Fatal(err)
	}
	if out, err := svc.PollOnce(ctx, id, fixedReader{status: "processing"}); err != nil || out.State != monitor.StateWatching {
		t.Fatalf("first poll: %+v, %v", out, err)
	}
	regular := clock.now.Add(10 * time.Minute)
	clock.now = clock.now.Add(time.Minute)
	if res, err := svc.Hint(ctx, monitor.HintDetail{EventID: id, SiteID: "site-berlin"}); err != nil || !res.Advanced {
		t.Fatalf("hint: %+v, %v", res, err)
	}
	out, err := svc.PollOnce(ctx, id, fixedReader{err: core.Retry("cms.http_503")})
	if err != nil || !out.Polled {
		t.Fatalf("hinted poll: %+v, %v", out, err)
	}
	st, err := svc.Status(ctx, id)
	if err != nil || st.State != monitor.StateWatching || st.ConsecutiveFailures != 0 || st.LastErrorCode != "" || !st.NextPoll.Equal(regular) {
		t.Fatalf("after the early hinted failure: %+v, %v", st, err)
	}
	last := st.Timeline[len(st.Timeline)-1]
	if last.State != monitor.StateWatching || last.Code != "cms.http_503" {
		t.Fatalf("timeline %+v", st.Timeline)
	}
}
