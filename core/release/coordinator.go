package release

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/localeflow/localeflow/core"
)

// Outcome statuses of RunNextRelease and Deliver.
const (
	OutcomeWaiting       = "waiting"
	OutcomeApproved      = "approved"
	OutcomeDeliveryReady = "delivery_ready"
	OutcomeDelivered     = "delivered"
)

// Codes of the coordinator itself.
const (
	CodePlanMissing  = "coordinator.plan.missing"
	CodePlanConflict = "coordinator.plan.conflict"
	CodeJobConflict  = "coordinator.job.conflict"
	CodeConfig       = "coordinator.config.invalid"
	// CodeStoreReadFailed is a store read that failed (retryable).
	CodeStoreReadFailed = "coordinator.store.read_failed"
	// CodeJSONInvalid: a value the coordinator built does not encode.
	CodeJSONInvalid = "coordinator.json.invalid"
	// CodeQueuePlanMismatch: a job record names another plan.
	CodeQueuePlanMismatch = "queue.plan_mismatch"
	// CodeStoredResultInvalid: a stored result does not decode or does not
	// match its hash.
	CodeStoredResultInvalid = "result.invalid"
	CodeGuardFailed         = "evidence.operation_guard.failed"
	// CodeResultJobMismatch: the stored result is not the one the job
	// record accepted (its hash differs); the release is refused.
	CodeResultJobMismatch = "result.job_mismatch"
	OutcomeSchema         = "localeflow.release-coordinator.v1"
)

// Outcome is the content-free result of one step.
type Outcome struct {
	Schema       string `json:"schema"`
	Status       string `json:"status"`
	EventID      string `json:"event_id"`
	PlanID       string `json:"plan_id"`
	JobID        string `json:"job_id,omitempty"`
	TargetLocale string `json:"target_locale,omitempty"`
	ApprovalID   string `json:"approval_id,omitempty"`
	DeliveryID   string `json:"delivery_id,omitempty"`
	// WakeAt is when a waiting step can make progress (a lease expiry or a
	// backoff); zero when nothing is scheduled (waiting for an input).
	WakeAt time.Time `json:"-"`
	// Changed says this step wrote the approval, prepared the delivery or
	// completed it; the function emits events only for changes, so
	// duplicate deliveries emit nothing.
	Changed bool `json:"-"`
	// Tallied says nothing is owed to the release's tally from the
	// approval this step stored: the step added it, so settling its
	// published event (SettleApproval) need not read the tally.
	Tallied bool `json:"-"`
	// Quiet says an approving named step leaves the release's other
	// locales to their own inputs: no run is scheduled at once.
	Quiet bool `json:"-"`
	// Owed lists approvals of the release whose event is owed and whose
	// step is gone (their evidence lease ended): Step publishes
	// and settles each (SettleApproval).
	Owed []OwedApproval `json:"-"`
	// Held says the delivery was not prepared because an approval of the
	// release is owed: once Step has settled every Owed
	// approval it runs the release again.
	Held bool `json:"-"`
	// Completes says the named step's tally write completed the
	// release's tally: Step publishes and settles the step's
	// approval and then runs CompleteRelease.
	Completes bool `json:"-"`
	// Ended says the release has ended (delivered, or a failure an
	// operator acknowledged: "An ended release stays ended"): Step starts
	// the retention of texts a late input stored.
	Ended bool `json:"-"`
}

// Config holds the coordinator's policy.
type Config struct {
	EvidenceRevision    string
	WorkerID            string
	EvidenceLease       time.Duration
	EvidenceMaxAttempts int
	ApprovalTTL         time.Duration
	DeliveryMaxAttempts int
	// DeliveryLease bounds one delivery attempt; defaults to EvidenceLease.
	DeliveryLease time.Duration
}

// DefaultConfig returns the configuration for revision and workerID with
// the defaults of docs/design.md "Defaults": a 90 s evidence and delivery
// lease, 5 evidence and 5 delivery attempts, a 30-day approval TTL.
func DefaultConfig(revision, workerID string) Config {
	return Config{
		EvidenceRevision: revision, WorkerID: workerID,
		EvidenceLease: DefaultEvidenceLease, EvidenceMaxAttempts: DefaultEvidenceMaxAttempts,
		ApprovalTTL: DefaultApprovalTTL, DeliveryMaxAttempts: DefaultDeliveryMaxAttempts,
		DeliveryLease: DefaultEvidenceLease,
	}
}

// Dependencies are what a Coordinator is wired to.
type Dependencies struct {
	Store       Store
	EventKey    []byte
	Evidence    EvidenceProvider
	CMS         DeliveryClient
	Verifiers   Verifiers
	Approval    *Authority
	Publication *Authority
	// Events holds the optional settings of signed input events
	// (previous keys, age window, v1 refusal).
	Events EventSettings
}

// Coordinator runs the release steps of events. Build it with
// NewCoordinator.
type Coordinator struct {
	store       Store
	eventKey    []byte
	evidence    EvidenceProvider
	cms         DeliveryClient
	verifiers   Verifiers
	approval    *Authority
	publication *Authority
	events      EventSettings
	guard       Guard // optional
	clock       core.Clock
	logger      *slog.Logger
	cfg         Config
	// unmatched: seals met under none of the event keys (checkPlan).
	unmatched unmatchedSeals
}

