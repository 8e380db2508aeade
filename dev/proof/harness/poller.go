package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/localeflow/localeflow/adapters/cms"
	"github.com/localeflow/localeflow/adapters/cms/cmstest"
	"github.com/localeflow/localeflow/adapters/delayqueue"
	"github.com/localeflow/localeflow/adapters/eventbus"
	"github.com/localeflow/localeflow/adapters/monitordb"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	pollerconfig "github.com/localeflow/localeflow/functions/poller/config"
	"github.com/localeflow/localeflow/functions/poller/handler"
	"github.com/localeflow/localeflow/internal/lambdalog"
	"github.com/localeflow/localeflow/signing"
	"github.com/localeflow/localeflow/topology"
)

// CMSKey is the HMAC key the test CMS and the pollers share.
var CMSKey = []byte("proof-cms-lifecycle-key-0123456789abcdef")

// EventKey signs the dispatched events the pollers verify.
var EventKey = []byte("proof-event-key-0123456789abcdef")

// FastMonitor is a monitor configuration for real-time runs: polls every
// PollInterval, retries after 100 ms·2^(n-1) (≤ 1 s), 5 s leases (a CMS
// client timeout of CMSTimeout fits), up to MaxFailures consecutive
// failures, owed outcomes re-published by a sweep after 1 s, due changes
// left to their message for 1 s before a sweep takes them (SweepGrace).
func FastMonitor(worker string, pollInterval time.Duration, maxFailures int) monitor.Config {
	return monitor.Config{WorkerID: worker, PollInterval: pollInterval, BaseDelay: 100 * time.Millisecond,
		MaxDelay: time.Second, Lease: 5 * time.Second, MaxConsecutiveFailures: maxFailures, OutboxGrace: time.Second,
		SweepGrace: time.Second}
}

// CMSTimeout is the lifecycle client's timeout in FastMonitor runs.
const CMSTimeout = 2 * time.Second

// PollerConfig is the poller configuration the proofs run (the soak, the
// fault suite, the cost benchmarks) with monitor timing mc: the stack's
// (functions/poller/config.Load of pollerconfig.DefaultStack's
// environment) at the run's time scale. TestPollerConfigIsTheStacks fails
// when anything but the time scale, the load and the resources differs
// from the stack's (pollerconfig.Config.RunScale).
func PollerConfig(mc monitor.Config) pollerconfig.Config {
	return pollerconfig.Config{Monitor: mc, CMSTimeout: CMSTimeout, Retention: pollerconfig.DefaultStack().Retention, RefuseV1: true}
}

// Lifecycle is the test CMS shared by every poller of a test.
type Lifecycle struct {
	*cmstest.CMS
	URL string
}

// NewLifecycle starts the signed test CMS on 127.0.0.1 (closed when t ends).
func NewLifecycle(t testing.TB) *Lifecycle {
	t.Helper()
	c := cmstest.New(CMSKey)
	srv := c.Start()
	t.Cleanup(srv.Close)
	return &Lifecycle{CMS: c, URL: srv.URL}
}

// Poller is one poller function instance wired to the stack.
type Poller struct {
	Service *monitor.Service
	Store   *monitordb.Store
	Reader  *cms.Client
	Handler *handler.Handler
	ESM     *ESM
	// Latency records the duration of every poll the handler made
	// (claim, signed CMS request, verified answer, conditional write).
	Latency *Latency
}

// Latency collects durations; safe for concurrent use.
type Latency struct {
	mu sync.Mutex
	d  []time.Duration
}

// Add records one duration.
func (l *Latency) Add(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.d = append(l.d, d)
}

// Values returns a copy of the durations recorded.
func (l *Latency) Values() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Duration(nil), l.d...)
}

// timedMonitor is the monitor service with PollOnce timed (polls that held
// a lease only).
type timedMonitor struct {
	*monitor.Service
	latency *Latency
}

func (m timedMonitor) PollOnce(ctx context.Context, eventID string, r monitor.LifecycleReader) (monitor.Outcome, error) {
	start := time.Now()
	out, err := m.Service.PollOnce(ctx, eventID, r)
	if err == nil && out.Polled {
		m.latency.Add(time.Since(start))
	}
	return out, err
}

// NewPoller wires a poller (monitor service on the metered DynamoDB client,
// signed CMS client, delay queue, bus) and its event source mapping.
func (s *Stack) NewPoller(t testing.TB, life *Lifecycle, clock core.Clock, cfg monitor.Config, log io.Writer) *Poller {
	t.Helper()
	return s.newPoller(t, Clients{DB: s.DB, SQS: s.SQS, EB: s.EB}, life, clock, cfg, log)
}

