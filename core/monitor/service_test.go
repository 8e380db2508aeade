package monitor_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/lifecycle"
	"github.com/localeflow/localeflow/core/monitor"
)

func TestRegister(t *testing.T) {
	ctx := context.Background()
	t.Run("enqueued is pending and due at once", func(t *testing.T) {
		b := setup(t, monitor.Config{})
		st := register(t, b, "evt-1")
		if st.State != monitor.StatePending || st.PollAttempts != 0 || !st.NextPoll.Equal(t0) ||
			st.RemoteStatus != "" || st.MaxConsecutiveFailures != 5 || st.JobCount != 2 || st.PlanID != "plan-42" {
			t.Fatalf("status = %+v", st)
		}
		want, _ := monitor.Binding("evt-1", "site-berlin", "plan-42", "v2026.11.29", 7, 2, changeSHA(t, changeJSON("evt-1")), 5)
		if st.BindingSHA256 != want || st.ChangeSHA256 != changeSHA(t, changeJSON("evt-1")) {
			t.Fatalf("hashes = %s %s", st.BindingSHA256, st.ChangeSHA256)
		}
	})
	for _, remote := range []string{"superseded", "cancelled"} {
		t.Run(remote+" is terminal at once", func(t *testing.T) {
			b := setup(t, monitor.Config{})
			d, err := monitor.ParseDispatched([]byte(detail(t, "evt-1", remote)))
			if err != nil {
				t.Fatal(err)
			}
			st, err := b.svc.Register(ctx, d)
			if err != nil || st.State != monitor.StateTerminal || st.RemoteStatus != remote || st.LifecycleSHA256 != "" {
				t.Fatalf("Register = %+v, %v", st, err)
			}
			if ids, _ := b.svc.Due(ctx, 10); len(ids) != 0 {
				t.Fatalf("terminal record is due: %v", ids)
			}
		})
	}
	t.Run("idempotent on event id", func(t *testing.T) {
		b := setup(t, monitor.Config{})
		first := register(t, b, "evt-1")
		b.clock.Advance(time.Minute)
		again := register(t, b, "evt-1")
		if again.Created != first.Created || b.store.Len() != 1 {
			t.Fatalf("re-register rewrote the record: %+v", again)
		}
	})
	t.Run("collision on a different identity", func(t *testing.T) {
		b := setup(t, monitor.Config{})
		register(t, b, "evt-1")
		d, _ := monitor.ParseDispatched([]byte(detail(t, "evt-1", "enqueued")))
		d.Dispatch.RemotePlanID = "plan-43"
		_, err := b.svc.Register(ctx, d)
		wantCode(t, err, monitor.CodeIdempotencyCollision)
	})
	// A changed failure limit (a day-2 configuration change, found by the
	// simulation's failure-cap kind) made a redelivered dispatch of a
	// registered change an idempotency collision, quarantined. It is the
	// same change: it keeps the limit it was registered with; a different
	// identity under the changed limit still collides.
	t.Run("a changed failure limit keeps the registered one", func(t *testing.T) {
		b := setup(t, monitor.Config{})
		first := register(t, b, "evt-1")
		other, err := monitor.NewService(b.store, b.clock, nil, monitor.Config{MaxConsecutiveFailures: 3})
		if err != nil {
			t.Fatal(err)
		}
		d, _ := monitor.ParseDispatched([]byte(detail(t, "evt-1", "enqueued")))
		again, err := other.Register(ctx, d)
		if err != nil || again.Created != first.Created || b.store.Len() != 1 {
			t.Fatalf("re-register under a changed limit = %+v, %v", again, err)
		}
		rec, err := b.store.Get(ctx, "evt-1")
		if err != nil || rec.MaxConsecutiveFailures != 5 {
			t.Fatalf("stored limit %d, want the registered 5", rec.MaxConsecutiveFailures)
		}
		d.Dispatch.RemotePlanID = "plan-43"
		_, err = other.Register(ctx, d)
		wantCode(t, err, monitor.CodeIdempotencyCollision)
	})
	t.Run("register revalidates a hand-built dispatch", func(t *testing.T) {
		b := setup(t, monitor.Config{})
		d, _ := monitor.ParseDispatched([]byte(detail(t, "evt-1", "enqueued")))
		d.Dispatch.RemoteJobCount = -1
		_, err := b.svc.Register(ctx, d)
		wantCode(t, err, monitor.CodeDispatchInvalid)
		d.Change = []byte(`not json`)
		_, err = b.svc.Register(ctx, d)
		wantCode(t, err, monitor.CodeChangeInvalid)
	})
	t.Run("time invalid", func(t *testing.T) {
		b := setup(t, monitor.Config{})
		b.clock.Set(time.Date(1969, 1, 1, 0, 0, 0, 0, time.UTC))
		d, _ := monitor.ParseDispatched([]byte(detail(t, "evt-1", "enqueued")))
		_, err := b.svc.Register(ctx, d)
		wantCode(t, err, monitor.CodeTimeInvalid)
	})
}

