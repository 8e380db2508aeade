package monitor_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/lifecycle"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/monitor/memstore"
)

// t0 is the test epoch.
var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// manualClock is a clock tests step by hand (also backwards).
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type bundle struct {
	store *memstore.Store
	clock *manualClock
	svc   *monitor.Service
}

func setup(t *testing.T, cfg monitor.Config) bundle {
	t.Helper()
	st := memstore.New()
	clock := &manualClock{now: t0}
	svc, err := monitor.NewService(st, clock, nil, cfg)
	if err != nil {
		t.Fatalf("NewService: %v", err)
	}
	return bundle{store: st, clock: clock, svc: svc}
}

// changeJSON is a change as the dispatcher sends it (with an extra field
// that is hashed but not stored).
func changeJSON(eventID string) string {
	return fmt.Sprintf(`{"event_id":%q,"site_id":"site-berlin","website_version":"v2026.11.29","source_sequence":7,"note":"hashed only"}`, eventID)
}

// tb is the part of testing.TB and *rapid.T the fixtures need.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

func changeSHA(t tb, change string) string {
	t.Helper()
	c, err := core.CanonicalizeJSON([]byte(change))
	if err != nil {
		t.Fatal(err)
	}
	return core.SHA256Hex(c)
}

// detail builds a localeflow.change.dispatched detail.
func detail(t tb, eventID, remoteStatus string) string {
	t.Helper()
	change := changeJSON(eventID)
	return fmt.Sprintf(`{"change":%s,"dispatch":{"event_id":%q,"payload_sha256":%q,"status":"succeeded","remote_plan_id":"plan-42","remote_job_count":2,"remote_status":%q,"response_sha256":"%064x","extra":"kept by the dispatcher"}}`,
		change, eventID, changeSHA(t, change), remoteStatus, 1)
}

func register(t *testing.T, b bundle, eventID string) monitor.Status {
	t.Helper()
	d, err := monitor.ParseDispatched([]byte(detail(t, eventID, "enqueued")))
	if err != nil {
		t.Fatalf("ParseDispatched: %v", err)
	}
	st, err := b.svc.Register(context.Background(), d)
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	return st
}

// lifecycleBody is a CMS answer for the fixture change.
func lifecycleBody(eventID, status, requestID string) []byte {
	return []byte(fmt.Sprintf(`{"schema":"localeflow.cms-lifecycle.v1","request_id":%q,"event_id":%q,"site_id":"site-berlin","plan_id":"plan-42","website_version":"v2026.11.29","source_sequence":7,"status":%q,"required_locales":["de-DE","fr-FR"],"approved_locales":["de-DE"],"blocked_locales":[["fr-FR","cms.glossary_missing"]],"queue_counts":{"pending":1},"delivery":null,"tombstone":null}`,
		requestID, eventID, status))
}

func response(t tb, target lifecycle.Target, status string) lifecycle.Response {
	t.Helper()
	r, err := lifecycle.Parse(target, "req-1", lifecycleBody(target.EventID, status, "req-1"))
	if err != nil {
		t.Fatalf("lifecycle.Parse: %v", err)
	}
	return r
}

// scriptedReader answers each ReadLifecycle with the next scripted step.
type scriptedReader struct {
	mu      sync.Mutex
	timeout time.Duration
	steps   []func(lifecycle.Target) (lifecycle.Response, error)
	calls   int
}

func (r *scriptedReader) Timeout() time.Duration { return r.timeout }

func (r *scriptedReader) ReadLifecycle(_ context.Context, target lifecycle.Target) (lifecycle.Response, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.calls >= len(r.steps) {
		return lifecycle.Response{}, fmt.Errorf("scripted reader: no step %d", r.calls)
	}
	step := r.steps[r.calls]
	r.calls++
	return step(target)
}

func answer(status string) func(lifecycle.Target) (lifecycle.Response, error) {
	return func(target lifecycle.Target) (lifecycle.Response, error) {
		return lifecycle.Parse(target, "req-x", lifecycleBody(target.EventID, status, "req-x"))
	}
}

func failWith(err error) func(lifecycle.Target) (lifecycle.Response, error) {
	return func(lifecycle.Target) (lifecycle.Response, error) { return lifecycle.Response{}, err }
}

func reader(steps ...func(lifecycle.Target) (lifecycle.Response, error)) *scriptedReader {
	return &scriptedReader{timeout: 10 * time.Second, steps: steps}
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if !core.HasCode(err, code) {
		t.Fatalf("error = %v, want code %s", err, code)
	}
}
