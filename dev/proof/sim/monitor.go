package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/localeflow/localeflow/adapters/cms"
	"github.com/localeflow/localeflow/adapters/cms/cmstest"
	"github.com/localeflow/localeflow/adapters/delayqueue"
	"github.com/localeflow/localeflow/adapters/eventbus"
	"github.com/localeflow/localeflow/adapters/quarantine"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/lifecycle"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/dev/logcapture"
	"github.com/localeflow/localeflow/functions/poller/handler"
	"github.com/localeflow/localeflow/signing"
	"github.com/localeflow/localeflow/topology"
)

// Secret is in every change's and release's text: it must never appear in
// a log line or a content-free record.
const Secret = "SIMSECRET"

var (
	cmsKey   = []byte("sim-cms-hmac-key-0123456789abcdef")
	eventKey = releasetest.NewFixture().EventKey
)

// signedDetail signs an input event's payload as its producers do (v2:
// detail-type and time signed), at the virtual time of publication.
func signedDetail(detailType string, payload []byte) json.RawMessage {
	detail, err := signing.EventDetailV2(eventKey, detailType, time.Now(), payload)
	if err != nil {
		panic(err)
	}
	return detail
}

// lease is the history of one lease, for the safety checks.
type lease struct {
	token   string
	expires int64
	open    bool
	inv     int
}

// monitorStore gates every call of the real memory store at its call
// boundary and checks each accepted write against the lease history.
var _ monitor.Store = (*monitorStore)(nil)

type monitorStore struct {
	w      *World
	mem    monitorBacking
	leases map[string]*lease
	// altered holds the records whose schema version was changed.
	altered map[string]bool
	// reclaimed holds the records a write took from an expired lease.
	reclaimed map[string]bool
}

func storeDown() error { return core.Wrap(monitor.CodeStoreUnavailable, true, errInjected) }

func (s *monitorStore) Create(ctx context.Context, rec monitor.Record) (out monitor.Record, created bool, err error) {
	err = s.w.do(ctx, KindStore, "monitor.Create "+rec.EventID, storeDown, func() (string, error) {
		var e error
		out, created, e = s.mem.Create(ctx, rec)
		return "created=" + strconv.FormatBool(created), e
	})
	return out, created, err
}

func (s *monitorStore) Get(ctx context.Context, id string) (out monitor.Record, err error) {
	err = s.w.do(ctx, KindStore, "monitor.Get "+id, storeDown, func() (string, error) {
		var e error
		out, e = s.mem.Get(ctx, id)
		return string(out.State), e
	})
	return out, err
}

func (s *monitorStore) Due(ctx context.Context, nowMS int64, limit int) (ids []string, err error) {
	err = s.w.do(ctx, KindStore, "monitor.Due", storeDown, func() (string, error) {
		var e error
		ids, e = s.mem.Due(ctx, nowMS, limit)
		return strings.Join(ids, ","), e
	})
	return ids, err
}

func (s *monitorStore) DuePage(ctx context.Context, nowMS int64, limit int, cursor monitor.DueCursor) (ids []string, next monitor.DueCursor, err error) {
	err = s.w.do(ctx, KindStore, "monitor.DuePage", storeDown, func() (string, error) {
		var e error
		ids, next, e = s.mem.DuePage(ctx, nowMS, limit, cursor)
		return strings.Join(ids, ","), e
	})
	return ids, next, err
}

func (s *monitorStore) Hint(ctx context.Context, h monitor.Hint) (out monitor.Record, ok bool, err error) {
	err = s.w.do(ctx, KindStore, "monitor.Hint "+h.EventID, storeDown, func() (string, error) {
		var e error
		out, ok, e = s.mem.Hint(ctx, h)
		if e != nil || !ok {
			return "not hinted, " + string(out.State), e
		}
		return "hinted", nil
	})
	return out, ok, err
}

func (s *monitorStore) Park(ctx context.Context, id string, nowMS int64) error {
	return s.w.do(ctx, KindStore, "monitor.Park "+id, storeDown, func() (string, error) {
		return "parked", s.mem.Park(ctx, id, nowMS)
	})
}