func claimOne(t *testing.T, b bundle, id string) monitor.Claim {
	t.Helper()
	c, ok, err := b.svc.Claim(context.Background(), id)
	if err != nil || !ok {
		t.Fatalf("Claim(%s) = %v, %v", id, ok, err)
	}
	return c
}

func TestTransitions(t *testing.T) {
	ctx := context.Background()
	t.Run("claim leases a due record", func(t *testing.T) {
		b := setup(t, monitor.Config{WorkerID: "w-1"})
		register(t, b, "evt-1")
		c := claimOne(t, b, "evt-1")
		if c.Attempt != 1 || c.LeaseOwner != "w-1" || len(c.LeaseToken) != 43 || !c.LeaseExpires.Equal(t0.Add(600*time.Second)) {
			t.Fatalf("claim = %+v", c)
		}
		st, _ := b.svc.Status(ctx, "evt-1")
		if st.State != monitor.StateLeased || st.LeaseExpired {
			t.Fatalf("status = %+v", st)
		}
		if _, ok, err := b.svc.Claim(ctx, "evt-1"); ok || err != nil {
			t.Fatalf("second claim = %v, %v", ok, err)
		}
	})
	t.Run("claim of a record not yet due", func(t *testing.T) {
		b := setup(t, monitor.Config{})
		register(t, b, "evt-1")
		c := claimOne(t, b, "evt-1")
		if _, err := b.svc.Complete(ctx, c, response(t, c.Target(), "processing")); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(29 * time.Second)
		if _, ok, err := b.svc.Claim(ctx, "evt-1"); ok || err != nil {
			t.Fatalf("claim before next poll = %v, %v", ok, err)
		}
		b.clock.Advance(time.Second)
		claimOne(t, b, "evt-1")
	})
	t.Run("complete non-terminal watches", func(t *testing.T) {
		b := setup(t, monitor.Config{})
		register(t, b, "evt-1")
		c := claimOne(t, b, "evt-1")
		b.clock.Advance(2 * time.Second)
		st, err := b.svc.Complete(ctx, c, response(t, c.Target(), "processing"))
		if err != nil {
			t.Fatal(err)
		}
		if st.State != monitor.StateWatching || st.RemoteStatus != "processing" || !st.NextPoll.Equal(t0.Add(32*time.Second)) ||
			st.ConsecutiveFailures != 0 || st.LastErrorCode != "" || !st.LeaseExpires.IsZero() ||
			len(st.RequiredLocales) != 2 || st.BlockedLocales[0].Reason != "cms.glossary_missing" || st.QueueCounts["pending"] != 1 {
			t.Fatalf("status = %+v", st)
		}
	})
	for _, remote := range []string{"published", "deleted", "cancelled", "publication_failed", "localization_failed"} {
		t.Run("complete "+remote+" is terminal", func(t *testing.T) {
			b := setup(t, monitor.Config{})
			register(t, b, "evt-1")
			c := claimOne(t, b, "evt-1")
			st, err := b.svc.Complete(ctx, c, response(t, c.Target(), remote))
			if err != nil || st.State != monitor.StateTerminal || st.RemoteStatus != remote || !st.NextPoll.Equal(t0) {
				t.Fatalf("Complete = %+v, %v", st, err)
			}
			h, _ := b.svc.Health(ctx)
			wantBlocked := lifecycle.IsRemoteFailure(remote)
			if (h.Status == monitor.HealthBlocked) != wantBlocked || (h.RemoteFailures == 1) != wantBlocked {
				t.Fatalf("health = %+v", h)
			}
		})
	}
	t.Run("retry backs off then fails at the limit", func(t *testing.T) {
		b := setup(t, monitor.Config{})
		register(t, b, "evt-1")
		// The backoff 5/10/20/40 s, each spread over [d, 3d/2] per change.
		for i, lower := range []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second} {
			d := b.svc.Config().RetryDelayFor("evt-1", i+1)
			if d < lower || d > lower+lower/2 {
				t.Fatalf("retry %d waits %s, outside [%s, %s]", i+1, d, lower, lower+lower/2)
			}
			c := claimOne(t, b, "evt-1")
			st, err := b.svc.Retry(ctx, c, "cms.http_503")
			if err != nil || st.State != monitor.StateRetryWait || st.ConsecutiveFailures != i+1 ||
				st.LastErrorCode != "cms.http_503" || !st.NextPoll.Equal(b.clock.Now().Add(d)) {
				t.Fatalf("retry %d = %+v, %v", i+1, st, err)
			}
			b.clock.Advance(d)
		}
		c := claimOne(t, b, "evt-1")
		st, err := b.svc.Retry(ctx, c, "cms.http_503")
		if err != nil || st.State != monitor.StateFailed || st.ConsecutiveFailures != 5 || st.PollAttempts != 5 {
			t.Fatalf("fifth retry = %+v, %v", st, err)
		}
		if _, ok, _ := b.svc.Claim(ctx, "evt-1"); ok {
			t.Fatal("failed record claimed")
		}
	})
	t.Run("success resets consecutive failures", func(t *testing.T) {
		b := setup(t, monitor.Config{})
		register(t, b, "evt-1")
		c := claimOne(t, b, "evt-1")
		if _, err := b.svc.Retry(ctx, c, "cms.timeout"); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(b.svc.Config().RetryDelayFor("evt-1", 1))
		c = claimOne(t, b, "evt-1")
		if c.ConsecutiveFailures != 1 || c.Attempt != 2 {
			t.Fatalf("claim = %+v", c)
		}
		st, err := b.svc.Complete(ctx, c, response(t, c.Target(), "ready"))
		if err != nil || st.ConsecutiveFailures != 0 || st.LastErrorCode != "" {
			t.Fatalf("Complete = %+v, %v", st, err)
		}
	})
	t.Run("fail is final", func(t *testing.T) {
		b := setup(t, monitor.Config{})
		register(t, b, "evt-1")
		c := claimOne(t, b, "evt-1")
		st, err := b.svc.Fail(ctx, c, "cms.http_404")
		if err != nil || st.State != monitor.StateFailed || st.LastErrorCode != "cms.http_404" || st.ConsecutiveFailures != 1 {
			t.Fatalf("Fail = %+v, %v", st, err)
		}
		h, _ := b.svc.Health(ctx)
		if h.Status != monitor.HealthBlocked || h.Failed != 1 {
			t.Fatalf("health = %+v", h)
		}
	})
	t.Run("max failures 1 fails on the first retry", func(t *testing.T) {
		b := setup(t, monitor.Config{MaxConsecutiveFailures: 1})
		register(t, b, "evt-1")
		c := claimOne(t, b, "evt-1")
		st, _ := b.svc.Retry(ctx, c, "cms.timeout")
		if st.State != monitor.StateFailed {
			t.Fatalf("state = %s", st.State)
		}
	})
}