// NewCoordinator returns a Coordinator wired to deps, with the clock and
// the logger injected and cfg validated (Validate). A nil logger discards
// logs.
func NewCoordinator(deps Dependencies, clock core.Clock, log *slog.Logger, cfg Config) (*Coordinator, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Coordinator{
		store: deps.Store, eventKey: deps.EventKey, evidence: deps.Evidence, cms: deps.CMS,
		verifiers: deps.Verifiers, approval: deps.Approval, publication: deps.Publication, events: deps.Events,
		clock: clock, logger: log, cfg: cfg,
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// SetGuard installs the operation guard: evidence and delivery work starts
// only when it allows the lease. Call it before the first step.
func (c *Coordinator) SetGuard(g Guard) { c.guard = g }

// Config is the validated configuration in use.
func (c *Coordinator) Config() Config { return c.cfg }

// Store is the release store the coordinator reads and writes.
func (c *Coordinator) Store() Store { return c.store }

// OpenApproval verifies a stored approval token with the approval key
// keyID names (every key of the set when empty: Authority.OpenKey) and
// returns its payload.
func (c *Coordinator) OpenApproval(keyID, token string) ([]byte, error) {
	return c.approval.OpenKey(keyID, token)
}

// Validate checks the wiring.
func (c *Coordinator) Validate() error {
	if c.store == nil || len(c.eventKey) == 0 || c.evidence == nil || c.cms == nil ||
		c.approval == nil || c.publication == nil || c.clock == nil ||
		c.verifiers.Quality == nil || c.verifiers.HumanReview == nil || c.verifiers.IndependentReview == nil {
		return core.Fail(CodeConfig)
	}
	cfg := c.cfg
	if !core.ValidToken(cfg.EvidenceRevision) {
		return core.Fail(CodeRevisionInvalid)
	}
	if !core.ValidTokenN(cfg.WorkerID, core.MaxWorkerIDLength) {
		return core.Fail(CodeWorkerIDInvalid)
	}
	if cfg.EvidenceLease <= 0 || cfg.EvidenceLease > MaxLease || cfg.DeliveryLease <= 0 || cfg.DeliveryLease > MaxLease {
		return core.Fail(CodeEvidenceLeaseInvalid)
	}
	if cfg.EvidenceMaxAttempts < 1 || cfg.EvidenceMaxAttempts > MaxAttempts {
		return core.Fail(CodeMaxAttemptsInvalid)
	}
	if cfg.DeliveryMaxAttempts < 1 || cfg.DeliveryMaxAttempts > MaxAttempts {
		return core.Fail(CodeDeliveryMaxAttempts)
	}
	if cfg.ApprovalTTL <= 0 {
		return core.Fail(CodeApprovalTTLInvalid)
	}
	return nil
}

// storeRead is the error of a failed store read: retryable
// (CodeStoreReadFailed), except a stored item the store refuses, which
// every later read meets again (final, its own code): one of an
// unsupported format (CodeSchemaUnsupported), an approval that is not a
// valid compact record (CodeStoredApprovalInvalid), an item of an unknown
// kind or with attributes its kind does not have (CodeRecordInvalid).
func storeRead(err error) error {
	for _, code := range storedItemCodes {
		if errors.Is(err, core.Fail(code)) {
			return core.Wrap(code, false, err)
		}
	}
	return core.Wrap(CodeStoreReadFailed, true, err)
}

// storedItemCodes are the codes of a stored item a read refuses
// (storeRead: final).
var storedItemCodes = []string{CodeSchemaUnsupported, CodeStoredApprovalInvalid, CodeRecordInvalid}

func (c *Coordinator) log() *slog.Logger {
	if c.logger != nil {
		return c.logger
	}
	return slog.Default()
}

func (c *Coordinator) evidenceState() EvidenceState { return EvidenceState{Store: c.store} }

func outcome(status string, plan *PlanRecord) Outcome {
	return Outcome{Schema: OutcomeSchema, Status: status, EventID: plan.Event.EventID, PlanID: plan.PlanID}
}

// load reads the event's records and its verified plan: the plan must
// exist, name the event, hold at least one job and carry a valid seal
// (docs/design.md "Plan seal").
//
// A release that has ended (ended) is reported as it ended before its
// seal is checked: nothing more is done for it, so a later input (a late
// duplicate, a redrive, a quarantine replay) neither re-checks records
// whose keys may have left the set since nor reads texts whose retention
// has run (docs/design.md "An ended release stays ended").
//
// full reads the texts too (Store.Load); otherwise only the release's
// state is read (Store.LoadState) and a step reads the texts it uses with
// withTexts or allTexts (docs/design.md "Release reads").
func (c *Coordinator) load(ctx context.Context, eventID string, full bool) (*Snapshot, *PlanRecord, *Outcome, error) {
	if !core.ValidToken(eventID) {
		return nil, nil, nil, core.Fail(CodeEventIDInvalid)
	}
	read := c.store.LoadState
	if full {
		read = c.store.Load
	}
	snap, err := read(ctx, eventID)
	if err != nil {
		return nil, nil, nil, storeRead(err)
	}
	if snap.Plan == nil {
		return nil, nil, nil, core.Fail(CodePlanMissing)
	}
	if snap.Plan.Event.EventID != eventID || len(snap.Plan.Jobs) == 0 {
		return nil, nil, nil, core.Fail(CodePlanInvalid)
	}
	if o, ok := c.ended(&snap, snap.Plan); ok {
		c.log().InfoContext(ctx, "release has ended, nothing to do", "event_id", eventID, "status", o.Status)
		// A late input may have left a wake entry (an awaiting_claim
		// mark, an evidence lease): it leaves the wake index.
		if err := c.park(ctx, &snap); err != nil {
			return nil, nil, nil, err
		}
		// Its owed approval events are still published (the evidence
		// lease of each wakes the release until it is settled).
		o.Owed, _, _ = c.held(&snap, snap.Plan, c.now(), "")
		o.Ended = true
		return &snap, snap.Plan, &o, nil
	}
	current, err := c.checkPlan(ctx, snap.Plan)
	if err != nil {
		return nil, nil, nil, err
	}
	if !current {
		// Sealed under a previous key: seal it under the current key (and
		// name it) so the previous key can leave the set.
		c.reseal(ctx, &snap)
	}
	return &snap, snap.Plan, nil, nil
}

// withTexts adds the source and result records of jobIDs to snap (one
// LoadKeys), unless snap holds them already.
func (c *Coordinator) withTexts(ctx context.Context, snap *Snapshot, jobIDs ...string) error {
	var keys []string
	for _, id := range jobIDs {
		if snap.Sources[id] == nil {
			keys = append(keys, SKSourcePrefix+id)
		}
		if snap.Results[id] == nil {
			keys = append(keys, SKResultPrefix+id)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	texts, err := c.store.LoadKeys(ctx, snap.Plan.Event.EventID, keys...)
	if err != nil {
		return storeRead(err)
	}
	maps.Copy(snap.Sources, texts.Sources)
	maps.Copy(snap.Results, texts.Results)
	return nil
}

// allResults adds every result record of the release to snap (one Query
// of the result# range): the delivery bundle holds every locale's result.
// Results do not change once their job succeeded (a succeeded job refuses
// another result), and every use checks a result against its job record
// and approval, so results read after the state are as good as results
// read with it.
func (c *Coordinator) allResults(ctx context.Context, snap *Snapshot) error {
	return c.addTexts(ctx, snap, SKResultPrefix)
}

// allTexts adds every result and source record of the release to snap:
// preparing the delivery checks every result against its source.
func (c *Coordinator) allTexts(ctx context.Context, snap *Snapshot) error {
	if err := c.addTexts(ctx, snap, SKResultPrefix); err != nil {
		return err
	}
	return c.addTexts(ctx, snap, SKSourcePrefix)
}

func (c *Coordinator) addTexts(ctx context.Context, snap *Snapshot, prefix string) error {
	missing := false
	for _, job := range snap.Plan.Jobs {
		if (prefix == SKResultPrefix && snap.Results[job.JobID] == nil) || (prefix == SKSourcePrefix && snap.Sources[job.JobID] == nil) {
			missing = true
		}
	}
	if !missing {
		return nil
	}
	texts, err := c.store.LoadPrefix(ctx, snap.Plan.Event.EventID, prefix)
	if err != nil {
		return storeRead(err)
	}
	for id, src := range texts.Sources {
		if snap.Sources[id] == nil {
			snap.Sources[id] = src
		}
	}
	for id, res := range texts.Results {
		if snap.Results[id] == nil {
			snap.Results[id] = res
		}
	}
	return nil
}

// ended reports the outcome of a release that has ended without being
// blocked: delivered (its delivery record succeeded, a valid record of
// this event and plan), or left by the operator: a failure every later
// run would meet again was acknowledged, which ended the release and
// started its texts' retention (docs/design.md "Retention"). The failures
// that count are a job of the plan that failed, a prepared delivery that
// failed (a valid record of this event and plan), and a current-revision
// evidence request that failed for the result its job record accepted
// while that job has no current approval (what stuckEvidence blocks on).
// The first is reported delivered, the others waiting with no wake. A
// blocked release is not among them unless such a record is acknowledged:
// it meets its stuck error again, which finds its blocked record in place
// (acknowledged or not) and writes nothing new. What does not count: an
// evidence record of another revision or of a result the job's record no
// longer accepts (a newer completion superseded it), or of a job with a
// current approval. A new completion of the failed job replaces its
// record (no longer acknowledged, and a new result needs a new evidence
// request), and the release resumes.
func (c *Coordinator) ended(snap *Snapshot, plan *PlanRecord) (Outcome, bool) {
	if d := snap.Delivery; d != nil && d.Status == StateSucceeded && deliveredRecord(plan, d) == nil {
		o := outcome(OutcomeDelivered, plan)
		o.DeliveryID = d.DeliveryID
		return o, true
	}
	if d := snap.Delivery; d != nil {
		if d.Status == StateFailed && d.AcknowledgedMS != 0 && deliveredRecord(plan, d) == nil {
			return outcome(OutcomeWaiting, plan), true
		}
		return Outcome{}, false
	}
	for _, job := range plan.Jobs {
		if j := snap.Jobs[job.JobID]; j != nil && j.PlanID == plan.PlanID && j.Status == JobFailed && j.AcknowledgedMS != 0 {
			return outcome(OutcomeWaiting, plan), true
		}
	}
	if c.acknowledgedEvidenceFailure(snap, plan) {
		return outcome(OutcomeWaiting, plan), true
	}
	return Outcome{}, false
}

// acknowledgedEvidenceFailure reports whether the snapshot holds an
// acknowledged, failed, valid evidence record of the current revision, of
// this event and plan, bound to the result its job's record (succeeded)
// accepted, while the job has no current approval: the request every
// later run of the release meets again (stuckEvidence), acknowledged.
func (c *Coordinator) acknowledgedEvidenceFailure(snap *Snapshot, plan *PlanRecord) bool {
	for _, e := range snap.Evidence {
		if e.Status != StateFailed || e.AcknowledgedMS == 0 || e.EvidenceRevision != c.cfg.EvidenceRevision ||
			e.EventID != plan.Event.EventID || e.PlanID != plan.PlanID || ValidateEvidenceRecord(e) != nil {
			continue
		}
		job, ok := plan.Job(e.JobID)
		if !ok {
			continue
		}
		j := snap.Jobs[e.JobID]
		if j == nil || j.PlanID != plan.PlanID || j.Status != JobSucceeded || j.ResultSHA256 != e.ResultSHA256 {
			continue
		}
		if _, err := c.lookupApproval(snap, plan, job, c.now()); err != nil {
			return true
		}
	}
	return false
}

// jobSucceeded reports whether the job's stored record says succeeded; a
// missing record is not succeeded, and a record of another plan is
// queue.plan_mismatch.
func jobSucceeded(snap *Snapshot, plan *PlanRecord, job PlanJob) (bool, error) {
	rec := snap.Jobs[job.JobID]
	if rec == nil {
		return false, nil
	}
	if rec.PlanID != plan.PlanID {
		return false, core.Fail(CodeQueuePlanMismatch)
	}
	return rec.Status == JobSucceeded, nil
}

// validatedResult returns the job's result checked against the plan job,
// its job record and the source text, with its hash and the source text
// (docs/design.md "Ingest: plan and job events"; result.* codes).
func validatedResult(snap *Snapshot, plan *PlanRecord, job PlanJob) (*Result, string, string, error) {
	rec := snap.Results[job.JobID]
	if rec == nil {
		return nil, "", "", core.Fail("result.missing")
	}
	if rec.PlanID != plan.PlanID {
		return nil, "", "", core.Fail("result.plan_mismatch")
	}
	if jr := snap.Jobs[job.JobID]; jr == nil || jr.Status != JobSucceeded || jr.ResultSHA256 != rec.ResultSHA256 {
		// Only the result the job record accepted may be reviewed.
		return nil, "", "", core.Fail(CodeResultJobMismatch)
	}
	src := snap.Sources[job.JobID]
	if src == nil {
		return nil, "", "", core.Fail("result.source_missing")
	}
	var r Result
	if err := json.Unmarshal([]byte(rec.ResultJSON), &r); err != nil {
		return nil, "", "", core.Wrap(CodeStoredResultInvalid, false, err)
	}
	h, err := ResultHash(r)
	if err != nil || h != rec.ResultSHA256 {
		return nil, "", "", core.Fail(CodeStoredResultInvalid)
	}
	if core.SHA256Hex([]byte(src.Text)) != job.SourceSHA256 || r.SourceSHA256 != job.SourceSHA256 {
		return nil, "", "", core.Fail("result.source_mismatch")
	}
	if core.SHA256Hex([]byte(r.Candidate)) != r.TargetSHA256 {
		return nil, "", "", core.Fail("result.target_mismatch")
	}
	if r.SourceLocale != job.SourceLocale || r.TargetLocale != job.TargetLocale || r.ContentType != job.ContentType {
		return nil, "", "", core.Fail("result.binding_mismatch")
	}
	return &r, h, src.Text, nil
}

func (c *Coordinator) now() time.Time { return c.clock.Now() }

// checkedNow is the step's time; a clock before the epoch or past year
// 9999 cannot be stored as milliseconds (coordinator.time.invalid).
func (c *Coordinator) checkedNow() (time.Time, error) {
	now := c.now()
	if !core.ValidMillis(core.Millis(now)) {
		return time.Time{}, core.Fail("coordinator.time.invalid")
	}
	return now, nil
}

// existingDelivery reports a delivery already prepared for the event (step
// 1 of RunNextRelease, docs/design.md "Release steps"): nil when there is
// none; otherwise the stored delivery is checked against the records, and a
// failed one is cms.delivery.failed, a succeeded one delivered and any
// other delivery_ready with its wake time.
func (c *Coordinator) existingDelivery(snap *Snapshot, plan *PlanRecord, now time.Time) (*Outcome, error) {
	d := snap.Delivery
	if d == nil {
		return nil, nil
	}
	if d.Status == StateSucceeded {
		if err := deliveredRecord(plan, d); err != nil {
			return nil, err
		}
		o := outcome(OutcomeDelivered, plan)
		o.DeliveryID = d.DeliveryID
		return &o, nil
	}
	if _, err := c.deliveryBody(snap, plan, d, now); err != nil {
		return nil, err
	}
	switch d.Status {
	case StateFailed:
		return nil, core.Fail(CodeDeliveryFailed)
	case StateSucceeded:
		o := outcome(OutcomeDelivered, plan)
		o.DeliveryID = d.DeliveryID
		return &o, nil
	}
	o := outcome(OutcomeDeliveryReady, plan)
	o.DeliveryID = d.DeliveryID
	o.WakeAt, _ = deliveryWake(d)
	return &o, nil
}

// deliveredRecord checks a succeeded delivery as history: its record is
// one the coordinator could have written, for this event and plan. The
// bundle is not rebuilt: it holds the texts, which expire once the release
// is delivered (docs/design.md "Retention"), and a delivered release stays
// delivered whatever arrives later.
func deliveredRecord(plan *PlanRecord, d *DeliveryRecord) error {
	if err := ValidateDeliveryRecord(d); err != nil {
		return err
	}
	if d.EventID != plan.Event.EventID || d.PlanID != plan.PlanID || d.SiteID != plan.Event.SiteID {
		return core.Fail(CodeDeliveryInvalid)
	}
	return nil
}

func deliveryWake(d *DeliveryRecord) (time.Time, bool) {
	ms, ok := d.WakeMS()
	if !ok {
		return time.Time{}, false
	}
	return core.FromMillis(ms), true
}

// RunNextRelease approves at most one completed locale and prepares the
// delivery only once every locale is approved (docs/design.md "Release
// steps"). A step that stored an approval and then failed
// returns the approved outcome (Changed, ApprovalID) together with the
// error: the approval stands and its event is owed.
//
// A step that fails for good in a way every later run would meet again
// (see stuckCode and stuckEvidence) blocks the release: it leaves the wake
// index and shows in health's attention.
func (c *Coordinator) RunNextRelease(ctx context.Context, eventID string) (Outcome, error) {
	o, err := c.runNextRelease(ctx, eventID)
	return o, c.blockIfStuck(ctx, eventID, err)
}

func (c *Coordinator) runNextRelease(ctx context.Context, eventID string) (Outcome, error) {
	return c.runNextReleaseClaimed(ctx, eventID, nil)
}

// runNextReleaseClaimed is the full walk of a named step that left its
// path (runNamed) with the job's evidence request created leased at
// ingest (pre, or nil): when the walk selects that job and the record is
// still the one ingest wrote, its lease is used rather than waited out.
func (c *Coordinator) runNextReleaseClaimed(ctx context.Context, eventID string, pre *Claim) (Outcome, error) {
	if err := c.Validate(); err != nil {
		return Outcome{}, err
	}
	now, err := c.checkedNow()
	if err != nil {
		return Outcome{}, err
	}
	snap, plan, done, err := c.load(ctx, eventID, false)
	if err != nil {
		return Outcome{}, err
	}
	if done != nil {
		return *done, nil
	}
	if err := c.stillBlocked(ctx, snap, now); err != nil {
		return Outcome{}, err
	}
	c.settleAwaitingDelivery(ctx, snap)
	if snap.Delivery != nil && snap.Delivery.Status != StateSucceeded {
		// The prepared delivery is checked against every result
		// (existingDelivery rebuilds its bundle).
		if err := c.allResults(ctx, snap); err != nil {
			return Outcome{}, err
		}
	}
	if o, err := c.existingDelivery(snap, plan, now); err != nil || o != nil {
		if o == nil {
			return Outcome{}, err
		}
		return *o, nil
	}
	state := c.evidenceState()
	var selected *PlanJob
	for _, job := range plan.Jobs { // sorted by target locale
		ok, err := jobSucceeded(snap, plan, job)
		if err != nil {
			return Outcome{}, err
		}
		if !ok {
			continue
		}
		approval, err := c.lookupApproval(snap, plan, job, now)
		if err != nil {
			if !core.HasCode(err, CodeApprovalMissing) && !core.HasCode(err, CodeApprovalExpired) {
				return Outcome{}, err
			}
			if selected == nil {
				j := job
				selected = &j
			}
			continue
		}
		if owedByEvidence(snap, approval) {
			// A compact approval whose event is owed: its evidence record
			// is what says so, finished only when the event is settled
			// (reported by prepareIfReady or below).
			continue
		}
		// The current approval binds the result its job record accepted
		// (lookupApproval); the result itself is checked again, with its
		// text, when the delivery is prepared (prepareDelivery).
		if err := state.MarkApproved(ctx, snap, plan.Event.EventID, plan.PlanID, job.JobID, approval.ResultSHA256, now); err != nil {
			return Outcome{}, err
		}
	}
	if selected == nil {
		return c.prepareIfReady(ctx, snap, plan, now, Outcome{})
	}
	o, err := c.approveSelected(ctx, snap, plan, *selected, now, false, pre)
	if len(o.Owed) == 0 {
		// The walk reports the other owed approvals whatever it did
		// with the selected job, also when it failed (Step
		// publishes them before it handles the error).
		if o.Owed, _, _ = c.held(snap, plan, now, o.ApprovalID); len(o.Owed) > 0 && o.Status == "" {
			o.Schema, o.EventID, o.PlanID = OutcomeSchema, plan.Event.EventID, plan.PlanID
		}
	}
	return o, err
}

// prepareIfReady prepares the delivery when every locale is approved and
// reports waiting otherwise. base carries the approval fields of a step
// that just approved the last locale.
func (c *Coordinator) prepareIfReady(ctx context.Context, snap *Snapshot, plan *PlanRecord, now time.Time, base Outcome) (Outcome, error) {
	ready, err := c.readiness(snap, plan, now)
	if err != nil {
		return Outcome{}, err
	}
	owed, held, wakeMS := c.held(snap, plan, now, base.ApprovalID)
	if !ready.Ready || held {
		o := base
		if o.Status == "" {
			o = outcome(OutcomeWaiting, plan)
		}
		o.Owed = owed
		if ready.Ready {
			// The delivery waits until no approval is owed
			// (docs/design.md "Owed events of compact approvals").
			o.Held = true
			if wakeMS != 0 && o.Status == OutcomeWaiting && (o.WakeAt.IsZero() || core.FromMillis(wakeMS).Before(o.WakeAt)) {
				o.WakeAt = core.FromMillis(wakeMS)
			}
		}
		return o, nil
	}
	if snap.Delivery == nil {
		// Every text goes into the bundle: read them, and check each
		// result against its job record, plan job and source as the step
		// that approved it did (result.* codes, which block the release).
		if err := c.allTexts(ctx, snap); err != nil {
			return Outcome{}, err
		}
		for _, job := range plan.Jobs {
			if _, _, _, err := validatedResult(snap, plan, job); err != nil {
				return Outcome{}, err
			}
		}
	}
	d, created, err := c.prepareDelivery(ctx, snap, plan, c.now())
	if err != nil {
		return Outcome{}, core.Wrap(externalCode(core.CodeOf(err), "cms"), core.IsRetryable(err), err)
	}
	o := base
	if o.Status == "" {
		o = outcome(OutcomeDeliveryReady, plan)
	}
	o.Status = OutcomeDeliveryReady
	o.DeliveryID = d.DeliveryID
	o.Changed = o.Changed || created
	o.WakeAt, _ = deliveryWake(d)
	return o, nil
}

// approveSelected approves job's locale. snap is the release's state
// (the full walk) or, when named, only that locale's records and every job
// record (runNamed): the job's evidence record and approval are then not
// read (created conditional on their absence), the approval completes the
// plan when the tally says so, and the caller tallies it and decides on
// the delivery.
//
// pre is the job's evidence request already created leased by this worker
// (claimAtIngest), used while the record read (if any) is still the one it
// wrote; nil: the request is claimed (created when new) here.
func (c *Coordinator) approveSelected(ctx context.Context, snap *Snapshot, plan *PlanRecord, job PlanJob, now time.Time, named bool, pre *Claim) (Outcome, error) {
	if err := c.withTexts(ctx, snap, job.JobID); err != nil {
		return Outcome{}, err
	}
	result, resultSHA, sourceText, err := validatedResult(snap, plan, job)
	if err != nil {
		return Outcome{}, err
	}
	req, err := BuildEvidenceRequest(plan.Event.EventID, plan.PlanID, job, sourceText, result, resultSHA, c.cfg.EvidenceRevision)
	if err != nil {
		return Outcome{}, err
	}
	state := c.evidenceState()
	claim := pre
	if claim != nil && claim.RequestID == req.RequestID && claim.record != nil && sameRecord(snap.Evidence[req.RequestID], claim.record) {
		// Created leased at ingest, before the job record.
		snap.Evidence[req.RequestID] = claim.record
	} else if claim, err = state.Claim(ctx, snap, req, c.cfg.WorkerID, now, c.cfg.EvidenceLease, c.cfg.EvidenceMaxAttempts); err != nil {
		return Outcome{}, err
	}
	if claim == nil {
		o := outcome(OutcomeWaiting, plan)
		o.JobID, o.TargetLocale = job.JobID, job.TargetLocale
		if rec := snap.Evidence[req.RequestID]; rec != nil {
			if ms, ok := rec.WakeMS(); ok {
				o.WakeAt = core.FromMillis(ms)
				c.deferAwaitingClaims(ctx, snap, ms)
			}
		}
		return o, nil
	}
	log := c.log().With("event_id", plan.Event.EventID, "job_id", job.JobID, "evidence_request_id", req.RequestID, "attempt", claim.Attempt)
	if c.guard != nil {
		if gerr := c.guard(ctx, c.cfg.EvidenceLease); gerr != nil {
			// The claim is not released: it is left to expire, so the
			// next run sees lease_expired and retries with the attempt
			// counted (docs/design.md "Evidence and delivery leases").
			return Outcome{}, core.Wrap(CodeGuardFailed, false, gerr)
		}
	}
	evidence, err := ObtainEvidence(ctx, c.evidence, req)
	if err != nil {
		log.WarnContext(ctx, "evidence failed", "code", core.CodeOf(err), "retryable", core.IsRetryable(err))
		if ferr := state.Fail(ctx, snap, claim, err, c.now()); ferr != nil {
			return Outcome{}, errors.Join(err, ferr)
		}
		return Outcome{}, finalIfFailed(snap, req.RequestID, err)
	}
	approvalNow := c.now()
	approved, err := c.approve(ctx, snap, approvalInput{
		plan: plan, job: job, result: result, resultSHA: resultSHA, requestID: req.RequestID,
		evidence: evidence, now: approvalNow, ttl: c.cfg.ApprovalTTL,
		completes: c.completes(snap, plan, job.JobID, approvalNow, named),
	})
	if err != nil {
		code := core.CodeOf(err)
		blocked := core.Wrap(code, code == CodeApprovalSigningFailed || core.IsRetryable(err), err)
		log.WarnContext(ctx, "approval failed", "code", code, "retryable", blocked.Retryable)
		if ferr := state.Fail(ctx, snap, claim, blocked, c.now()); ferr != nil {
			return Outcome{}, errors.Join(blocked, ferr)
		}
		return Outcome{}, finalIfFailed(snap, req.RequestID, blocked)
	}
	log.InfoContext(ctx, "locale approved", "approval_id", approved.ApprovalID, "target_locale", job.TargetLocale)
	o := outcome(OutcomeApproved, plan)
	o.JobID, o.TargetLocale, o.ApprovalID, o.Changed = job.JobID, job.TargetLocale, approved.ApprovalID, true
	// The evidence lease stays: the approval is owed while its evidence
	// record is not succeeded, and settling its published event finishes
	// it (docs/design.md "Owed events of compact approvals"). The walk's
	// own approval holds the delivery: Step settles it and runs the
	// release again.
	if !named {
		o.Tallied = c.tallyAfterWalk(ctx, snap, plan, job.JobID)
	}
	return o, nil
}

// deferAwaitingClaims moves the wake of the release's never-claimed jobs
// to wakeMS, when the selected job's evidence wakes: no run can claim them
// before, and the evidence record wakes the release then. Without it the
// sweep would run the release on every pass while it waits. Best effort.
func (c *Coordinator) deferAwaitingClaims(ctx context.Context, snap *Snapshot, wakeMS int64) {
	// In job id order, not map order: the writes are independent, but a
	// fixed order keeps a run replayable (dev/proof/sim).
	for _, jobID := range slices.Sorted(maps.Keys(snap.Jobs)) {
		j := snap.Jobs[jobID]
		if ms, wakes, _, _ := Wake(j); !wakes || ms >= wakeMS {
			continue
		}
		next := *j
		next.NotBeforeMS, next.Version = wakeMS, j.Version+1
		if err := c.store.Put(ctx, &next, j.Version); err != nil {
			c.log().DebugContext(ctx, "never-claimed job wake not deferred", "event_id", j.EventID, "job_id", jobID, "code", core.CodeOf(err))
			continue
		}
		snap.Jobs[jobID] = &next
	}
}

// Deliver sends a prepared delivery with a leased, bounded attempt. A
// delivered event is reported once with Changed; later calls report
// delivered without sending again. Like RunNextRelease, a failure every
// later attempt would meet again blocks the release.
func (c *Coordinator) Deliver(ctx context.Context, eventID string) (Outcome, error) {
	o, err := c.deliver(ctx, eventID)
	return o, c.blockIfStuck(ctx, eventID, err)
}

func (c *Coordinator) deliver(ctx context.Context, eventID string) (Outcome, error) {
	if err := c.Validate(); err != nil {
		return Outcome{}, err
	}
	now, err := c.checkedNow()
	if err != nil {
		return Outcome{}, err
	}
	snap, plan, done, err := c.load(ctx, eventID, false)
	if err != nil {
		return Outcome{}, err
	}
	if done != nil {
		return *done, nil
	}
	d := snap.Delivery
	if d == nil {
		return Outcome{}, core.Fail(CodeDeliveryMissing)
	}
	if d.Status != StateSucceeded {
		// The bundle is rebuilt from every result before it is sent.
		if err := c.allResults(ctx, snap); err != nil {
			return Outcome{}, err
		}
	}
	nowMS := core.Millis(now)
	if l, changed := d.Lease.expired(nowMS); changed {
		next := *d
		next.Lease = l
		if d, err = c.putDelivery(ctx, snap, next, CodeDeliveryClaimLost); err != nil {
			return Outcome{}, err
		}
	}
	o := outcome(OutcomeDeliveryReady, plan)
	o.DeliveryID = d.DeliveryID
	if d.Status == StateSucceeded {
		if err := deliveredRecord(plan, d); err != nil {
			return Outcome{}, err
		}
		o.Status = OutcomeDelivered
		return o, nil
	}
	body, err := c.deliveryBody(snap, plan, d, now)
	if err != nil {
		return Outcome{}, err
	}
	switch d.Status {
	case StateFailed:
		return Outcome{}, core.Fail(CodeDeliveryFailed)
	}
	if b := snap.Blocked; b != nil {
		// Blocked wins: a deliver step queued before the release was
		// blocked (or before the operator's fix) never claims its parked
		// delivery, and says so. The conditional claim below makes this
		// atomic with block, which parks the delivery (a version bump) in
		// the transaction that writes the blocked record. A delivered,
		// failed or tampered delivery keeps its own outcome or code
		// (above).
		c.log().WarnContext(ctx, "blocked release not delivered", "event_id", eventID, "code", CodeReleaseBlocked, "blocked_code", b.Code)
		return Outcome{}, core.Fail(CodeReleaseBlocked)
	}
	if !d.claimable(nowMS) {
		o.WakeAt, _ = deliveryWake(d)
		return o, nil
	}
	if c.guard != nil {
		if gerr := c.guard(ctx, c.cfg.DeliveryLease); gerr != nil {
			o.WakeAt = now
			return o, nil
		}
	}
	token, err := newLeaseToken()
	if err != nil {
		return Outcome{}, err
	}
	next := *d
	next.Lease = d.claimed(c.cfg.WorkerID, token, nowMS, c.cfg.DeliveryLease.Milliseconds())
	if d, err = c.putDelivery(ctx, snap, next, CodeDeliveryClaimLost); err != nil {
		return Outcome{}, err
	}
	log := c.log().With("event_id", plan.Event.EventID, "delivery_id", d.DeliveryID, "attempt", d.Attempts)
	sendErr := c.cms.Deliver(ctx, plan.Event.SiteID, plan.Event.EventID, body)
	finishedMS := core.Millis(c.now())
	if err := d.holds(c.cfg.WorkerID, token, finishedMS, CodeDeliveryLeaseLost, CodeDeliveryLeaseExpired); err != nil {
		return Outcome{}, err
	}
	next = *d
	if sendErr == nil {
		next.Lease = d.succeeded(finishedMS)
	} else {
		code := externalCode(core.CodeOf(sendErr), "cms")
		// Never retried earlier than the CMS's Retry-After (429/503).
		next.Lease = d.failed(code, core.IsRetryable(sendErr), finishedMS, core.RetryAfterOf(sendErr))
		sendErr = core.Wrap(code, core.IsRetryable(sendErr) && next.Status == StateRetryWait, sendErr)
	}
	if d, err = c.putDelivery(ctx, snap, next, CodeDeliveryFinishLost); err != nil {
		return Outcome{}, err
	}
	if sendErr != nil {
		log.WarnContext(ctx, "delivery failed", "code", core.CodeOf(sendErr), "status", d.Status)
		return Outcome{}, sendErr
	}
	log.InfoContext(ctx, "delivered")
	o.Status, o.Changed = OutcomeDelivered, true
	return o, nil
}

// finalIfFailed reports err as not retryable once the evidence record has
// no attempts left: retrying the step can only answer attempts_exhausted.
func finalIfFailed(snap *Snapshot, requestID string, err error) error {
	if rec := snap.Evidence[requestID]; rec != nil && rec.Status == StateFailed && core.IsRetryable(err) {
		return core.Wrap(core.CodeOf(err), false, err)
	}
	return err
}

func (c *Coordinator) putDelivery(ctx context.Context, snap *Snapshot, next DeliveryRecord, lostCode string) (*DeliveryRecord, error) {
	prev := next.Version
	next.Version = prev + 1
	if err := c.store.Put(ctx, &next, prev); err != nil {
		if errors.Is(err, ErrConflict) {
			return nil, core.Wrap(lostCode, true, err)
		}
		return nil, core.Wrap(CodeDeliveryWriteFailed, true, err)
	}
	snap.Delivery = &next
	return &next, nil
}

// NextWake returns the earliest time a stored lease or backoff of the
// event's delivery or current-revision evidence can make progress, so the
// caller can schedule the next step after a failed or waiting one. Records
// of other evidence revisions are ignored: they never run again.
func (c *Coordinator) NextWake(ctx context.Context, eventID string) (time.Time, bool, error) {
	if !core.ValidToken(eventID) {
		return time.Time{}, false, core.Fail(CodeEventIDInvalid)
	}
	snap, err := c.store.LoadState(ctx, eventID)
	if err != nil {
		return time.Time{}, false, storeRead(err)
	}
	var best int64
	found := false
	consider := func(ms int64, ok bool) {
		if ok && (!found || ms < best) {
			best, found = ms, true
		}
	}
	for _, e := range snap.Evidence {
		if e.EvidenceRevision == c.cfg.EvidenceRevision {
			consider(e.WakeMS())
		}
	}
	if snap.Delivery != nil {
		consider(snap.Delivery.WakeMS())
	}
	if !found {
		return time.Time{}, false, nil
	}
	return core.FromMillis(best), true, nil
}

// sameRecord reports whether the evidence record read (nil: not read) is
// the one a pre-made claim wrote: same version and lease token.
func sameRecord(read, wrote *EvidenceRecord) bool {
	return read == nil || (read.Version == wrote.Version && read.LeaseToken == wrote.LeaseToken)
}
