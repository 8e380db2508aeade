package harness

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/localeflow/localeflow/adapters/cmsdelivery"
	"github.com/localeflow/localeflow/adapters/cmsdelivery/cmsdeliverytest"
	"github.com/localeflow/localeflow/adapters/delayqueue"
	"github.com/localeflow/localeflow/adapters/eventbus"
	"github.com/localeflow/localeflow/adapters/evidence"
	"github.com/localeflow/localeflow/adapters/evidence/evidencetest"
	"github.com/localeflow/localeflow/adapters/releasedb"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
	coordinatorconfig "github.com/localeflow/localeflow/functions/coordinator/config"
	"github.com/localeflow/localeflow/functions/coordinator/handler"
	"github.com/localeflow/localeflow/internal/lambdalog"
	"github.com/localeflow/localeflow/topology"
)

// Keys shared by the coordinators and the test servers.
var (
	EvidenceKey = []byte("proof-evidence-hmac-key-0123456789")
	DeliveryKey = []byte("proof-cms-delivery-key-0123456789")
)

// ReleaseServers are the evidence provider and the CMS delivery endpoint,
// each behind a fault proxy; every coordinator of a test shares them.
type ReleaseServers struct {
	Fixture       releasetest.Fixture
	Responder     *releasetest.Responder
	Evidence      *evidencetest.Server
	EvidenceProxy *Proxy
	CMS           *cmsdeliverytest.Server
	CMSProxy      *Proxy
}

// NewReleaseServers starts both servers and their proxies; receipts are
// issued on clock.
func NewReleaseServers(t testing.TB, clock *Clock) *ReleaseServers {
	t.Helper()
	fx := releasetest.NewFixture()
	approval, publication := fx.Authorities()
	r := &ReleaseServers{Fixture: fx, Responder: &releasetest.Responder{Fixture: fx, Clock: clock}}
	r.Evidence = evidencetest.New(EvidenceKey, r.Responder)
	t.Cleanup(r.Evidence.Close)
	r.CMS = cmsdeliverytest.New(DeliveryKey, publication.PublicKey(), approval.PublicKey())
	t.Cleanup(r.CMS.Close)
	r.EvidenceProxy = NewProxy(t, r.Evidence.URL)
	r.CMSProxy = NewProxy(t, r.CMS.URL)
	return r
}

// ApprovalKey is the approval authority's public key (for
// invariant.Options.ApprovalKey).
func (r *ReleaseServers) ApprovalKey() ed25519.PublicKey {
	a, _ := r.Fixture.Authorities()
	return a.PublicKey()
}

// Delivered is the CMS's accepted deliveries by event id (for
// invariant.Options.Delivered).
func (r *ReleaseServers) Delivered() map[string][]string {
	_, _, _, bundles := r.CMS.Stats()
	out := map[string][]string{}
	for id, b := range bundles {
		out[b.EventID] = append(out[b.EventID], id)
	}
	return out
}

// instantQueue sends every step at once (no SQS delay) keeping its due
// time in the envelope: the handler re-sends early ones until the fast
// clock reaches them (the chaining path), so backoffs of minutes pass in
// seconds of a sped-up clock.
type instantQueue struct{ q *delayqueue.Queue }

func (i instantQueue) Send(ctx context.Context, kind, eventID string, at, _ time.Time) error {
	return i.q.Send(ctx, kind, eventID, at, at)
}

func (i instantQueue) Resend(ctx context.Context, e delayqueue.Envelope, _ time.Time) error {
	time.Sleep(20 * time.Millisecond) // do not spin the emulator hot
	return i.q.Resend(ctx, e, e.NotBefore())
}

// Coordinator is one coordinator function instance wired to the stack.
type Coordinator struct {
	Coordinator *release.Coordinator
	Handler     *handler.Handler
	ESM         *ESM
}