func TestExpiredLeaseIsReclaimed(t *testing.T) {
	ctx := context.Background()
	b := setup(t, monitor.Config{Lease: time.Minute})
	register(t, b, "evt-1")
	var lastNext time.Time
	for i := 1; i <= 5; i++ {
		c := claimOne(t, b, "evt-1")
		b.clock.Set(c.LeaseExpires)
		h, _ := b.svc.Health(ctx)
		if h.ExpiredLeases != 1 || h.Status != monitor.HealthBlocked {
			t.Fatalf("health with an expired lease = %+v", h)
		}
		// The holder can no longer finish.
		_, err := b.svc.Complete(ctx, c, response(t, c.Target(), "processing"))
		wantCode(t, err, monitor.CodeLeaseExpired)
		_, err = b.svc.Retry(ctx, c, "cms.timeout")
		wantCode(t, err, monitor.CodeLeaseExpired)
		out, err := b.svc.PollOnce(ctx, "evt-1", reader())
		if err != nil || out.Polled || !out.Reclaimed || out.ErrorCode != monitor.ReclaimErrorCode || out.ConsecutiveFailures != i {
			t.Fatalf("reclaim %d = %+v, %v", i, out, err)
		}
		// A second visit changes nothing and reports no reclaim: only the
		// reclaimer owes the next poll's message.
		if again, err := b.svc.PollOnce(ctx, "evt-1", reader()); err != nil || again.Polled || again.Reclaimed || again.State != out.State {
			t.Fatalf("visit after reclaim %d = %+v, %v", i, again, err)
		}
		if i < 5 {
			if out.State != monitor.StateRetryWait || !out.NextPoll.Equal(b.clock.Now().Add(b.svc.Config().RetryDelayFor("evt-1", i))) {
				t.Fatalf("reclaim %d = %+v", i, out)
			}
			lastNext = out.NextPoll
			b.clock.Set(lastNext)
		} else if out.State != monitor.StateFailed {
			t.Fatalf("reclaim at the limit = %+v", out)
		}
	}
}