func (s *monitorStore) Owed(ctx context.Context, beforeMS int64, limit int) (ids []string, err error) {
	err = s.w.do(ctx, KindStore, "monitor.Owed", storeDown, func() (string, error) {
		var e error
		ids, e = s.mem.Owed(ctx, beforeMS, limit)
		return strings.Join(ids, ","), e
	})
	return ids, err
}

func (s *monitorStore) Announced(ctx context.Context, id string, finishedMS int64) error {
	return s.w.do(ctx, KindStore, "monitor.Announced "+id, storeDown, func() (string, error) {
		err := s.mem.Announced(ctx, id, finishedMS)
		if err != nil {
			return "refused " + core.CodeOf(err), err
		}
		return "cleared", nil
	})
}

func (s *monitorStore) Claim(ctx context.Context, id string, l monitor.Lease) (out monitor.Record, ok bool, err error) {
	inv := invocationOf(ctx)
	err = s.w.do(ctx, KindStore, "monitor.Claim "+id, storeDown, func() (string, error) {
		var e error
		out, ok, e = s.mem.Claim(ctx, id, l)
		if e != nil || !ok {
			return "not claimed, " + string(out.State), e
		}
		if s.altered[id] {
			s.w.violate("record %s of another schema version was leased", id)
		}
		if prev := s.leases[id]; prev != nil && prev.open && prev.expires > l.NowMS {
			s.w.violate("two live leases on %s: #%d holds one until %d, claimed again at %d", id, prev.inv, prev.expires, l.NowMS)
		}
		s.leases[id] = &lease{token: l.Token, expires: l.ExpiresMS, open: true, inv: invID(inv)}
		return fmt.Sprintf("leased until +%dms", l.ExpiresMS-l.NowMS), nil
	})
	return out, ok, err
}

func (s *monitorStore) Transition(ctx context.Context, f monitor.Fence, u monitor.Update) (out monitor.Record, err error) {
	err = s.w.do(ctx, KindStore, "monitor.Transition "+f.EventID+" → "+string(u.State), storeDown, func() (string, error) {
		var e error
		out, e = s.mem.Transition(ctx, f, u)
		if e != nil {
			return "refused " + core.CodeOf(e), e
		}
		l := s.leases[f.EventID]
		switch {
		case l == nil || l.token != f.Token:
			s.w.violate("write to %s accepted under a lease that is not the current one", f.EventID)
		case !l.open:
			s.w.violate("write to %s accepted under a lease already finished", f.EventID)
		case !f.Expired && l.expires <= f.NowMS:
			s.w.violate("write to %s accepted under an expired lease", f.EventID)
		}
		if l != nil {
			l.open = false
		}
		if f.Expired {
			s.reclaimed[f.EventID] = true
		}
		return string(out.State) + " " + out.LastErrorCode + " " + out.RemoteStatus, nil
	})
	return out, err
}

func (s *monitorStore) MarkInvalid(ctx context.Context, id string, nowMS int64) error {
	return s.w.do(ctx, KindStore, "monitor.MarkInvalid "+id, storeDown, func() (string, error) {
		if l := s.leases[id]; l != nil {
			l.open = false
		}
		return "failed", s.mem.MarkInvalid(ctx, id, nowMS)
	})
}

func (s *monitorStore) Census(ctx context.Context) (recs []monitor.Record, err error) {
	err = s.w.do(ctx, KindStore, "monitor.Census", storeDown, func() (string, error) {
		var e error
		recs, e = s.mem.Census(ctx)
		return strconv.Itoa(len(recs)), e
	})
	return recs, err
}

func invID(inv *Invocation) int {
	if inv == nil {
		return 0
	}
	return inv.ID
}

// cmsTransport serves the scripted CMS in memory: each request is one
// gated HTTP call (it can fail before reaching the CMS).
type cmsTransport struct {
	w   *World
	cms http.Handler
}

