package sim

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/adapters/cmsdelivery"
	"github.com/localeflow/localeflow/adapters/cmsdelivery/cmsdeliverytest"
	"github.com/localeflow/localeflow/adapters/delayqueue"
	"github.com/localeflow/localeflow/adapters/eventbus"
	"github.com/localeflow/localeflow/adapters/evidence"
	"github.com/localeflow/localeflow/adapters/evidence/evidencetest"
	"github.com/localeflow/localeflow/adapters/quarantine"
	"github.com/localeflow/localeflow/adapters/releasedb"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/dev/logcapture"
	coordinatorconfig "github.com/localeflow/localeflow/functions/coordinator/config"
	"github.com/localeflow/localeflow/functions/coordinator/handler"
	"github.com/localeflow/localeflow/topology"
)

var (
	evidenceKey = []byte("sim-evidence-hmac-key-0123456789")
	deliveryKey = []byte("sim-delivery-hmac-key-0123456789")
)

// Peers are the release's HTTP peers. Their test servers listen on a real
// socket, so they are made outside the bubble; the world only calls their
// handlers in memory.
type Peers struct {
	Fixture   releasetest.Fixture
	Responder *releasetest.Responder
	Evidence  *evidencetest.Server
	Delivery  *cmsdeliverytest.Server
}

// NewPeers starts the evidence provider and the CMS delivery endpoint.
func NewPeers() *Peers {
	fx := releasetest.NewFixture()
	approval, publication := fx.Authorities()
	r := &releasetest.Responder{Fixture: fx}
	return &Peers{
		Fixture: fx, Responder: r,
		Evidence: evidencetest.New(evidenceKey, r),
		Delivery: cmsdeliverytest.New(deliveryKey, publication.PublicKey(), approval.PublicKey()),
	}
}

// Close stops both servers.
func (p *Peers) Close() {
	p.Evidence.Close()
	p.Delivery.Close()
}

var (
	_ release.Store     = (*releaseStore)(nil)
	_ release.DueFinder = (*releaseStore)(nil)
)

// releaseStore gates the real memory release store.
type releaseStore struct {
	w   *World
	mem releaseBacking
	// leases are the evidence and delivery leases stored (invariants.go);
	// freezeRng draws the freezes past them.
	leases    map[string]relLease
	freezeRng *rand.Rand
	// rel is the release side whose injected causes judge a blocked
	// record's code (blockedcode.go).
	rel *Release
	// announce counts the occasions of the announcement bound
	// (announce.go).
	announce *announceTracker
	// conflicted are the versioned writes a conflict refused, by
	// invocation, key and the version they expected (checkFreshRetry).
	conflicted map[conflictKey]int
	// eventKeys are the event keys any deployment of the seed held, by
	// key id (checkPlanSeal).
	eventKeys map[string][]byte
	// tamperRng draws the stored results the simulator alters
	// (maybeTamperResult); tampered holds the releases it altered one of.
	tamperRng *rand.Rand
	tampered  map[string]bool
	// written is when each record was first and last written (virtual
	// time of the accepted Puts), by event id and sort key
	// (checkRetention).
	written map[[2]string][2]time.Time
}

// conflictKey is one versioned write: who, which record, on which version.
type conflictKey struct {
	inv    int
	pk, sk string
	prev   int64
}

func releaseDown() error {
	return core.Wrap("release.store.unavailable", true, errInjected)
}

func (s *releaseStore) Load(ctx context.Context, id string) (snap release.Snapshot, err error) {
	err = s.w.do(ctx, KindStore, "release.Load "+id, releaseDown, func() (string, error) {
		var e error
		snap, e = s.mem.Load(ctx, id)
		return "", e
	})
	return snap, err
}

func (s *releaseStore) LoadState(ctx context.Context, id string) (snap release.Snapshot, err error) {
	err = s.w.do(ctx, KindStore, "release.LoadState "+id, releaseDown, func() (string, error) {
		var e error
		snap, e = s.mem.LoadState(ctx, id)
		return "", e
	})
	return snap, err
}

func (s *releaseStore) LoadKeys(ctx context.Context, id string, sortKeys ...string) (snap release.Snapshot, err error) {
	err = s.w.do(ctx, KindStore, "release.LoadKeys "+id+" "+strings.Join(sortKeys, " "), releaseDown, func() (string, error) {
		var e error
		snap, e = s.mem.LoadKeys(ctx, id, sortKeys...)
		return "", e
	})
	return snap, err
}

func (s *releaseStore) LoadPrefix(ctx context.Context, id, prefix string) (snap release.Snapshot, err error) {
	err = s.w.do(ctx, KindStore, "release.LoadPrefix "+id+" "+prefix, releaseDown, func() (string, error) {
		var e error
		snap, e = s.mem.LoadPrefix(ctx, id, prefix)
		return "", e
	})
	return snap, err
}

func (s *releaseStore) Put(ctx context.Context, rec release.Record, prev int64) (err error) {
	pk, sk := rec.Key()
	defer func() {
		if err != nil {
			s.noteFailedSettle(ctx, rec)
		}
	}()
	return s.w.do(ctx, KindStore, "release.Put "+pk+" "+sk, releaseDown, func() (string, error) {
		before, known := s.storedVersion(rec)
		s.checkFreshRetry(ctx, pk, sk, prev)
		s.checkPlanSeal(rec)
		err := s.mem.Put(ctx, rec, prev)
		if errors.Is(err, release.ErrConflict) {
			s.noteConflict(ctx, pk, sk, prev)
		}
		if err != nil {
			return "refused " + core.CodeOf(err), err
		}
		s.noteOwed(ctx, rec)
		if s.written == nil {
			s.written = map[[2]string][2]time.Time{}
		}
		if w, ok := s.written[[2]string{pk, sk}]; ok {
			s.written[[2]string{pk, sk}] = [2]time.Time{w[0], time.Now()}
		} else {
			s.written[[2]string{pk, sk}] = [2]time.Time{time.Now(), time.Now()}
		}
		s.checkVersion(rec, prev, before, known)
		s.checkReleaseLease(ctx, rec)
		s.checkRetryAfter(ctx, rec)
		s.maybeTamperResult(ctx, rec, prev)
		return "v" + strconv.FormatInt(rec.RecordVersion(), 10) + " " + recordStatus(rec), nil
	})
}