func TestFenceErrors(t *testing.T) {
	ctx := context.Background()
	t.Run("claim lost to another token", func(t *testing.T) {
		b := setup(t, monitor.Config{})
		register(t, b, "evt-1")
		c := claimOne(t, b, "evt-1")
		forged := c
		forged.LeaseToken = "forged-token"
		_, err := b.svc.Complete(ctx, forged, response(t, c.Target(), "processing"))
		wantCode(t, err, monitor.CodeClaimLost)
		forged = c
		forged.LeaseOwner = "other-worker"
		_, err = b.svc.Fail(ctx, forged, "cms.http_404")
		wantCode(t, err, monitor.CodeClaimLost)
	})
	t.Run("claim lost after finishing", func(t *testing.T) {
		b := setup(t, monitor.Config{})
		register(t, b, "evt-1")
		c := claimOne(t, b, "evt-1")
		if _, err := b.svc.Complete(ctx, c, response(t, c.Target(), "processing")); err != nil {
			t.Fatal(err)
		}
		_, err := b.svc.Complete(ctx, c, response(t, c.Target(), "published"))
		wantCode(t, err, monitor.CodeClaimLost)
	})
	t.Run("clock regressed", func(t *testing.T) {
		b := setup(t, monitor.Config{})
		register(t, b, "evt-1")
		c := claimOne(t, b, "evt-1")
		b.clock.Set(t0.Add(-time.Second))
		_, err := b.svc.Complete(ctx, c, response(t, c.Target(), "processing"))
		wantCode(t, err, monitor.CodeClockRegressed)
		_, err = b.svc.Retry(ctx, c, "cms.timeout")
		wantCode(t, err, monitor.CodeClockRegressed)
	})
	t.Run("claim with the clock behind updated_ms is refused", func(t *testing.T) {
		b := setup(t, monitor.Config{})
		register(t, b, "evt-1")
		b.clock.Set(t0.Add(-time.Millisecond))
		if _, ok, err := b.svc.Claim(ctx, "evt-1"); ok || err != nil {
			t.Fatalf("Claim = %v, %v", ok, err)
		}
		// A record due by next_poll_ms but updated "in the future".
		b.clock.Set(t0)
		b.store.Tamper("evt-1", func(r *monitor.Record) { r.UpdatedMS = r.CreatedMS + 5 })
		if _, ok, err := b.svc.Claim(ctx, "evt-1"); ok || err != nil {
			t.Fatalf("Claim = %v, %v", ok, err)
		}
		if st, _ := b.svc.Status(ctx, "evt-1"); st.State != monitor.StatePending {
			t.Fatalf("state = %s", st.State)
		}
	})
	t.Run("claim missing", func(t *testing.T) {
		b := setup(t, monitor.Config{})
		register(t, b, "evt-1")
		c := claimOne(t, b, "evt-1")
		c.EventID = "evt-gone"
		_, err := b.svc.Retry(ctx, c, "cms.timeout")
		wantCode(t, err, monitor.CodeClaimMissing)
	})
	t.Run("completion and failure lost", func(t *testing.T) {
		b := setup(t, monitor.Config{})
		register(t, b, "evt-1")
		c := claimOne(t, b, "evt-1")
		lossy, err := monitor.NewService(lostWrites{b.store}, b.clock, nil, monitor.Config{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = lossy.Complete(ctx, c, response(t, c.Target(), "processing"))
		wantCode(t, err, monitor.CodeCompletionLost)
		_, err = lossy.Retry(ctx, c, "cms.timeout")
		wantCode(t, err, monitor.CodeFailureLost)
		_, err = lossy.Fail(ctx, c, "cms.http_404")
		wantCode(t, err, monitor.CodeFailureLost)
	})
	t.Run("claim invalid", func(t *testing.T) {
		b := setup(t, monitor.Config{})
		register(t, b, "evt-1")
		c := claimOne(t, b, "evt-1")
		edits := map[string]func(*monitor.Claim){
			"event":    func(c *monitor.Claim) { c.EventID = "" },
			"site":     func(c *monitor.Claim) { c.SiteID = "a b" },
			"token":    func(c *monitor.Claim) { c.LeaseToken = "" },
			"owner":    func(c *monitor.Claim) { c.LeaseOwner = string(make([]byte, 200)) },
			"attempt":  func(c *monitor.Claim) { c.Attempt = 0 },
			"sequence": func(c *monitor.Claim) { c.SourceSequence = 0 },
			"jobs":     func(c *monitor.Claim) { c.JobCount = 0 },
			"hash":     func(c *monitor.Claim) { c.ChangeSHA256 = "x" },
			"max":      func(c *monitor.Claim) { c.MaxConsecutiveFailures = 21 },
			"expires":  func(c *monitor.Claim) { c.LeaseExpires = time.Time{} },
		}
		for name, edit := range edits {
			bad := c
			edit(&bad)
			if _, err := b.svc.Complete(ctx, bad, response(t, c.Target(), "processing")); !core.HasCode(err, monitor.CodeClaimInvalid) {
				t.Errorf("%s: Complete = %v", name, err)
			}
			if _, err := b.svc.Retry(ctx, bad, "cms.timeout"); !core.HasCode(err, monitor.CodeClaimInvalid) {
				t.Errorf("%s: Retry = %v", name, err)
			}
		}
	})
	t.Run("error code invalid", func(t *testing.T) {
		b := setup(t, monitor.Config{})
		register(t, b, "evt-1")
		c := claimOne(t, b, "evt-1")
		_, err := b.svc.Fail(ctx, c, "Not A Code")
		wantCode(t, err, monitor.CodeErrorInvalid)
	})
	t.Run("response for another change", func(t *testing.T) {
		b := setup(t, monitor.Config{})
		register(t, b, "evt-1")
		c := claimOne(t, b, "evt-1")
		other := c.Target()
		other.PlanID = "plan-other"
		body := []byte(`{"schema":"localeflow.cms-lifecycle.v1","request_id":"r","event_id":"evt-1","site_id":"site-berlin","plan_id":"plan-other","website_version":"v2026.11.29","source_sequence":7,"status":"processing","required_locales":["a","b"],"approved_locales":[],"blocked_locales":[],"queue_counts":{},"delivery":null,"tombstone":null}`)
		resp, err := lifecycle.Parse(other, "r", body)
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.svc.Complete(ctx, c, resp)
		wantCode(t, err, monitor.CodeResponseInvalid)
		good := response(t, c.Target(), "processing")
		good.SHA256 = core.SHA256Hex([]byte("other"))
		_, err = b.svc.Complete(ctx, c, good)
		wantCode(t, err, monitor.CodeResponseInvalid)
		_, err = b.svc.Complete(ctx, c, lifecycle.Response{})
		wantCode(t, err, monitor.CodeResponseInvalid)
		if st, _ := b.svc.Status(ctx, "evt-1"); st.State != monitor.StateLeased {
			t.Fatalf("a refused response changed the record: %+v", st)
		}
	})
	t.Run("event invalid and missing", func(t *testing.T) {
		b := setup(t, monitor.Config{})
		_, err := b.svc.Status(ctx, "bad id")
		wantCode(t, err, monitor.CodeEventInvalid)
		_, err = b.svc.Status(ctx, "evt-none")
		wantCode(t, err, monitor.CodeEventMissing)
		_, _, err = b.svc.Claim(ctx, "evt-none")
		wantCode(t, err, monitor.CodeEventMissing)
		_, err = b.svc.PollOnce(ctx, "bad/id", reader())
		wantCode(t, err, monitor.CodeEventInvalid)
	})
}

// lostWrites is a store whose finishing writes fail without explanation.
type lostWrites struct{ monitor.Store }

func (lostWrites) Transition(context.Context, monitor.Fence, monitor.Update) (monitor.Record, error) {
	return monitor.Record{}, monitor.LostWrite()
}

func TestPollOnceErrorMapping(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name      string
		step      func(lifecycle.Target) (lifecycle.Response, error)
		state     monitor.State
		code      string
		remote    string
		nextAfter time.Duration
	}{
		{"answer processing", answer("processing"), monitor.StateWatching, "", "processing", 30 * time.Second},
		{"answer published", answer("published"), monitor.StateTerminal, "", "published", 0},
		{"retryable client failure", failWith(core.Retry("cms.http_503")), monitor.StateRetryWait, "cms.http_503", "", 5 * time.Second},
		{"wrapped retryable failure", failWith(errors.Join(errors.New("dial"), core.Wrap("cms.timeout", true, context.DeadlineExceeded))), monitor.StateRetryWait, "cms.timeout", "", 5 * time.Second},
		{"non-retryable client failure", failWith(core.Fail("cms.http_404")), monitor.StateFailed, "cms.http_404", "", 0},
		{"response invalid is never retried", failWith(core.Wrap(monitor.CodeResponseInvalid, true, errors.New("bad signature"))), monitor.StateFailed, monitor.CodeResponseInvalid, "", 0},
		{"invalid code", failWith(&core.Error{Code: "Bad Code", Retryable: true}), monitor.StateFailed, monitor.CodeClientFailure, "", 0},
		{"unknown error", failWith(errors.New("boom")), monitor.StateFailed, monitor.CodeClientFailure, "", 0},
		{"answer for another change", func(target lifecycle.Target) (lifecycle.Response, error) {
			target.SourceSequence = 8
			return lifecycle.Parse(target, "r", []byte(`{"schema":"localeflow.cms-lifecycle.v1","request_id":"r","event_id":"evt-1","site_id":"site-berlin","plan_id":"plan-42","website_version":"v2026.11.29","source_sequence":8,"status":"processing","required_locales":["a","b"],"approved_locales":[],"blocked_locales":[],"queue_counts":{},"delivery":null,"tombstone":null}`))
		}, monitor.StateFailed, monitor.CodeResponseInvalid, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := setup(t, monitor.Config{})
			register(t, b, "evt-1")
			out, err := b.svc.PollOnce(ctx, "evt-1", reader(tt.step))
			if err != nil {
				t.Fatalf("PollOnce: %v", err)
			}
			if !out.Polled || out.State != tt.state || out.ErrorCode != tt.code || out.RemoteStatus != tt.remote ||
				!out.NextPoll.Equal(t0.Add(nextAfter(b, tt.state, tt.nextAfter))) || out.Attempt != 1 {
				t.Fatalf("outcome = %+v", out)
			}
		})
	}
}

