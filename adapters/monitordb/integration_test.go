package monitordb

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/lifecycle"
	"github.com/localeflow/localeflow/core/monitor"
)

// scriptedCMS dictates, per item, the sequence of answers the CMS gives:
// item i follows scripts[i % len(scripts)].
type scriptedCMS struct {
	mu       sync.Mutex
	calls    map[string]int
	inFlight map[string]int
	overlap  atomic.Int64
}

type cmsStep struct {
	status string // a lifecycle status, or "" for an error
	err    error
}

var scripts = [][]cmsStep{
	{{status: "processing"}, {status: "publishing"}, {status: "published"}},
	{{status: "publication_failed"}},
	{{err: core.Retry("cms.http_503")}, {err: core.Retry("cms.timeout")}, {status: "published"}},
	{{err: core.Fail("cms.http_404")}},
	{{err: core.Retry("cms.http_503")}, {err: core.Retry("cms.http_503")}, {err: core.Retry("cms.http_503")}, {err: core.Retry("cms.http_503")}, {err: core.Retry("cms.http_503")}},
	{{status: "ready"}, {err: core.Fail(monitor.CodeResponseInvalid)}},
}

func scriptOf(eventID string) []cmsStep {
	i, err := strconv.Atoi(strings.TrimPrefix(eventID, "evt-"))
	if err != nil {
		panic("scripted CMS: unexpected event id " + eventID)
	}
	return scripts[i%len(scripts)]
}

func (c *scriptedCMS) Timeout() time.Duration { return time.Second }

func (c *scriptedCMS) ReadLifecycle(_ context.Context, target lifecycle.Target) (lifecycle.Response, error) {
	c.mu.Lock()
	n := c.calls[target.EventID]
	c.calls[target.EventID] = n + 1
	c.inFlight[target.EventID]++
	if c.inFlight[target.EventID] > 1 {
		c.overlap.Add(1)
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.inFlight[target.EventID]--
		c.mu.Unlock()
	}()
	time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
	script := scriptOf(target.EventID)
	if n >= len(script) {
		return lifecycle.Response{}, fmt.Errorf("poll %d of %s after its final answer", n+1, target.EventID)
	}
	step := script[n]
	if step.err != nil {
		return lifecycle.Response{}, step.err
	}
	body := fmt.Sprintf(`{"schema":"localeflow.cms-lifecycle.v1","request_id":"req-%d","event_id":%q,"site_id":%q,"plan_id":%q,"website_version":%q,"source_sequence":%d,"status":%q,"required_locales":["de-DE","fr-FR"],"approved_locales":[],"blocked_locales":[],"queue_counts":{"pending":%d},"delivery":null,"tombstone":null}`,
		n, target.EventID, target.SiteID, target.PlanID, target.WebsiteVersion, target.SourceSequence, step.status, n)
	return lifecycle.Parse(target, fmt.Sprintf("req-%d", n), []byte(body))
}

