package release_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type bundle struct {
	fx    releasetest.Fixture
	store *releasetest.MemStore
	clock *clock
	resp  *releasetest.Responder
	cms   *releasetest.CMS
	c     *release.Coordinator
	logs  *bytes.Buffer
	ctx   context.Context
	// published records the events the step driver published.
	published *releasetest.Published
	// deps, log and cfg are what c was built with (reconfigure).
	deps release.Dependencies
	log  *slog.Logger
	cfg  release.Config
}

func setup(t *testing.T) *bundle {
	t.Helper()
	fx := releasetest.NewFixture()
	clk := &clock{now: t0}
	resp := &releasetest.Responder{Fixture: fx, Clock: clk}
	approval, publication := fx.Authorities()
	logs := &bytes.Buffer{}
	b := &bundle{
		fx: fx, store: releasetest.NewMemStore(), clock: clk, resp: resp, cms: &releasetest.CMS{},
		logs: logs, ctx: context.Background(), published: &releasetest.Published{},
	}
	b.deps = release.Dependencies{
		Store: b.store, EventKey: fx.EventKey, Evidence: releasetest.Provider{Responder: resp}, CMS: b.cms,
		Verifiers: fx.Verifiers(), Approval: approval, Publication: publication,
	}
	b.log = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b.cfg = release.DefaultConfig("rev-1", "worker-1")
	b.reconfigure(t, func(*release.Dependencies, *release.Config) {})
	return b
}

// reconfigure changes the coordinator's dependencies or configuration and
// builds it again (a coordinator keeps no state of its own: the records
// stay in the store; a guard must be set again).
func (b *bundle) reconfigure(t *testing.T, change func(*release.Dependencies, *release.Config)) {
	t.Helper()
	change(&b.deps, &b.cfg)
	c, err := release.NewCoordinator(b.deps, b.clock, b.log, b.cfg)
	if err != nil {
		t.Fatalf("NewCoordinator: %v", err)
	}
	b.c = c
}

func (b *bundle) ingestPlan(t *testing.T, p releasetest.PlanSpec) {
	t.Helper()
	if _, _, err := b.c.Ingest(b.ctx, contract.DetailPlanAccepted, b.fx.Detail(p.PlanPayload())); err != nil {
		t.Fatalf("ingest plan: %v", err)
	}
}

func (b *bundle) ingestResult(t *testing.T, p releasetest.PlanSpec, locale string, o releasetest.ResultOptions) {
	t.Helper()
	if _, _, err := b.c.Ingest(b.ctx, contract.DetailJobCompleted, b.fx.Detail(p.ResultPayload(locale, o))); err != nil {
		t.Fatalf("ingest result %s: %v", locale, err)
	}
}

// run runs the event's release as the coordinator function does
// (release.Coordinator.Step through releasetest.Drive: its events
// published into b.published, its approvals settled, the run it schedules
// at once after an approval run too); an error of either run fails the
// test.
func (b *bundle) run(t *testing.T, eventID string) release.Outcome {
	t.Helper()
	o, err := releasetest.Drive(b.ctx, b.c, release.StepRequest{EventID: eventID}, releasetest.Options{Ports: b.ports(), Strict: true})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return o
}

// ports are the step driver's ports: events recorded in b.published.
func (b *bundle) ports() release.Ports {
	return release.Ports{Publisher: b.published, Log: b.log}
}

// settle settles what the outcome o says to settle (releasetest.Settle),
// for tests that look at the state between a step's run and its settle.
func (b *bundle) settle(t *testing.T, o release.Outcome) {
	t.Helper()
	if err := releasetest.Settle(b.ctx, b.c, o); err != nil {
		t.Fatalf("settle: %v", err)
	}
}

func (b *bundle) runErr(t *testing.T, eventID, code string) {
	t.Helper()
	_ = b.runFail(t, eventID, code)
}

// runFail runs a step that must fail with code (through the step
// driver, as run: its error, rescheduled or not) and returns the error.
func (b *bundle) runFail(t *testing.T, eventID, code string) error {
	t.Helper()
	o, err := releasetest.Drive(b.ctx, b.c, release.StepRequest{EventID: eventID}, releasetest.Options{Ports: b.ports()})
	if !core.HasCode(err, code) {
		t.Fatalf("run = %+v, %v; want code %s", o, err, code)
	}
	return err
}

func (b *bundle) snap(t *testing.T, eventID string) release.Snapshot {
	t.Helper()
	s, err := b.store.Load(b.ctx, eventID)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// onlyEvidence returns the single evidence record of the event.
func (b *bundle) onlyEvidence(t *testing.T, eventID string) *release.EvidenceRecord {
	t.Helper()
	s := b.snap(t, eventID)
	if len(s.Evidence) != 1 {
		t.Fatalf("%d evidence records, want 1", len(s.Evidence))
	}
	for _, r := range s.Evidence {
		return r
	}
	return nil
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if !core.HasCode(err, code) {
		t.Fatalf("err = %v, want code %s", err, code)
	}
}