func recordStatus(rec release.Record) string {
	switch r := rec.(type) {
	case *release.EvidenceRecord:
		return string(r.Status) + " " + r.LastErrorCode
	case *release.DeliveryRecord:
		return string(r.Status) + " " + r.LastErrorCode
	case *release.JobRecord:
		return r.Status
	}
	return ""
}

func (s *releaseStore) PutAll(ctx context.Context, writes ...release.Write) error {
	keys := make([]string, 0, len(writes))
	for _, w := range writes {
		pk, sk := w.Rec.Key()
		keys = append(keys, pk+" "+sk)
	}
	// The writes of one PutAll are atomic; callers may build them from a
	// map, so the label lists them sorted (a seed replays its trace).
	sort.Strings(keys)
	return s.w.do(ctx, KindStore, "release.PutAll "+strings.Join(keys, " + "), releaseDown, func() (string, error) {
		before := make([]int64, len(writes))
		known := make([]bool, len(writes))
		for i, w := range writes {
			before[i], known[i] = s.storedVersion(w.Rec)
		}
		if err := s.mem.PutAll(ctx, writes...); err != nil {
			return "refused " + core.CodeOf(err), err
		}
		for i, w := range writes {
			s.noteOwed(ctx, w.Rec)
			s.checkVersion(w.Rec, w.Prev, before[i], known[i])
			s.checkReleaseLease(ctx, w.Rec)
			s.checkRetryAfter(ctx, w.Rec)
			s.checkBlockedCode(w.Rec)
			s.checkBlockedCause(w.Rec)
		}
		return "written", nil
	})
}

func (s *releaseStore) Due(ctx context.Context, toMS int64, cursor string, limit int) (page release.DuePage, err error) {
	err = s.w.do(ctx, KindStore, "release.Due", releaseDown, func() (string, error) {
		var e error
		page, e = s.mem.Due(ctx, toMS, cursor, limit)
		ids := make([]string, 0, len(page.Items))
		for _, it := range page.Items {
			ids = append(ids, it.EventID)
		}
		return strings.Join(ids, ","), e
	})
	return page, err
}

// peerTransport calls an HTTP peer's handler in memory, as one gated call.
type peerTransport struct {
	w       *World
	name    string
	handler http.Handler
	// store freezes a call past its lease (invariants.go).
	store *releaseStore
}

func (t peerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var resp *http.Response
	label := req.URL.Path
	if i := strings.Index(label, "/changes/"); i >= 0 {
		label = label[i+len("/changes/"):]
	}
	if t.store != nil {
		t.store.freezePastLease(invocationOf(req.Context()), t.name)
	}
	err := t.w.do(req.Context(), KindHTTP, "http "+t.name+" "+label, func() error { return fmt.Errorf("dial %s: %w", t.name, errInjected) },
		func() (string, error) {
			rec := httptest.NewRecorder()
			t.handler.ServeHTTP(rec, req)
			resp = rec.Result()
			return strconv.Itoa(resp.StatusCode), nil
		})
	if err != nil {
		return nil, err
	}
	if inv := invocationOf(req.Context()); inv != nil {
		var ra time.Duration
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
			if t.w.rng.IntN(4) != 0 {
				// The peer asks for a pause, often longer than the
				// backoff (5 s, 10 s, ...), which must then wait for it.
				// (Drawn here, after the scheduled call.)
				s := 1 + t.w.rng.IntN(120)
				resp.Header.Set("Retry-After", strconv.Itoa(s))
				ra = retryAfterOf(t.w.fx.hugeRetryAfter(resp.Header, strconv.Itoa(s)))
			}
		}
		// The answer reached the client: the invocation's next write of
		// this peer's record must follow its Retry-After.
		if t.w.peerReads == nil {
			t.w.peerReads = map[peerRead]time.Duration{}
		}
		t.w.peerReads[peerRead{inv.ID, t.name}] = ra
	}
	return resp, nil
}

// peerRead names the last answer of a release peer (evidence, delivery)
// to one invocation.
type peerRead struct {
	inv  int
	peer string
}

// checkRetryAfter checks a write of an evidence or delivery record against
// the last answer its peer gave the writing invocation: a retry_wait after
// a Retry-After is never due before it (docs/design.md "Evidence and
// delivery leases": the next attempt waits max(backoff, Retry-After),
// Retry-After capped at release.MaxRetryAfter). The answer is consumed by
// the invocation's first write of that peer's record (the finishing write
// of the attempt that called the peer); when that write is a lease expiry
// (last error lease_expired) the attempt's finish never happened and
// nothing is judged.
func (s *releaseStore) checkRetryAfter(ctx context.Context, rec release.Record) {
	inv := invocationOf(ctx)
	if inv == nil {
		return
	}
	var peer string
	var l release.Lease
	switch r := rec.(type) {
	case *release.EvidenceRecord:
		peer, l = "evidence", r.Lease
	case *release.DeliveryRecord:
		peer, l = "delivery", r.Lease
	default:
		return
	}
	key := peerRead{inv.ID, peer}
	ra, ok := s.w.peerReads[key]
	if !ok {
		return
	}
	delete(s.w.peerReads, key)
	if l.LastErrorCode == "lease_expired" {
		// An expiry write (release.Lease.expired: retry_wait, due now),
		// not the finish of the attempt that called the peer: that
		// attempt came back after its lease ended and its finish was
		// refused (lease_expired / lease_lost), so its answer is recorded
		// nowhere and the expiry owes it nothing (sim seed 517 with the
		// lease freeze). The answer is consumed all the same.
		return
	}
	ra = min(ra, release.MaxRetryAfter)
	if l.Status == release.StateRetryWait && ra > 0 && l.NextAttemptMS-l.UpdatedMS < ra.Milliseconds() {
		pk, sk := rec.Key()
		s.w.violate("%s %s: retry due %d ms after the failed attempt, before the %s peer's Retry-After %s", pk, sk, l.NextAttemptMS-l.UpdatedMS, peer, ra)
	}
}

// releaseJob is one job's scripted results: the payloads published for it
// (a second, different result models a provider that answered twice).
type releaseJob struct {
	locale   string
	payloads [][]byte
	text     map[string]string // payload sha256 → candidate text
	failed   bool
	human    bool // the result requires a human review (legal content)
	labels   []string
}