func (s *Stack) newPoller(t testing.TB, c Clients, life *Lifecycle, clock core.Clock, cfg monitor.Config, log io.Writer) *Poller {
	t.Helper()
	pc := PollerConfig(cfg)
	base, err := monitordb.New(c.DB, s.Resources.MonitorTable)
	if err != nil {
		t.Fatal(err)
	}
	store := base.WithRetention(pc.Retention)
	var logger *slog.Logger
	if log != nil {
		logger = lambdalog.New(log, slog.LevelInfo)
	}
	svc, err := monitor.NewService(store, clock, logger, pc.Monitor)
	if err != nil {
		t.Fatal(err)
	}
	reader, err := cms.New(cms.Config{BaseURL: life.URL, Key: CMSKey, Timeout: pc.CMSTimeout, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	latency := &Latency{}
	h, err := handler.New(handler.Config{
		Monitor: timedMonitor{svc, latency}, Reader: reader, Clock: clock, Log: logger,
		Queue:     delayqueue.New(c.SQS, s.Resources.PollQueue.URL),
		Bus:       eventbus.New(c.EB, s.Resources.BusName),
		EventKeys: [][]byte{EventKey}, EventMaxAge: pc.EventMaxAge, RefuseV1Events: pc.RefuseV1,
		Concurrency: pc.Concurrency, Margin: pc.Margin,
	})
	if err != nil {
		t.Fatal(err)
	}
	p := &Poller{Service: svc, Store: store, Reader: reader, Handler: h, Latency: latency}
	p.ESM = &ESM{SQS: c.SQS, QueueURL: s.Resources.PollQueue.URL, Handle: h.Handle,
		Timeout: topology.PollerTimeoutSeconds * time.Second,
		Sweep: func(ctx context.Context) error {
			_, err := h.Sweep(ctx)
			return err
		}}
	return p
}

// ChangeText is the text each test change carries (hashed into its
// change_sha256, never stored by the monitor).
func ChangeText(eventID string) string { return "PROOF-SECRET-TEXT Willkommen im Shop " + eventID }

// DispatchedDetail is the localeflow.change.dispatched detail of a change
// with jobs jobs; its change carries ChangeText.
func DispatchedDetail(eventID string, jobs int) ([]byte, error) {
	change := map[string]any{"event_id": eventID, "site_id": "site-proof", "website_version": "v1",
		"source_sequence": 1, "title": ChangeText(eventID)}
	raw, err := json.Marshal(change)
	if err != nil {
		return nil, err
	}
	canonical, err := core.CanonicalizeJSON(raw)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{
		"change": json.RawMessage(canonical),
		"dispatch": map[string]any{"event_id": eventID, "payload_sha256": core.SHA256Hex(canonical), "status": "succeeded",
			"remote_plan_id": "plan-" + eventID, "remote_job_count": jobs, "remote_status": "enqueued",
			"response_sha256": core.SHA256Hex([]byte("response-" + eventID))},
	})
}

// PutChange tells the CMS about a change and scripts its answers.
func (l *Lifecycle) PutChange(eventID string, steps ...cmstest.Step) {
	l.Put(cmstest.Change{EventID: eventID, SiteID: "site-proof", PlanID: "plan-" + eventID, WebsiteVersion: "v1",
		SourceSequence: 1, RequiredLocales: []string{"de-DE"}})
	l.Script(eventID, steps...)
}

// Dispatch publishes the change's dispatched event on the bus (the rule
// routes it to the poll queue).
func (s *Stack) Dispatch(ctx context.Context, eventID string) error {
	detail, err := DispatchedDetail(eventID, 1)
	if err != nil {
		return err
	}
	// Signed v2 as a producer signs, now: the pollers refuse v1 as
	// deployed (PollerConfig), and their accelerated clocks only make it
	// look older, well within the 30-day window.
	signed, err := signing.EventDetailV2(EventKey, contract.DetailChangeDispatched, time.Now(), detail)
	if err != nil {
		return err
	}
	return eventbus.New(s.EB, s.Resources.BusName).Publish(ctx, contract.DetailChangeDispatched, json.RawMessage(signed))
}

// Register registers a change directly with the service (no bus).
func (p *Poller) Register(ctx context.Context, eventID string) error {
	detail, err := DispatchedDetail(eventID, 1)
	if err != nil {
		return err
	}
	d, err := monitor.ParseDispatched(detail)
	if err != nil {
		return err
	}
	if _, err := p.Service.Register(ctx, d); err != nil {
		return fmt.Errorf("register %s: %w", eventID, err)
	}
	return nil
}

// AllFinal reports whether every id is terminal or failed. It reads with
// the stack's unmetered client, so the test's own checks are not counted.
func (s *Stack) AllFinal(ctx context.Context, ids []string) bool {
	store, err := monitordb.New(s.Audit, s.Resources.MonitorTable)
	if err != nil {
		return false
	}
	for _, id := range ids {
		rec, err := store.Get(ctx, id)
		if err != nil || !rec.State.Final() {
			return false
		}
	}
	return true
}