func dispatchedDetail(t testing.TB, eventID string) monitor.Dispatched {
	change := fmt.Sprintf(`{"event_id":%q,"site_id":"site-berlin","website_version":"v2026.11.29","source_sequence":7}`, eventID)
	canon, err := core.CanonicalizeJSON([]byte(change))
	if err != nil {
		t.Fatal(err)
	}
	d, err := monitor.ParseDispatched([]byte(fmt.Sprintf(`{"change":%s,"dispatch":{"event_id":%q,"payload_sha256":%q,"status":"succeeded","remote_plan_id":"plan-42","remote_job_count":2,"remote_status":"enqueued","response_sha256":%q}}`,
		change, eventID, core.SHA256Hex(canon), strings.Repeat("c", 64))))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestEightWorkersThousandItems: 8 concurrent pollers over 1,000 items on
// DynamoDB Local. No item is polled twice under one lease (no overlapping
// reads, every poll attempt number used once), none is lost, and every
// item ends in the state its CMS script dictates.
func TestEightWorkersThousandItems(t *testing.T) {
	const items, workers = 1000, 8
	s, _, _ := newStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg := monitor.Config{PollInterval: time.Millisecond, BaseDelay: time.Millisecond, MaxDelay: 4 * time.Millisecond, Lease: 30 * time.Second}
	var svcs []*monitor.Service
	for w := range workers {
		c := cfg
		c.WorkerID = fmt.Sprintf("worker-%d", w)
		svc, err := monitor.NewService(s, core.SystemClock{}, nil, c)
		if err != nil {
			t.Fatal(err)
		}
		svcs = append(svcs, svc)
	}
	ids := make([]string, items)
	for i := range ids {
		ids[i] = fmt.Sprintf("evt-%04d", i)
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < items; i += workers {
				if _, err := svcs[w].Register(ctx, dispatchedDetail(t, ids[i])); err != nil {
					t.Errorf("register %s: %v", ids[i], err)
				}
			}
		}()
	}
	wg.Wait()
	cms := &scriptedCMS{calls: map[string]int{}, inFlight: map[string]int{}}
	var mu sync.Mutex
	attempts := map[string]map[int]string{} // event → attempt → worker
	var finals atomic.Int64
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for finals.Load() < items && ctx.Err() == nil {
				due, err := svcs[w].Due(ctx, 40)
				if err != nil {
					t.Errorf("due: %v", err)
					return
				}
				if len(due) == 0 {
					time.Sleep(2 * time.Millisecond)
					continue
				}
				rand.Shuffle(len(due), func(i, j int) { due[i], due[j] = due[j], due[i] })
				for _, id := range due {
					out, err := svcs[w].PollOnce(ctx, id, cms)
					if err != nil {
						t.Errorf("poll %s: %v", id, err)
						return
					}
					if out.Owed != nil {
						// As the poller does: announce, then clear (an owed
						// final record stays in the wake index until then).
						if err := svcs[w].Announced(ctx, *out.Owed); err != nil {
							t.Errorf("announced %s: %v", id, err)
							return
						}
					}
					if !out.Polled {
						continue
					}
					mu.Lock()
					if attempts[id] == nil {
						attempts[id] = map[int]string{}
					}
					if prev, dup := attempts[id][out.Attempt]; dup {
						t.Errorf("%s attempt %d polled by %s and worker-%d", id, out.Attempt, prev, w)
					}
					attempts[id][out.Attempt] = fmt.Sprintf("worker-%d", w)
					mu.Unlock()
					if out.State.Final() {
						finals.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	if finals.Load() != items {
		t.Fatalf("%d of %d items finished", finals.Load(), items)
	}
	if n := cms.overlap.Load(); n != 0 {
		t.Fatalf("%d overlapping reads of one item", n)
	}
	for i, id := range ids {
		st, err := svcs[0].Status(ctx, id)
		if err != nil {
			t.Fatalf("status %s: %v", id, err)
		}
		script := scripts[i%len(scripts)]
		last := script[len(script)-1]
		switch {
		case last.err != nil && core.CodeOf(last.err) == "cms.http_503":
			if st.State != monitor.StateFailed || st.LastErrorCode != "cms.http_503" || st.ConsecutiveFailures != 5 {
				t.Fatalf("%s = %+v, want failed at the limit", id, st)
			}
		case last.err != nil:
			if st.State != monitor.StateFailed || st.LastErrorCode != core.CodeOf(last.err) {
				t.Fatalf("%s = %+v, want failed %s", id, st, core.CodeOf(last.err))
			}
		default:
			if st.State != monitor.StateTerminal || st.RemoteStatus != last.status || st.LifecycleSHA256 == "" {
				t.Fatalf("%s = %+v, want terminal %s", id, st, last.status)
			}
		}
		if st.PollAttempts != len(script) || cms.calls[id] != len(script) || len(attempts[id]) != len(script) {
			t.Fatalf("%s: attempts %d, CMS calls %d, polled attempts %d, script %d", id, st.PollAttempts, cms.calls[id], len(attempts[id]), len(script))
		}
	}
	h, err := svcs[0].Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Items 1,3,4,5 (mod 6) need attention: 4 of every 6.
	wantAttention := 0
	for i := range items {
		if m := i % len(scripts); m == 1 || m == 3 || m == 4 || m == 5 {
			wantAttention++
		}
	}
	if h.Counts[monitor.StateFailed]+h.RemoteFailures != wantAttention || h.Due != 0 || h.ExpiredLeases != 0 || h.Status != monitor.HealthBlocked {
		t.Fatalf("health = %+v, want %d needing attention", h, wantAttention)
	}
}