// NewCoordinator wires a coordinator (release store on the metered
// DynamoDB client, signed evidence and delivery clients through the
// proxies) and its event source mapping. Each option may change the
// coordinator's dependencies before it is built.
func (s *Stack) NewCoordinator(t testing.TB, srv *ReleaseServers, clock *Clock, worker string, log io.Writer, opts ...func(*release.Dependencies)) *Coordinator {
	t.Helper()
	ev, err := evidence.New(evidence.Config{BaseURL: srv.EvidenceProxy.URL, Key: EvidenceKey, Timeout: 2 * time.Second, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	cms, err := cmsdelivery.New(cmsdelivery.Config{BaseURL: srv.CMSProxy.URL, Key: DeliveryKey, Timeout: 2 * time.Second, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if log == nil {
		log = io.Discard
	}
	logger := lambdalog.New(log, slog.LevelInfo)
	approval, publication := srv.Fixture.Authorities()
	// What the function loads from the stack's environment
	// (TestCostBenchmarkRunsTheDeployedCoordinator).
	cfg, err := coordinatorconfig.DeployedRelease(worker, nil)
	if err != nil {
		t.Fatal(err)
	}
	deps := release.Dependencies{
		Store: releasedb.New(s.DB, s.Resources.ReleaseTable), EventKey: srv.Fixture.EventKey, Evidence: ev, CMS: cms,
		Verifiers: srv.Fixture.Verifiers(), Approval: approval, Publication: publication,
	}
	for _, o := range opts {
		o(&deps)
	}
	c, err := release.NewCoordinator(deps, clock, logger, cfg)
	if err != nil {
		t.Fatal(err)
	}
	h, err := handler.New(handler.Config{Coordinator: c, Queue: instantQueue{delayqueue.New(s.SQS, s.Resources.ReleaseQueue.URL)},
		Bus: eventbus.New(s.EB, s.Resources.BusName), Due: releasedb.New(s.DB, s.Resources.ReleaseTable), Clock: clock, Log: logger})
	if err != nil {
		t.Fatal(err)
	}
	out := &Coordinator{Coordinator: c, Handler: h}
	out.ESM = &ESM{SQS: s.SQS, QueueURL: s.Resources.ReleaseQueue.URL, Handle: h.Handle, Visibility: 3,
		Timeout: topology.CoordinatorTimeoutSeconds * time.Second,
		Sweep: func(ctx context.Context) error {
			_, err := h.Sweep(ctx)
			return err
		}}
	return out
}

// PublishRelease publishes the signed plan of plan and a succeeded job for
// each of its locales on the bus (the rule routes them to the release
// queue).
func (s *Stack) PublishRelease(ctx context.Context, fx releasetest.Fixture, plan releasetest.PlanSpec) error {
	bus := eventbus.New(s.EB, s.Resources.BusName)
	if err := bus.Publish(ctx, contract.DetailPlanAccepted, json.RawMessage(fx.Detail(plan.PlanPayload()))); err != nil {
		return err
	}
	for _, j := range plan.Jobs {
		payload := plan.ResultPayload(j.TargetLocale, releasetest.ResultOptions{})
		if err := bus.Publish(ctx, contract.DetailJobCompleted, json.RawMessage(fx.Detail(payload))); err != nil {
			return err
		}
	}
	return nil
}

// ReleaseTexts are the source and candidate texts of plan (what must
// never appear outside the source and result records).
func ReleaseTexts(plan releasetest.PlanSpec) []string {
	var out []string
	for _, j := range plan.Jobs {
		out = append(out, j.SourceText, "SECRET-TARGET translated for "+j.TargetLocale)
	}
	return out
}

// Delivered reports whether the event's delivery record succeeded (read
// with the unmetered client).
func (s *Stack) Delivered(ctx context.Context, eventID string) bool {
	snap, err := releasedb.New(s.Audit, s.Resources.ReleaseTable).Load(ctx, eventID)
	return err == nil && snap.Delivery != nil && snap.Delivery.Status == release.StateSucceeded
}

// Step runs one release step of the event as the coordinator function
// does (release.Coordinator.Step through releasetest.Drive: events
// published to a recorder, approvals settled, the run scheduled at once
// after an approval run too), for proofs that drive the coordinator
// themselves; an error of either run is returned.
func Step(ctx context.Context, c *release.Coordinator, eventID string) (release.Outcome, error) {
	return releasetest.Drive(ctx, c, release.StepRequest{Kind: contract.KindReleaseRun, EventID: eventID}, releasetest.Options{Strict: true})
}
