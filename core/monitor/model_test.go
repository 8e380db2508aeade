package monitor_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/lifecycle"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/monitor/memstore"
)

// modelItem is what the lease state machine must hold for one record.
type modelItem struct {
	state                       monitor.State
	failures, attempts          int
	nextPoll, updated, leaseExp int64
	token                       string
	remote                      string
}

type leaseModel struct {
	cfg     monitor.Config
	store   *memstore.Store
	clock   *manualClock
	workers []*monitor.Service
	held    []map[string]monitor.Claim // per worker: claims it believes it holds
	items   map[string]*modelItem
	ids     []string
}

func (m *leaseModel) now() int64 { return core.Millis(m.clock.Now()) }

// TestLeaseStateMachine drives interleaved workers (claims, completes,
// retries, fails, crashes that drop claims, clock steps forward and back,
// expired-lease reclaims) against the memory store and checks, after every
// step, that each record validates and equals the model, and that at most
// one claim per record can still finish.
func TestLeaseStateMachine(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		cfg := monitor.Config{PollInterval: 30 * time.Second, BaseDelay: 5 * time.Second, MaxDelay: 20 * time.Second,
			Lease: 60 * time.Second, MaxConsecutiveFailures: 3}
		m := &leaseModel{cfg: cfg, store: memstore.New(), clock: &manualClock{now: t0}, items: map[string]*modelItem{}}
		for w := range 3 {
			c := cfg
			c.WorkerID = fmt.Sprintf("w%d", w)
			svc, err := monitor.NewService(m.store, m.clock, nil, c)
			if err != nil {
				rt.Fatal(err)
			}
			m.workers = append(m.workers, svc)
			m.held = append(m.held, map[string]monitor.Claim{})
		}
		cfg = m.workers[0].Config()
		m.cfg = cfg
		ctx := context.Background()
		pickItem := func(rt *rapid.T) string {
			if len(m.ids) == 0 {
				rt.Skip("nothing registered")
			}
			return rapid.SampledFrom(m.ids).Draw(rt, "item")
		}
		pickHeld := func(rt *rapid.T) (int, monitor.Claim) {
			w := rapid.IntRange(0, len(m.workers)-1).Draw(rt, "worker")
			if len(m.held[w]) == 0 {
				rt.Skip("worker holds nothing")
			}
			var ids []string
			for id := range m.held[w] {
				ids = append(ids, id)
			}
			sortStrings(ids)
			return w, m.held[w][rapid.SampledFrom(ids).Draw(rt, "held")]
		}
		rt.Repeat(map[string]func(*rapid.T){
			"register": func(rt *rapid.T) {
				id := fmt.Sprintf("evt-%d", rapid.IntRange(0, 3).Draw(rt, "id"))
				d, err := monitor.ParseDispatched([]byte(detail(rt, id, "enqueued")))
				if err != nil {
					rt.Fatal(err)
				}
				_, err = m.workers[0].Register(ctx, d)
				if err != nil {
					rt.Fatalf("Register: %v", err)
				}
				if _, ok := m.items[id]; !ok {
					now := m.now()
					m.items[id] = &modelItem{state: monitor.StatePending, nextPoll: now, updated: now}
					m.ids = append(m.ids, id)
				}
			},
			"claim": func(rt *rapid.T) {
				id := pickItem(rt)
				w := rapid.IntRange(0, len(m.workers)-1).Draw(rt, "worker")
				m.claim(rt, w, id)
			},
			"complete": func(rt *rapid.T) {
				w, c := pickHeld(rt)
				status := rapid.SampledFrom([]string{"processing", "ready", "published", "publication_failed"}).Draw(rt, "status")
				resp, err := lifecycle.Parse(c.Target(), "req", lifecycleBody(c.EventID, status, "req"))
				if err != nil {
					rt.Fatal(err)
				}
				_, err = m.workers[w].Complete(ctx, c, resp)
				m.finish(rt, w, c, err, func(it *modelItem, now int64) {
					it.failures, it.remote = 0, status
					if lifecycle.IsTerminal(status) {
						it.state, it.nextPoll = monitor.StateTerminal, now
					} else {
						it.state, it.nextPoll = monitor.StateWatching, now+m.cfg.PollInterval.Milliseconds()
					}
				})
			},
			"retry": func(rt *rapid.T) {
				w, c := pickHeld(rt)
				_, err := m.workers[w].Retry(ctx, c, "cms.http_503")
				m.finish(rt, w, c, err, func(it *modelItem, now int64) { m.failure(c.EventID, it, now, true) })
			},
			"fail": func(rt *rapid.T) {
				w, c := pickHeld(rt)
				_, err := m.workers[w].Fail(ctx, c, "cms.http_404")
				m.finish(rt, w, c, err, func(it *modelItem, now int64) { m.failure(c.EventID, it, now, false) })
			},
			"crash": func(rt *rapid.T) {
				w := rapid.IntRange(0, len(m.workers)-1).Draw(rt, "worker")
				m.held[w] = map[string]monitor.Claim{}
			},
			"clock forward": func(rt *rapid.T) {
				m.clock.Advance(time.Duration(rapid.Int64Range(0, 90_000).Draw(rt, "ms")) * time.Millisecond)
			},
			"clock back": func(rt *rapid.T) {
				m.clock.Advance(-time.Duration(rapid.Int64Range(1, 5_000).Draw(rt, "ms")) * time.Millisecond)
			},
			"": func(rt *rapid.T) { m.check(rt) },
		})
	})
}