type releaseSpec struct {
	plan releasetest.PlanSpec
	jobs []*releaseJob
}

// twoResults reports whether the simulator published two different
// results for one of the release's jobs.
func (s *releaseSpec) twoResults() bool {
	for _, j := range s.jobs {
		if len(j.payloads) > 1 {
			return true
		}
	}
	return false
}

// Release is the coordinator's part of the world.
type Release struct {
	w           *World
	peers       *Peers
	mem         releaseBacking
	store       *releaseStore
	queue       *Queue
	bus         *Bus
	fn          *Function
	releases    []*releaseSpec
	quarantined *Queue
	// needOperator lists the releases blocked for good.
	needOperator []string
	// receipts the provider issued, by the SHA-256 of the receipt string.
	receipts map[string]issued
	// rogue: the provider signs human-review receipts with its quality key.
	rogue bool
	// evidenceHandler is the provider's handler, its receipts captured.
	evidenceHandler http.Handler
	log             *logcapture.Buffer
	// forged are the approvals the simulator stored for another result
	// (invariants.go), by approval id; forgeRng draws them.
	forged   map[string]bool
	forgeRng *rand.Rand
	// announce: the announcement bound's occasions (announce.go).
	announce *announceTracker
	// coordinators: the configuration of every coordinator built.
	coordinators []release.Config
}

// issued is what a receipt's signed payload says.
type issued struct{ kind, issuer string }

func newRelease(w *World, bus *Bus, log *logcapture.Buffer, peers *Peers, quarantined *Queue) (*Release, error) {
	top := topology.New("sim")
	r := &Release{w: w, peers: peers, mem: w.newReleaseBacking(), bus: bus, receipts: map[string]issued{}, quarantined: quarantined}
	r.announce = newAnnounceTracker()
	r.store = &releaseStore{w: w, mem: r.mem, announce: r.announce}
	r.store.rel = r
	def := top.RelQueue
	def.VisibilityTimeoutSeconds = 6 * int(w.Faults.Config.FunctionTimeout/time.Second)
	r.queue = newQueue(w, def, "coordinator")
	r.fn = &Function{w: w, name: "coordinator", timeout: w.Faults.Config.FunctionTimeout, queue: r.queue, observe: r.announce.noteBatch}
	bus.rules[contract.DetailPlanAccepted] = r.queue
	bus.rules[contract.DetailJobCompleted] = r.queue
	peers.Responder.FailFirst = w.rng.IntN(3)
	if w.rng.IntN(10) == 0 {
		// A misbehaving provider: its human-review receipts are signed by
		// the quality issuer, which no deployment trusts for that kind.
		r.rogue = true
		peers.Responder.Fixture.HumanIssuer, peers.Responder.Fixture.HumanIssuerKey = "", nil
	}
	r.evidenceHandler = r.captureReceipts(peers.Evidence.Config.Handler)
	peers.Responder.Clock = core.ClockFunc(time.Now)
	peers.Delivery.FailFirst(w.rng.IntN(3))
	r.log = log
	if err := r.deploy(defaultDeployment(w, peers.Fixture)); err != nil {
		return nil, err
	}
	return r, nil
}