func TestPollOnceResponseInvalidFromReaderFails(t *testing.T) {
	b := setup(t, monitor.Config{})
	register(t, b, "evt-1")
	out, err := b.svc.PollOnce(context.Background(), "evt-1", reader(failWith(core.Fail(monitor.CodeResponseInvalid))))
	if err != nil || out.State != monitor.StateFailed || out.ErrorCode != monitor.CodeResponseInvalid {
		t.Fatalf("outcome = %+v, %v", out, err)
	}
}

func TestPollOnceContextEndedRetries(t *testing.T) {
	b := setup(t, monitor.Config{})
	register(t, b, "evt-1")
	ctx, cancel := context.WithCancel(context.Background())
	r := reader(func(lifecycle.Target) (lifecycle.Response, error) {
		cancel()
		return lifecycle.Response{}, context.Canceled
	})
	out, err := b.svc.PollOnce(ctx, "evt-1", r)
	if err != nil || out.State != monitor.StateRetryWait || out.ErrorCode != monitor.CodeClientFailure {
		t.Fatalf("outcome = %+v, %v", out, err)
	}
}

func TestPollOnceNotClaimable(t *testing.T) {
	ctx := context.Background()
	b := setup(t, monitor.Config{})
	register(t, b, "evt-1")
	out, err := b.svc.PollOnce(ctx, "evt-1", reader(answer("processing")))
	if err != nil || !out.Polled {
		t.Fatal(out, err)
	}
	out, err = b.svc.PollOnce(ctx, "evt-1", reader())
	if err != nil || out.Polled || out.State != monitor.StateWatching || !out.NextPoll.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("early poll = %+v, %v", out, err)
	}
	b.clock.Advance(30 * time.Second)
	c := claimOne(t, b, "evt-1")
	out, err = b.svc.PollOnce(ctx, "evt-1", reader())
	if err != nil || out.Polled || out.State != monitor.StateLeased || !out.LeaseExpires.Equal(c.LeaseExpires) {
		t.Fatalf("poll of a leased record = %+v, %v", out, err)
	}
}