func (m *leaseModel) failure(id string, it *modelItem, now int64, retryable bool) {
	it.failures++
	it.state, it.nextPoll = monitor.StateRetryWait, now+m.cfg.RetryDelayFor(id, it.failures).Milliseconds()
	if !retryable || it.failures >= m.cfg.MaxConsecutiveFailures {
		it.state, it.nextPoll = monitor.StateFailed, now
	}
}

func (m *leaseModel) claim(rt *rapid.T, w int, id string) {
	it := m.items[id]
	now := m.now()
	c, ok, err := m.workers[w].Claim(context.Background(), id)
	switch {
	case it.state.Claimable() && it.nextPoll <= now && it.updated <= now:
		if err != nil || !ok {
			rt.Fatalf("claim of a due record = %v, %v", ok, err)
		}
		it.state, it.attempts, it.token, it.leaseExp, it.updated = monitor.StateLeased, it.attempts+1, c.LeaseToken, now+m.cfg.Lease.Milliseconds(), now
		if c.Attempt != it.attempts || c.ConsecutiveFailures != it.failures {
			rt.Fatalf("claim %+v, model %+v", c, *it)
		}
		m.held[w][id] = c
	case it.updated > now:
		if err != nil || ok {
			rt.Fatalf("claim with the clock behind = %v, %v", ok, err)
		}
	case it.state == monitor.StateLeased && it.leaseExp <= now:
		if err != nil || ok {
			rt.Fatalf("claim of an expired lease = %v, %v", ok, err)
		}
		// Reclaimed as a failure.
		it.token, it.leaseExp, it.updated = "", 0, now
		m.failure(id, it, now, true)
	default:
		if err != nil || ok {
			rt.Fatalf("claim of a record not claimable = %v, %v (model %+v)", ok, err, *it)
		}
	}
}

func (m *leaseModel) finish(rt *rapid.T, w int, c monitor.Claim, err error, apply func(*modelItem, int64)) {
	it := m.items[c.EventID]
	now := m.now()
	delete(m.held[w], c.EventID)
	var want string
	switch {
	case it.state != monitor.StateLeased || it.token != c.LeaseToken:
		want = monitor.CodeClaimLost
	case it.leaseExp <= now:
		want = monitor.CodeLeaseExpired
	case it.updated > now:
		want = monitor.CodeClockRegressed
	}
	if want != "" {
		if !core.HasCode(err, want) {
			rt.Fatalf("finish of %s = %v, want %s (model %+v)", c.EventID, err, want, *it)
		}
		return
	}
	if err != nil {
		rt.Fatalf("finish of a live claim: %v", err)
	}
	it.token, it.leaseExp, it.updated = "", 0, now
	apply(it, now)
}

func (m *leaseModel) check(rt *rapid.T) {
	ctx := context.Background()
	for _, id := range m.ids {
		rec, err := m.store.Get(ctx, id)
		if err != nil {
			rt.Fatal(err)
		}
		if _, err := monitor.Validate(rec); err != nil {
			rt.Fatalf("record %s invalid: %v (%+v)", id, err, rec)
		}
		it := m.items[id]
		if rec.State != it.state || rec.ConsecutiveFailures != it.failures || rec.PollAttempts != it.attempts ||
			rec.NextPollMS != it.nextPoll || rec.UpdatedMS != it.updated || rec.LeaseToken != it.token ||
			rec.LeaseExpiresMS != it.leaseExp || rec.RemoteStatus != it.remote {
			rt.Fatalf("record %s = %+v, model %+v", id, rec, *it)
		}
		// At most one claim anywhere carries the live token.
		live := 0
		for _, held := range m.held {
			if c, ok := held[id]; ok && c.LeaseToken == rec.LeaseToken && rec.State == monitor.StateLeased {
				live++
			}
		}
		if live > 1 {
			rt.Fatalf("%d workers hold the live lease of %s", live, id)
		}
	}
	h, err := m.workers[0].Health(ctx)
	if err != nil {
		rt.Fatal(err)
	}
	if h.Invalid != 0 || (h.Status == monitor.HealthOK) != (h.Failed == 0 && h.ExpiredLeases == 0 && h.RemoteFailures == 0) {
		rt.Fatalf("health = %+v", h)
	}
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