// deploy (re)starts the coordinator's warm instances with the settings of
// d: the first deployment, and every cold start of a day-2 operation
// (day2.go). A deployment that fails leaves the function as it was (the
// old instances serve on, as on Lambda; Monitor.deploy).
func (r *Release) deploy(d deployment) error {
	w, log := r.w, r.log
	r.store.knowEventKeys(d.eventKeys)
	top := topology.New("sim")
	quarantined, peers := r.quarantined, r.peers
	evidenceHandler := r.evidenceHandler
	var instances []instance
	var coordinators []release.Config
	for i := range 2 {
		clock := w.newClock(fmt.Sprintf("coordinator-%d", i+1))
		logger := slog.New(slog.NewJSONHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
		ev, err := evidence.New(evidence.Config{BaseURL: "https://evidence.sim.invalid", Key: d.evidenceKeys[0], PreviousKeys: d.evidenceKeys[1:], Timeout: 30 * time.Second,
			Clock: clock, HTTPClient: &http.Client{Transport: peerTransport{w: w, name: "evidence", handler: evidenceHandler, store: r.store}}})
		if err != nil {
			return err
		}
		cms, err := cmsdelivery.New(cmsdelivery.Config{BaseURL: "https://cms.sim.invalid", Key: d.deliveryKeys[0], PreviousKeys: d.deliveryKeys[1:], Timeout: 30 * time.Second,
			Clock: clock, HTTPClient: &http.Client{Transport: peerTransport{w: w, name: "delivery", handler: peers.Delivery.Config.Handler, store: r.store}}})
		if err != nil {
			return err
		}
		approval, err := authorityOf(release.NewApprovalAuthority, d.approvalSeed, d.approvalPrev)
		if err != nil {
			return err
		}
		publication, err := authorityOf(release.NewPublicationAuthority, d.publicationSeed, d.publicationPrev)
		if err != nil {
			return err
		}
		events := release.EventSettings{PreviousKeys: d.eventKeys[1:]}
		if d.eventSecret != nil {
			events.KeySet = eventKeySet{env: append([][]byte(nil), d.eventKeys...), secret: d.eventSecret}
		}
		if d.eventSM != nil {
			// The deployed secret-backed set (day2keyreload.go).
			cache, err := secretKeyCache(d, clock, logger)
			if err != nil {
				return err
			}
			events.KeySet = cache
		}
		// What the function's loader makes of the stack's environment
		// with the seed's settings (TestSimRunsTheDeployedCoordinator).
		cfg, err := coordinatorconfig.DeployedRelease(fmt.Sprintf("coordinator-%d", i+1), d.coordinatorSettings())
		if err != nil {
			return err
		}
		coordinators = append(coordinators, cfg)
		c, err := release.NewCoordinator(release.Dependencies{
			Store: r.store, EventKey: d.eventKeys[0], Evidence: ev, CMS: cms,
			Verifiers: d.verifiers, Approval: approval, Publication: publication,
			Events: events,
		}, clock, logger, cfg)
		if err != nil {
			return err
		}
		hc := handler.Config{Coordinator: c, Queue: delayqueue.New(r.queue, "https://sqs.sim.invalid/release"),
			Bus: eventbus.New(r.bus, "sim-bus"), Due: r.store, Clock: clock, Log: logger, Margin: 2 * time.Second,
			Rejecter: &quarantine.Rejecter{SQS: quarantined, QueueURL: "https://sqs.sim.invalid/quarantine",
				Source: top.RelQueue.Logical, Function: "coordinator", Clock: clock}}
		if d.texts != nil {
			hc.Texts, hc.TextRetention = d.texts, d.textRetention
		}
		h, err := handler.New(hc)
		if err != nil {
			return err
		}
		instances = append(instances, instance{h.Handle, clock})
	}
	r.fn.instances = instances
	r.coordinators = append(r.coordinators, coordinators...)
	return nil
}

// script draws the releases of one seed and schedules their events.
func (r *Release) script(n int, window time.Duration) {
	rng := r.w.rng
	all := []string{"de-DE", "fr-FR", "ja-JP"}
	wide := wideRelease(r.w.Seed)
	for i := range n {
		locales := all[:1+rng.IntN(len(all))]
		if i == 0 && wide != nil {
			locales = wide
		}
		spec := &releaseSpec{plan: releasetest.NewPlan(fmt.Sprintf("rel-%d", i+1), locales...)}
		for j := range spec.plan.Jobs {
			spec.plan.Jobs[j].SourceText = Secret + " source " + spec.plan.Jobs[j].TargetLocale
		}
		t0 := r.w.start.Add(time.Duration(rng.Int64N(int64(window))))
		planPayload := spec.plan.PlanPayload()
		r.w.at(t0, "plan "+spec.plan.EventID, func() {
			r.bus.put(contract.DetailPlanAccepted, signedDetail(contract.DetailPlanAccepted, planPayload))
		})
		if i == 0 && wide != nil {
			r.restarts(r.w.Seed, t0)
		}
		for _, l := range locales {
			job := &releaseJob{locale: l, text: map[string]string{}}
			at := t0.Add(time.Duration(rng.Int64N(int64(2*time.Minute))) - 30*time.Second)
			if rng.IntN(12) == 0 {
				job.failed = true
				job.payloads = append(job.payloads, spec.plan.FailedPayload(l))
				job.labels = append(job.labels, " (failed)")
			} else {
				job.human = rng.IntN(6) == 0
				opts := releasetest.ResultOptions{HumanReviewRequired: job.human}
				variants := 1
				if rng.IntN(6) == 0 {
					variants = 2 // a second, different, validly signed result for the job
				}
				for v := range variants {
					opts.Candidate = fmt.Sprintf("%s translation %d for %s", Secret, v+1, l)
					p := spec.plan.ResultPayload(l, opts)
					job.payloads = append(job.payloads, p)
					job.text[core.SHA256Hex(p)] = opts.Candidate
					job.labels = append(job.labels, []string{"", " (second result)"}[v])
				}
			}
			for i, p := range job.payloads {
				r.w.at(at, "job "+spec.plan.EventID+" "+l+job.labels[i], func() {
					r.bus.put(contract.DetailJobCompleted, signedDetail(contract.DetailJobCompleted, p))
				})
			}
			if !job.failed {
				r.maybeForgeApproval(spec, l, at)
			}
			spec.jobs = append(spec.jobs, job)
		}
		r.releases = append(r.releases, spec)
	}
}

// check runs the release history checks.
func (r *Release) check(ctx context.Context) {
	approved, deliveries := r.outputEvents()
	_, _, _, bundles := r.peers.Delivery.Stats()
	stored := map[string]*release.ApprovalRecord{} // approval id → record
	for _, spec := range r.releases {
		id := spec.plan.EventID
		snap, err := r.mem.Load(ctx, id)
		if err != nil {
			r.w.violate("release %s does not load: %v", id, err)
			continue
		}
		for _, b := range bundles {
			if b.EventID == id {
				r.checkBundle(spec, snap, b)
			}
		}
		// A delivery stored as delivered was accepted by the CMS delivery
		// endpoint (an answer lost after the effect still leaves the
		// bundle there); a 503 is never taken as delivered.
		if d := snap.Delivery; d != nil && d.Status == release.StateSucceeded {
			accepted := false
			for _, b := range bundles {
				accepted = accepted || (b.EventID == id && b.DeliveryID == d.DeliveryID)
			}
			if !accepted {
				r.w.violate("release %s: delivery %s is stored delivered but the CMS never accepted its bundle", id, d.DeliveryID)
			}
		}
		for _, a := range snap.Approvals {
			stored[a.ApprovalID] = a
			if release.ApprovalOwed(a, snap.Evidence[a.RequestID]) {
				r.w.violate("release %s: approval of %s still owes its release.approved (evidence record %s) after faults stopped",
					id, a.TargetLocale, snap.Evidence[a.RequestID].Status)
			}
			if len(approved[a.ApprovalID]) == 0 && !r.forged[a.ApprovalID] {
				r.w.violate("release %s: approval of %s is stored but localeflow.release.approved was never published", id, a.TargetLocale)
			}
		}
		r.checkEnded(ctx, id, snap)
		r.checkDeliveryEvents(id, snap, deliveries[id])
		if d := snap.Delivery; d != nil && d.Status == release.StateSucceeded && !hasStatus(deliveries[id], d.DeliveryID, release.OutcomeDelivered) {
			r.w.violate("release %s: delivered but localeflow.delivery.delivered was never published", id)
		}
		// Validly signed inputs: never quarantined; in the DLQ only when
		// injected faults explain every receive.
		for _, msg := range quarantinedOf(r) {
			if holds([]*message{msg}, id) && !(msg.code == release.CodeJobConflict && spec.twoResults()) {
				// (A second, different result for a job the simulator
				// answered twice is refused as a conflict: explained.)
				r.w.violate("release %s: a validly signed input (%s) was quarantined (%s)", id, msgKind(msg), msg.code)
			}
		}
		r.checkConflictsRefused(spec)
		r.checkRetention(ctx, id, snap)
		explainedDLQ := false
		for _, msg := range r.queue.DLQ {
			if !holds([]*message{msg}, id) {
				continue
			}
			if !msg.explained() {
				r.w.violate("release %s: a validly signed input is in the DLQ after %d receives, %d of them with an injected fault",
					id, msg.receives, msg.faulted)
				continue
			}
			r.w.Stats.DLQExplained++
			explainedDLQ = true
		}
		if snap.Delivery != nil && snap.Delivery.Status == release.StateSucceeded {
			continue
		}
		if d := r.w.day2; d != nil && d.acked[id] {
			continue // ended: the operator acknowledged it (day2.go)
		}
		if r.blockedVisibly(spec, snap) {
			r.needOperator = append(r.needOperator, id)
			continue
		}
		if explainedDLQ {
			continue
		}
		r.w.violate("release %s is neither delivered nor blocked where health sees it", id)
	}
	// Every release.approved is exactly a stored approval, at most
	// MaxEventsPerOutcome times.
	for aid, evs := range approved {
		a := stored[aid]
		if a == nil {
			r.w.violate("localeflow.release.approved for approval %s, which is not stored", aid)
			continue
		}
		want := contract.ReleaseApproved{Schema: contract.SchemaReleaseApproved, EventID: a.EventID, PlanID: a.PlanID, JobID: a.JobID, TargetLocale: a.TargetLocale, ApprovalID: a.ApprovalID}
		for _, e := range evs {
			if !equalJSON(e, want) {
				r.w.violate("release %s: localeflow.release.approved %s differs from the stored approval %s", a.EventID, jsonOf(e), jsonOf(want))
			}
		}
		r.w.Stats.MaxEvents = max(r.w.Stats.MaxEvents, len(evs))
		if len(evs) > MaxEventsPerOutcome {
			r.w.violate("release %s: approval of %s published %d times (bound %d)", a.EventID, a.TargetLocale, len(evs), MaxEventsPerOutcome)
		}
	}
	r.checkAnnouncements(approved)
	for id := range deliveries {
		if !r.known(id) {
			r.w.violate("delivery events published for %s, a release nobody planned", id)
		}
	}
}

// checkEnded: a release that has ended — delivered, ended by an
// operator's acknowledgement (day2.go), or blocked — leaves the wake
// index (no record of it wakes the sweep any more: an owed approval's
// evidence is settled by now, checked above) and everything it still
// stores expires with it: every record carries an expiry, except what
// needs an operator until acknowledged (the blocked record, a failed
// evidence, job or delivery record) and, when the deployment gives texts
// no retention, its texts (docs/design.md "Retention", "Blocked releases
// and the release sweep"; issue 39 findings 11, 12 and 14).
func (r *Release) checkEnded(ctx context.Context, id string, snap release.Snapshot) {
	how := ""
	switch {
	case snap.Delivery != nil && snap.Delivery.Status == release.StateSucceeded:
		how = "delivered"
	case snap.Blocked != nil:
		how = "blocked"
	case r.w.day2 != nil && r.w.day2.acked[id]:
		how = "acknowledged"
	default:
		return
	}
	texts := r.w.day2 != nil && r.w.day2.dep.texts != nil
	// The memory store reports each record's expiry; on the adapters
	// block only the wake index is judged.
	expiry, _ := r.mem.(interface {
		ExpiresAt(ctx context.Context, eventID, sk string) (int64, bool, error)
	})
	snap.Each(func(rec release.Record) {
		_, sk := rec.Key()
		_, wakes, _, attention := release.Wake(rec)
		if wakes {
			r.w.violate("release %s has ended (%s) and its record %s still wakes it", id, how, sk)
		}
		switch rec.(type) {
		case *release.SourceRecord, *release.ResultRecord:
			if !texts {
				return
			}
		}
		if expiry == nil {
			return
		}
		if _, expiring, err := expiry.ExpiresAt(ctx, id, sk); err == nil && !expiring && !attention {
			r.w.violate("release %s has ended (%s) and its record %s has no expiry", id, how, sk)
		}
	})
}

func (r *Release) known(id string) bool {
	for _, spec := range r.releases {
		if spec.plan.EventID == id {
			return true
		}
	}
	return false
}

// outputEvents decodes (strictly) every release.approved, by approval id,
// and every delivery.* event, by release; the detail-type must match the
// status it carries.
func (r *Release) outputEvents() (map[string][]contract.ReleaseApproved, map[string][]contract.Delivery) {
	approved := map[string][]contract.ReleaseApproved{}
	deliveries := map[string][]contract.Delivery{}
	for _, e := range r.bus.Events {
		dec := json.NewDecoder(strings.NewReader(string(e.Detail)))
		dec.DisallowUnknownFields()
		switch e.DetailType {
		case contract.DetailReleaseApproved:
			var d contract.ReleaseApproved
			if err := dec.Decode(&d); err != nil {
				r.w.violate("release.approved %s does not decode: %v", e.ID, err)
				continue
			}
			approved[d.ApprovalID] = append(approved[d.ApprovalID], d)
		case contract.DetailDeliveryReady, contract.DetailDeliveryDelivered:
			var d contract.Delivery
			if err := dec.Decode(&d); err != nil {
				r.w.violate("%s %s does not decode: %v", e.DetailType, e.ID, err)
				continue
			}
			want := map[string]string{contract.DetailDeliveryReady: release.OutcomeDeliveryReady, contract.DetailDeliveryDelivered: release.OutcomeDelivered}[e.DetailType]
			if d.Status != want {
				r.w.violate("release %s: %s carries status %q", d.EventID, e.DetailType, d.Status)
			}
			deliveries[d.EventID] = append(deliveries[d.EventID], d)
		}
	}
	return approved, deliveries
}

// checkDeliveryEvents: every delivery.* event of a release names its
// stored delivery (id and plan), delivered only once it succeeded, each
// status at most MaxEventsPerOutcome times.
func (r *Release) checkDeliveryEvents(id string, snap release.Snapshot, evs []contract.Delivery) {
	if len(evs) == 0 {
		return
	}
	d := snap.Delivery
	if d == nil {
		r.w.violate("release %s: delivery events published but no delivery is stored", id)
		return
	}
	count := map[string]int{}
	for _, e := range evs {
		want := contract.Delivery{Schema: contract.SchemaDelivery, EventID: d.EventID, PlanID: d.PlanID, DeliveryID: d.DeliveryID, Status: e.Status}
		if !equalJSON(e, want) {
			r.w.violate("release %s: delivery event %s differs from the stored delivery %s", id, jsonOf(e), jsonOf(want))
		}
		if e.Status == release.OutcomeDelivered && d.Status != release.StateSucceeded {
			r.w.violate("release %s: localeflow.delivery.delivered published, the delivery is %s", id, d.Status)
		}
		count[e.Status]++
	}
	for status, n := range count {
		r.w.Stats.MaxEvents = max(r.w.Stats.MaxEvents, n)
		if n > MaxEventsPerOutcome {
			r.w.violate("release %s: delivery status %s published %d times (bound %d)", id, status, n, MaxEventsPerOutcome)
		}
	}
}

func hasStatus(evs []contract.Delivery, deliveryID, status string) bool {
	for _, e := range evs {
		if e.DeliveryID == deliveryID && e.Status == status {
			return true
		}
	}
	return false
}

// captureReceipts records every receipt the provider answers with.
func (r *Release) captureReceipts(next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, req)
		var body struct {
			Quality     string `json:"quality_receipt"`
			Human       string `json:"human_review_receipt"`
			Independent *struct {
				Receipt string `json:"receipt"`
			} `json:"independent_model_review"`
		}
		if json.Unmarshal(rec.Body.Bytes(), &body) == nil {
			for _, rc := range []string{body.Quality, body.Human} {
				r.noteReceipt(rc)
			}
			if body.Independent != nil {
				r.noteReceipt(body.Independent.Receipt)
			}
		}
		for k, v := range rec.Header() {
			rw.Header()[k] = v
		}
		rw.WriteHeader(rec.Code)
		_, _ = rw.Write(rec.Body.Bytes())
	})
}