func TestReaderChecks(t *testing.T) {
	ctx := context.Background()
	b := setup(t, monitor.Config{Lease: 10 * time.Second})
	register(t, b, "evt-1")
	_, err := b.svc.PollOnce(ctx, "evt-1", nil)
	wantCode(t, err, monitor.CodeClientInvalid)
	_, err = b.svc.PollOnce(ctx, "evt-1", &scriptedReader{timeout: 0})
	wantCode(t, err, monitor.CodeClientInvalid)
	_, err = b.svc.PollOnce(ctx, "evt-1", &scriptedReader{timeout: 10 * time.Second})
	wantCode(t, err, monitor.CodeLeaseTooShort)
	_, _, err = b.svc.RunOnce(ctx, &scriptedReader{timeout: 11 * time.Second})
	wantCode(t, err, monitor.CodeLeaseTooShort)
	if st, _ := b.svc.Status(ctx, "evt-1"); st.State != monitor.StatePending {
		t.Fatalf("a refused poll claimed the record: %s", st.State)
	}
	if _, err := b.svc.PollOnce(ctx, "evt-1", &scriptedReader{timeout: 9 * time.Second, steps: []func(lifecycle.Target) (lifecycle.Response, error){answer("processing")}}); err != nil {
		t.Fatalf("timeout below lease refused: %v", err)
	}
}