func (t cmsTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var resp *http.Response
	name := "http " + req.Method + " " + req.URL.Path
	err := t.w.do(req.Context(), KindHTTP, name, func() error { return fmt.Errorf("dial %s: %w", req.URL.Host, errInjected) },
		func() (string, error) {
			rec := httptest.NewRecorder()
			t.cms.ServeHTTP(rec, req)
			resp = rec.Result()
			if req.Context().Err() != nil {
				return "client gave up", req.Context().Err()
			}
			return strconv.Itoa(resp.StatusCode), nil
		})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// skewClock is one warm instance's clock: the virtual clock plus an
// offset that the world may step (forward or back) while faults last.
type skewClock struct{ offset *atomic.Int64 }

func (c skewClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// newClock draws an instance's clock and, on seeds with skew, schedules a
// clock step within the fault window.
func (w *World) newClock(name string) skewClock {
	c := skewClock{offset: &atomic.Int64{}}
	if w.Faults.Skew <= 0 {
		return c
	}
	c.offset.Store(w.rng.Int64N(int64(w.Faults.Skew)))
	at := w.start.Add(time.Duration(w.rng.Int64N(int64(w.faultsEnd.Sub(w.start)))))
	step := w.rng.Int64N(2*int64(w.Faults.Skew)) - int64(w.Faults.Skew)
	w.at(at, fmt.Sprintf("clock step %s %+dms", name, step/int64(time.Millisecond)), func() { c.offset.Add(step) })
	return c
}

// change is one scripted change of the scenario.
type change struct {
	id       string
	dispatch time.Time
	remote   string // the dispatch's remote_status
	script   []cmstest.Step
	tamper   string // "", "schema", "corrupt"
	tampered bool
	forged   bool // its dispatch is signed with a key localeflow does not hold
}

// Monitor is the lifecycle monitor's part of the world: the real poller
// handler and monitor service on the memory store, with the CMS, queue
// and bus simulated.
type Monitor struct {
	w           *World
	mem         monitorBacking
	store       *monitorStore
	cms         *cmstest.CMS
	queue       *Queue
	bus         *Bus
	fn          *Function
	services    []*monitor.Service
	changes     []*change
	log         *logcapture.Buffer
	quarantined *Queue
	// needOperator lists the changes that ended needing an operator.
	needOperator []string
}

func newMonitor(w *World, bus *Bus, log *logcapture.Buffer, quarantined *Queue) (*Monitor, error) {
	top := topology.New("sim")
	mem, err := w.newMonitorBacking()
	if err != nil {
		return nil, err
	}
	m := &Monitor{w: w, mem: mem, cms: cmstest.New(cmsKey), bus: bus, log: log, quarantined: quarantined}
	m.store = &monitorStore{w: w, mem: m.mem, leases: map[string]*lease{}, altered: map[string]bool{}, reclaimed: map[string]bool{}}
	m.queue = newQueue(w, top.PollQueue, "poller")
	m.fn = &Function{w: w, name: "poller", timeout: time.Duration(topology.PollerTimeoutSeconds) * time.Second, queue: m.queue}
	bus.rules[contract.DetailChangeDispatched] = m.queue
	pageSize := 1 + w.rng.IntN(4)
	for i := range 2 {
		clock := w.newClock(fmt.Sprintf("poller-%d", i+1))
		logger := slog.New(slog.NewJSONHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
		svc, err := monitor.NewService(m.store, clock, logger, monitor.Config{WorkerID: fmt.Sprintf("poller-%d", i+1)})
		if err != nil {
			return nil, err
		}
		reader, err := cms.New(cms.Config{BaseURL: "https://cms.sim.invalid", Key: cmsKey, Clock: clock,
			HTTPClient: &http.Client{Transport: cmsTransport{w: w, cms: m.cms}}})
		if err != nil {
			return nil, err
		}
		h, err := handler.New(handler.Config{
			Monitor: svc, Reader: reader, Queue: delayqueue.New(m.queue, "https://sqs.sim.invalid/poll"),
			Bus: eventbus.New(bus, "sim-bus"), Clock: clock, Log: logger,
			Concurrency: w.Faults.WorkerConcurrency, PageSize: pageSize,
			EventKeys: [][]byte{eventKey},
			Rejecter: &quarantine.Rejecter{SQS: quarantined, QueueURL: "https://sqs.sim.invalid/quarantine",
				Source: top.PollQueue.Logical, Function: "poller", Clock: clock},
		})
		if err != nil {
			return nil, err
		}
		m.fn.instances = append(m.fn.instances, h.Handle)
		m.services = append(m.services, svc)
	}
	return m, nil
}

// script draws the changes of one seed and schedules their dispatch.
func (m *Monitor) script(n int, window time.Duration) {
	r := m.w.rng
	nonTerminal := []string{"processing", "publishing", "awaiting_approval", "ready", "queue_recovery"}
	finals := []string{"published", "published", "published", "cancelled", "deleted", "publication_failed", "publication_blocked"}
	for i := range n {
		c := &change{id: fmt.Sprintf("ch-%d", i+1), remote: "enqueued"}
		c.dispatch = m.w.start.Add(time.Duration(r.Int64N(int64(window))))
		if r.IntN(12) == 0 {
			c.remote = []string{"superseded", "cancelled"}[r.IntN(2)]
		}
		for range r.IntN(5) {
			switch k := r.IntN(10); {
			case k < 6:
				c.script = append(c.script, cmstest.StatusStep(nonTerminal[r.IntN(len(nonTerminal))]))
			case k < 9:
				c.script = append(c.script, cmstest.HTTPStep([]int{429, 500, 503}[r.IntN(3)]))
			default:
				c.script = append(c.script, cmstest.Step{Status: "processing", Delay: 15 * time.Second})
			}
		}
		final := cmstest.StatusStep(finals[r.IntN(len(finals))])
		if r.IntN(40) == 0 {
			final = cmstest.Step{Status: "published", Fault: []cmstest.Fault{cmstest.FaultBadSignature, cmstest.FaultMalformedBody, cmstest.FaultExtraKey}[r.IntN(3)]}
		}
		c.script = append(c.script, final)
		if r.IntN(6) == 0 {
			c.tamper = []string{"schema", "corrupt"}[r.IntN(2)]
		}
		m.cms.Put(cmstest.Change{EventID: c.id, SiteID: "site-sim", PlanID: "plan-" + c.id, WebsiteVersion: "v1",
			SourceSequence: 1, RequiredLocales: []string{"de-DE"}})
		m.cms.Script(c.id, c.script...)
		m.changes = append(m.changes, c)
		if r.IntN(15) == 0 {
			// Someone else on the bus publishes a dispatch for this id
			// first, with a key localeflow does not hold.
			f := &change{id: c.id + "-forged", forged: true, dispatch: c.dispatch, remote: "enqueued"}
			m.changes = append(m.changes, f)
			m.w.at(f.dispatch, "forged dispatch "+f.id, func() {
				detail, err := signing.EventDetailV2([]byte("not-localeflow-event-key-0123456"), contract.DetailChangeDispatched, time.Now(), dispatchedDetail(f))
				if err != nil {
					panic(err)
				}
				m.bus.put(contract.DetailChangeDispatched, detail)
			})
		}
		copies := 1
		if r.IntN(8) == 0 {
			copies = 2 // the producer publishes the dispatch twice
		}
		for range copies {
			m.w.at(c.dispatch, "dispatch "+c.id, func() {
				m.bus.put(contract.DetailChangeDispatched, signedDetail(contract.DetailChangeDispatched, dispatchedDetail(c)))
			})
		}
		for range r.IntN(4) {
			// Hints (the CMS saying "look now"): unsigned, any time, in
			// any state; they may only move a watching change's next poll.
			at := c.dispatch.Add(time.Duration(r.Int64N(int64(10 * time.Minute))))
			hint, _ := json.Marshal(map[string]string{"event_id": c.id, "site_id": "site-sim"})
			m.w.at(at, "hint "+c.id, func() { m.bus.put(contract.DetailChangeHint, hint) })
		}
		if c.tamper != "" {
			at := c.dispatch.Add(time.Duration(r.Int64N(int64(5 * time.Minute))))
			m.w.at(at, "tamper "+c.tamper+" "+c.id, func() { m.tamper(c) })
		}
	}
}

// tamper edits a stored record behind the service's back, as an operator
// or a bug in another writer would.
// Only a record still in flight is tampered with: a final record's outcome
// was already announced.
func (m *Monitor) tamper(c *change) {
	m.mem.Tamper(c.id, func(r *monitor.Record) {
		if r.State.Final() {
			return
		}
		c.tampered = true
		if c.tamper == "schema" {
			m.store.altered[c.id] = true
			r.SchemaVersion = monitor.SchemaVersion + 1
		} else {
			r.ConsecutiveFailures = -1
		}
	})
	if !c.tampered {
		m.w.record(nil, "tamper skipped "+c.id, "record final or missing")
	}
}

func dispatchedDetail(c *change) json.RawMessage {
	changeJSON, _ := json.Marshal(map[string]any{"event_id": c.id, "site_id": "site-sim", "website_version": "v1",
		"source_sequence": 1, "title": Secret + " Willkommen " + c.id})
	canonical, _ := core.CanonicalizeJSON(changeJSON)
	raw, _ := json.Marshal(map[string]any{
		"change": json.RawMessage(canonical),
		"dispatch": map[string]any{"event_id": c.id, "payload_sha256": core.SHA256Hex(canonical), "status": "succeeded",
			"remote_plan_id": "plan-" + c.id, "remote_job_count": 1, "remote_status": c.remote,
			"response_sha256": core.SHA256Hex([]byte("response-" + c.id))},
	})
	return raw
}

// check runs the monitor's history checks after the world went quiet.
func (m *Monitor) check(ctx context.Context, now time.Time) {
	nowMS := core.Millis(now)
	terminal := map[string][]string{} // event id → states announced
	for _, e := range m.bus.Events {
		if e.DetailType != contract.DetailChangeTerminal {
			continue
		}
		var d struct {
			EventID string `json:"event_id"`
			State   string `json:"state"`
		}
		if err := json.Unmarshal(e.Detail, &d); err != nil {
			m.w.violate("terminal event %s does not decode", e.ID)
			continue
		}
		terminal[d.EventID] = append(terminal[d.EventID], d.State)
	}
	due, err := m.mem.Due(ctx, nowMS, 10_000)
	if err != nil {
		m.w.violate("due listing failed: %v", err)
	}
	for _, c := range m.changes {
		rec, err := m.mem.Get(ctx, c.id)
		if c.forged {
			if err == nil {
				m.w.violate("change %s was registered from a forged dispatch", c.id)
			} else if !holds(m.quarantined.msgs, c.id) {
				m.w.violate("forged dispatch %s was dropped without quarantine", c.id)
			}
			continue
		}
		if err != nil {
			if holds(m.queue.DLQ, c.id) || holds(m.quarantined.msgs, c.id) {
				continue // the dispatch dead-lettered or was quarantined: an alarm shows it
			}
			m.w.violate("change %s was dispatched but never registered (not in the DLQ or the quarantine either)", c.id)
			continue
		}
		if c.tampered && c.tamper == "schema" {
			// Another layout version: nobody may lease or poll it; it must
			// leave due discovery and wait for an operator.
			m.needOperator = append(m.needOperator, c.id)
			if contains(due, c.id) {
				m.w.violate("record %s of another schema version is due forever", c.id)
			}
			continue
		}
		if !rec.State.Final() {
			m.w.violate("change %s is %s after faults stopped (not terminal or failed)", c.id, rec.State)
			continue
		}
		if rec.State == monitor.StateFailed || lifecycle.IsRemoteFailure(rec.RemoteStatus) {
			m.needOperator = append(m.needOperator, c.id)
		}
		if !contains(terminal[c.id], string(rec.State)) {
			m.w.violate("change %s ended %s (%s) but localeflow.change.terminal was never published for it",
				c.id, rec.State, rec.LastErrorCode)
		}
		for _, st := range terminal[c.id] {
			// A terminal CMS answer is published before its finishing
			// write; only a lease that ran out between the two (and was
			// reclaimed), or a record changed behind the monitor's back
			// between them, can leave the change ending another way
			// (docs/design.md "Terminal outcomes: publish before the
			// finishing write").
			if st != string(rec.State) && !m.store.reclaimed[c.id] && !c.tampered {
				m.w.violate("change %s ended %s but localeflow.change.terminal said %s (no lease of it expired, not tampered with)", c.id, rec.State, st)
			}
		}
		if strings.Contains(string(rec.Lifecycle), Secret) {
			m.w.violate("monitor record %s holds change text", c.id)
		}
	}
}

// holds reports whether a message body names id.
func holds(msgs []*message, id string) bool {
	for _, msg := range msgs {
		if strings.Contains(msg.body, `"`+id+`"`) || strings.Contains(msg.body, `\"`+id+`\"`) {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