func (r *Release) noteReceipt(receipt string) {
	parts := strings.Split(receipt, ".")
	if len(parts) != 3 {
		return
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return
	}
	var p struct {
		Kind   string `json:"kind"`
		Issuer string `json:"issuer"`
	}
	if json.Unmarshal(raw, &p) == nil {
		r.receipts[core.SHA256Hex([]byte(receipt))] = issued{kind: p.Kind, issuer: p.Issuer}
	}
}

// checkApproval: a delivered locale's approval was made on receipts from
// the issuers trusted for their kind, with a human review where the result
// asked for one.
func (r *Release) checkApproval(id string, job *releaseJob, token string) {
	raw, err := r.openApproval(token)
	if err != nil {
		r.w.violate("release %s: delivered %s with an approval that does not open", id, job.locale)
		return
	}
	var p contract.ApprovalPayload
	if err := json.Unmarshal(raw, &p); err != nil {
		r.w.violate("release %s: approval payload of %s does not decode", id, job.locale)
		return
	}
	fx := r.peers.Fixture
	want := map[string]string{release.KindQuality: fx.Issuer, release.KindHumanReview: fx.HumanIssuer}
	for kind, sum := range map[string]string{release.KindQuality: p.QualityReceiptSHA256, release.KindHumanReview: p.HumanReviewReceiptSHA256} {
		if sum == "" {
			continue
		}
		got, ok := r.receipts[sum]
		switch {
		case !ok:
			r.w.violate("release %s: approval of %s names a %s receipt the provider never issued", id, job.locale, kind)
		case got.kind != kind || got.issuer != want[kind]:
			r.w.violate("release %s: approval of %s rests on a %s receipt issued by %q (kind %s)", id, job.locale, kind, got.issuer, got.kind)
		}
	}
	if job.human && p.HumanReviewReceiptSHA256 == "" {
		r.w.violate("release %s: %s needed a human review and was approved without one", id, job.locale)
	}
}