func TestRunOnceAndClaimDue(t *testing.T) {
	ctx := context.Background()
	b := setup(t, monitor.Config{})
	if _, ok, err := b.svc.RunOnce(ctx, reader()); ok || err != nil {
		t.Fatalf("RunOnce on empty = %v %v", ok, err)
	}
	for _, id := range []string{"evt-a", "evt-b", "evt-c"} {
		register(t, b, id)
		b.clock.Advance(time.Millisecond)
	}
	out, ok, err := b.svc.RunOnce(ctx, reader(answer("ready")))
	if err != nil || !ok || out.EventID != "evt-a" || out.State != monitor.StateWatching {
		t.Fatalf("RunOnce = %+v %v %v", out, ok, err)
	}
	claims, err := b.svc.ClaimDue(ctx, 10)
	if err != nil || len(claims) != 2 || claims[0].EventID != "evt-b" || claims[1].EventID != "evt-c" {
		t.Fatalf("ClaimDue = %+v, %v", claims, err)
	}
	// Live leases stay listed (the claim does not move the wake key), but
	// nobody can claim them.
	if ids, _ := b.svc.Due(ctx, 10); strings.Join(ids, ",") != "evt-b,evt-c" {
		t.Fatalf("due with live leases = %v, want evt-b,evt-c", ids)
	}
	if again, err := b.svc.ClaimDue(ctx, 10); err != nil || len(again) != 0 {
		t.Fatalf("ClaimDue over live leases = %+v, %v", again, err)
	}
	for _, c := range claims {
		if _, err := b.svc.Poll(ctx, c, reader(answer("published"))); err != nil {
			t.Fatal(err)
		}
	}
	h, err := b.svc.Health(ctx)
	// Successful terminal records are not visited by health (cost bound).
	if err != nil || h.Status != monitor.HealthOK || h.Counts[monitor.StateWatching] != 1 || h.Counts[monitor.StateTerminal] != 0 || h.Due != 0 {
		t.Fatalf("health = %+v, %v", h, err)
	}
	b.clock.Advance(30 * time.Second)
	h, _ = b.svc.Health(ctx)
	if h.Due != 1 {
		t.Fatalf("health due = %+v", h)
	}
	body, err := json.Marshal(h)
	want := `{"counts":{"failed":0,"leased":0,"pending":0,"retry_wait":0,"terminal":0,"watching":1},"due":1,"expired_leases":0,"failed":0,"remote_failures":0}`
	if err != nil || string(body) != want {
		t.Fatalf("health JSON = %s, %v", body, err)
	}
}

func TestTimeInvalid(t *testing.T) {
	ctx := context.Background()
	b := setup(t, monitor.Config{})
	register(t, b, "evt-1")
	b.clock.Set(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))
	_, err := b.svc.Status(ctx, "evt-1")
	wantCode(t, err, monitor.CodeTimeInvalid)
	_, _, err = b.svc.Claim(ctx, "evt-1")
	wantCode(t, err, monitor.CodeTimeInvalid)
	_, err = b.svc.Health(ctx)
	wantCode(t, err, monitor.CodeTimeInvalid)
}

// nextAfter is a table's expected wait: a retry_wait row gives the
// unjittered backoff, which the change "evt-1" waits jittered.
func nextAfter(_ bundle, state monitor.State, d time.Duration) time.Duration {
	if state == monitor.StateRetryWait {
		return core.Jitter(d, "evt-1", 1)
	}
	return d
}