// checkBundle: everything delivered is the accepted result of its job,
// and every locale of the plan is approved.
func (r *Release) checkBundle(spec *releaseSpec, snap release.Snapshot, b contract.Bundle) {
	id := spec.plan.EventID
	if len(b.Locales) != len(spec.plan.Jobs) {
		r.w.violate("release %s: delivery has %d locales, the plan %d", id, len(b.Locales), len(spec.plan.Jobs))
	}
	for _, l := range b.Locales {
		job := snap.Jobs[l.JobID]
		var want string
		for _, j := range spec.jobs {
			if t, ok := j.text[jobPayload(job)]; ok && j.locale == l.TargetLocale {
				want = t
			}
		}
		if job == nil || want == "" || l.Text != want {
			r.w.violate("release %s: delivered %s is not the accepted job result", id, l.TargetLocale)
		}
		if snap.Approvals[l.JobID] == nil || snap.Approvals[l.JobID].ApprovalID != l.ApprovalID {
			r.w.violate("release %s: delivered %s without its stored approval", id, l.TargetLocale)
		}
		for _, j := range spec.jobs {
			if j.locale == l.TargetLocale {
				r.checkApproval(id, j, l.Approval)
			}
		}
		r.checkApprovedResult(id, snap, l)
	}
}

func jobPayload(j *release.JobRecord) string {
	if j == nil {
		return ""
	}
	return j.PayloadSHA256
}

// blockedVisibly: the release cannot finish and health's attention index
// shows why (a failed job, evidence or delivery record).
func (r *Release) blockedVisibly(spec *releaseSpec, snap release.Snapshot) bool {
	for _, j := range snap.Jobs {
		if j.Status == release.JobFailed {
			return true
		}
	}
	for _, e := range snap.Evidence {
		if _, ok := e.AttentionMS(); ok {
			return true
		}
	}
	if d := snap.Delivery; d != nil {
		if _, ok := d.AttentionMS(); ok {
			return true
		}
	}
	if b := snap.Blocked; b != nil {
		if _, _, _, attention := release.Wake(b); attention {
			return true
		}
	}
	return false
}

// peerRetryAfterWake is the latest wake of a release that, when the run
// would end, is not stranded but still honouring a peer's capped
// Retry-After: an evidence or delivery record waits in retry_wait until
// after now for the whole release.MaxRetryAfter (the peer asked for an
// hour or more; the scripted evidence and delivery failures are the
// peers', not the fault window's, so two capped answers in a row outlast
// the recovery: seed 5859), and a queued step of the release wakes it.
// Run lets such a release run on until then, so the end checks judge
// what it did, never excuse it.
func (r *Release) peerRetryAfterWake(ctx context.Context) (time.Time, bool) {
	nowMS := core.Millis(time.Now())
	var latest int64
	capped := func(l release.Lease) {
		if l.Status == release.StateRetryWait && l.NextAttemptMS > nowMS &&
			l.NextAttemptMS-l.UpdatedMS >= release.MaxRetryAfter.Milliseconds() {
			latest = max(latest, l.NextAttemptMS)
		}
	}
	for _, spec := range r.releases {
		id := spec.plan.EventID
		snap, err := r.mem.Load(ctx, id)
		if err != nil || !holds(r.queue.msgs, id) {
			continue
		}
		for _, e := range snap.Evidence {
			capped(e.Lease)
		}
		if snap.Delivery != nil {
			capped(snap.Delivery.Lease)
		}
	}
	return core.FromMillis(latest), latest != 0
}

func quarantinedOf(r *Release) []*message { return r.quarantined.msgs }

// checkConflictsRefused: classification. A job the simulator answered
// with two different, validly signed results has exactly one accepted;
// the other is refused as coordinator.job.conflict and reported (in the
// quarantine, where an operator sees it), never acknowledged as a
// harmless duplicate — unless every receive of it ended in an injected
// fault (the DLQ, explained). Catches a conflicting completion
// classified as a duplicate (dev/mutants rel-conflict-as-duplicate)
// and a second result that replaces or joins the first.
func (r *Release) checkConflictsRefused(spec *releaseSpec) {
	id := spec.plan.EventID
	for i, job := range spec.jobs {
		if len(job.payloads) < 2 || i >= len(spec.plan.Jobs) {
			continue
		}
		jobID := spec.plan.Jobs[i].JobID
		of := func(msg *message) bool { return holds([]*message{msg}, id) && holds([]*message{msg}, jobID) }
		refused := false
		for _, msg := range quarantinedOf(r) {
			refused = refused || (of(msg) && msg.code == release.CodeJobConflict)
		}
		for _, msg := range r.queue.DLQ {
			refused = refused || (of(msg) && msg.explained())
		}
		if !refused {
			r.w.violate("release %s: job %s was answered with two different results and neither was refused as %s",
				id, jobID, release.CodeJobConflict)
		}
	}
}

// noteConflict records a versioned write a conflict refused.
func (s *releaseStore) noteConflict(ctx context.Context, pk, sk string, prev int64) {
	// A create (prev 0) is every input's own first try (write-first
	// ingest: each message of a batch, a duplicate too, tries it once).
	if inv := invocationOf(ctx); inv != nil && prev > 0 {
		if s.conflicted == nil {
			s.conflicted = map[conflictKey]int{}
		}
		s.conflicted[conflictKey{inv.ID, pk, sk, prev}]++
	}
}

// checkFreshRetry: a step retried after a lost race works from a fresh
// read. Two best-effort writes of one step from one snapshot (a mark's
// clearing, then a park: adapters seed 8478 of the long run on 0be7496)
// may each meet the same conflict once; a third write on a version
// conflicts refused twice is a retry loop on a stale read. A versioned write that a conflict refused (another writer moved
// the record past the version it expected) is never tried again by the
// same invocation on that same version (a create aside: each input of a
// batch tries its own once): the record is no longer there,
// so the retry can only conflict again or, worse, decide from what it no
// longer is (catches dev/mutants rel-tally-retry-stale: a tally update
// retried from its stale snapshot).
func (s *releaseStore) checkFreshRetry(ctx context.Context, pk, sk string, prev int64) {
	if inv := invocationOf(ctx); inv != nil && s.conflicted[conflictKey{inv.ID, pk, sk, prev}] >= 2 {
		s.w.violate("%s %s: invocation #%d wrote on version %d again after conflicts refused that write twice (a retry from a stale read)",
			pk, sk, inv.ID, prev)
	}
}

// knowEventKeys adds keys to the event keys the plan seal check knows.
func (s *releaseStore) knowEventKeys(keys [][]byte) {
	if s.eventKeys == nil {
		s.eventKeys = map[string][]byte{}
	}
	for _, k := range keys {
		s.eventKeys[release.SealKeyID(k)] = k
	}
}

// simPlanSealContext and simSealed restate the plan seal of docs/design.md
// "Plan seal" (HMAC-SHA256 under the event key over the canonical JSON of
// the plan record's sealed fields, after a context line), independently
// of core/release's code, so the check below does not trust what it checks.
const simPlanSealContext = "localeflow.plan-seal.v1\n"

type simSealed struct {
	Event         release.Event     `json:"event"`
	PlanID        string            `json:"plan_id"`
	Jobs          []release.PlanJob `json:"jobs"`
	PayloadSHA256 string            `json:"payload_sha256"`
	ReceivedMS    int64             `json:"received_ms"`
}

// checkPlanSeal: a stored record field check. Every plan written carries
// a seal made under the key its seal_key names, one of the event keys a
// deployment held (catches a plan sealed or resealed under the wrong key
// of the set: dev/mutants rel-reseal-oldest-key; a seal_key naming one key
// and a seal made with another verifies today but breaks when the named
// key's partner leaves the set).
func (s *releaseStore) checkPlanSeal(rec release.Record) {
	p, ok := rec.(*release.PlanRecord)
	if !ok {
		return
	}
	if d := s.w.day2; d != nil {
		s.knowEventKeys(d.dep.eventKeys)
	}
	key, ok := s.eventKeys[p.SealKey]
	if !ok {
		s.w.violate("plan %s stored with seal_key %q, which names no event key of any deployment", p.Event.EventID, p.SealKey)
		return
	}
	raw, err := core.Canonical(simSealed{Event: p.Event, PlanID: p.PlanID, Jobs: p.Jobs, PayloadSHA256: p.PayloadSHA256, ReceivedMS: p.ReceivedMS})
	if err != nil {
		s.w.violate("plan %s: sealed fields do not encode: %v", p.Event.EventID, err)
		return
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(simPlanSealContext))
	mac.Write(raw)
	if got, err := hex.DecodeString(p.Seal); err != nil || !hmac.Equal(got, mac.Sum(nil)) {
		s.w.violate("plan %s stored with a seal not made under the key its seal_key (%s) names", p.Event.EventID, p.SealKey)
	}
}

// retentionTolerance bounds how much earlier than its accepted write a
// record's own timestamp (its retention's start) may be: the step's clock
// is read before the write, which a stall or a slow peer can delay.
const retentionTolerance = 10 * time.Minute

// checkRetention: exact retention of a delivered release (docs/design.md
// "Release records expire (retention)"). Once delivered, nothing of the
// release is due or needs attention, so every content-free record carries
// an expiry of the retention (release.DefaultRetention, the store's) after
// its last change, none missing, none earlier than its first write's,
// none later than its last write's — judged against the times the
// simulator saw its writes accepted, not the product's own rule (catches a
// record kind that never expires: dev/mutants rel-retention-tally-kept;
// and one that expires early). Texts (source, result) expire by their
// own, shorter retention once the release ended: checked when the seed
// runs the texts' TTL (day-2 kind texts), on the memory store.
func (r *Release) checkRetention(ctx context.Context, id string, snap release.Snapshot) {
	if d := snap.Delivery; d == nil || d.Status != release.StateSucceeded {
		return
	}
	texts := r.w.day2 != nil && r.w.day2.dep.texts != nil
	for _, rec := range snapRecords(snap) {
		pk, sk := rec.Key()
		at, ok, err := r.expiryOf(ctx, id, sk)
		if err != nil {
			r.w.violate("release %s %s: expiry does not read: %v", id, sk, err)
			continue
		}
		text := strings.HasPrefix(sk, release.SKSourcePrefix) || strings.HasPrefix(sk, release.SKResultPrefix)
		if text {
			if texts && !ok {
				r.w.violate("release %s: %s of a delivered release has no expiry (texts expire once the release ended)", id, sk)
			}
			continue
		}
		w, seen := r.store.written[[2]string{pk, sk}]
		if !seen {
			continue // written by the simulator itself (a forged approval)
		}
		if !ok {
			r.w.violate("release %s: %s of a delivered release has no expiry (every content-free record expires after the retention)", id, sk)
			continue
		}
		// Retention starts at the record's last change of substance
		// (its own timestamp: a plan's reseal or a job record's cleared
		// mark does not restart it): between its first and last write.
		lo, hi := w[0].Add(release.DefaultRetention), w[1].Add(release.DefaultRetention)
		tol := r.w.maxOffset - r.w.minOffset + time.Second
		if got := time.Unix(at, 0); got.After(hi.Add(tol)) || got.Before(lo.Add(-tol-retentionTolerance)) {
			r.w.violate("release %s: %s expires at %s, want its first..last write + %s = %s..%s", id, sk,
				got.UTC().Format(time.RFC3339), release.DefaultRetention, lo.UTC().Format(time.RFC3339), hi.UTC().Format(time.RFC3339))
		}
	}
}

// expiryOf reads a release record's expiry (epoch seconds) from the
// backing store: the memory store's, or the item's expires_at attribute
// in the adapters block's DynamoDB.
func (r *Release) expiryOf(ctx context.Context, eventID, sk string) (int64, bool, error) {
	switch mem := r.mem.(type) {
	case *releasetest.MemStore:
		return mem.ExpiresAt(ctx, eventID, sk)
	default:
		if r.w.ddb == nil {
			return 0, false, fmt.Errorf("no expiry reader for %T", r.mem)
		}
		item := r.w.ddb.db.Raw(r.w.ddb.topo.Release.Name, map[string]types.AttributeValue{
			topology.AttrPK: &types.AttributeValueMemberS{Value: releasedb.PK(eventID)},
			topology.AttrSK: &types.AttributeValueMemberS{Value: sk},
		})
		if item == nil {
			return 0, false, fmt.Errorf("no item")
		}
		n, ok := item[topology.AttrExpiresAt].(*types.AttributeValueMemberN)
		if !ok {
			return 0, false, nil
		}
		v, err := strconv.ParseInt(n.Value, 10, 64)
		return v, err == nil, err
	}
}

// snapRecords lists every record of a snapshot, by sort key.
func snapRecords(snap release.Snapshot) []release.Record {
	var out []release.Record
	snap.Each(func(rec release.Record) { out = append(out, rec) })
	sort.Slice(out, func(i, j int) bool {
		_, a := out[i].Key()
		_, b := out[j].Key()
		return a < b
	})
	return out
}

// tamperStream seeds the PRNG of the result tampering (its own stream:
// the rest of a seed's history does not depend on its draws).
const tamperStream = 0x7a3be5

// maybeTamperResult alters, for one stored job result in 40, the stored
// text right after its first write, as a storage fault or a console edit
// would: the candidate and its target_sha256 changed together, the
// result's hash (result_sha256, which the job record accepted) kept, so
// only the cross-check of the stored text against that hash can tell
// (docs/design.md "Ingest: plan and job events"). The release must never
// deliver the altered text (checkBundle) and blocks with result.invalid
// where health sees it (blockedCauses). Catches a removed hash
// cross-check (dev/mutants rel-result-hash-unchecked).
func (s *releaseStore) maybeTamperResult(ctx context.Context, rec release.Record, prev int64) {
	res, ok := rec.(*release.ResultRecord)
	if !ok || prev != 0 {
		return
	}
	if s.tamperRng == nil {
		s.tamperRng = rand.New(rand.NewPCG(s.w.Seed, s.w.Seed^tamperStream))
	}
	if s.tamperRng.IntN(40) != 0 {
		return
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(res.ResultJSON), &body); err != nil {
		return
	}
	text := Secret + " altered after it was stored"
	body["candidate"], body["target_sha256"] = text, core.SHA256Hex([]byte(text))
	raw, err := json.Marshal(body)
	if err != nil {
		return
	}
	altered := *res
	altered.ResultJSON, altered.Version = string(raw), res.Version+1
	if err := s.mem.Put(ctx, &altered, res.Version); err != nil {
		return
	}
	if s.tampered == nil {
		s.tampered = map[string]bool{}
	}
	s.tampered[res.EventID] = true
	s.w.record(invocationOf(ctx), "TAMPER", "result "+res.EventID+" "+res.JobID+" altered, its hash kept")
}
