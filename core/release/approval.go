package release

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
)

// Approval lookup codes (docs/design.md "Approvals"), the operation guard
// code and the approval TTL configuration code.
const (
	CodeApprovalMissing        = "approval.missing"
	CodeApprovalExpired        = "approval.expired"
	CodeApprovalInvalid        = "approval.invalid"
	CodeApprovalResultMismatch = "approval.result_mismatch"
	CodeOperationGuard         = "operation_guard"
	CodeApprovalTTLInvalid     = "release.approval.ttl_invalid"
	CodeApprovalJSONInvalid    = "release.json.invalid"
)

// Guard refuses to start work that may not finish within lease: the
// coordinator passes the evidence lease and the Lambda guard compares it
// with the remaining invocation time.
type Guard func(ctx context.Context, lease time.Duration) error

// Verifiers verify the three receipt kinds.
type Verifiers struct {
	Quality           Verifier
	HumanReview       Verifier
	IndependentReview Verifier
}

// approvalInput is what the approval step needs.
type approvalInput struct {
	plan      *PlanRecord
	job       PlanJob
	result    *Result
	resultSHA string
	requestID string
	evidence  Evidence
	now       time.Time
	ttl       time.Duration
	// completes says every other job already holds a current approval:
	// this one completes the plan, so it wakes until the delivery is
	// prepared.
	completes bool
}

// guarded wraps a verification with the operation guard: a refused guard is
// the retryable "operation_guard" failure: the evidence attempt goes to
// retry_wait (with attempts left) and is tried again later.
func guarded(ctx context.Context, g Guard, lease time.Duration, verify func() error) error {
	if g != nil {
		if err := g(ctx, lease); err != nil {
			return core.Wrap(CodeOperationGuard, true, err)
		}
	}
	return verify()
}

// approve verifies the receipts, signs the approval and stores it as
// approval#<job_id>, replacing an older approval of the job and owing its
// event (docs/design.md "Approvals", "Release outbox"). Errors carry
// "release." codes.
func (c *Coordinator) approve(ctx context.Context, snap *Snapshot, in approvalInput) (*ApprovalRecord, error) {
	if in.ttl <= 0 {
		return nil, core.Fail(CodeApprovalTTLInvalid)
	}
	verify := func(v Verifier, receipt string) (p contract.ReceiptPayload, err error) {
		err = guarded(ctx, c.guard, c.cfg.EvidenceLease, func() error {
			if v == nil {
				return core.Fail("verifier.missing")
			}
			p, err = v.Verify(receipt, in.requestID, in.resultSHA, in.now)
			return err
		})
		return p, err
	}
	payload := contract.ApprovalPayload{
		Schema: contract.ApprovalSchema, EventID: in.plan.Event.EventID, SiteID: in.plan.Event.SiteID,
		PlanID: in.plan.PlanID, JobID: in.job.JobID, TargetLocale: in.job.TargetLocale,
		ResultSHA256: in.resultSHA, EvidenceRequestID: in.requestID,
		QualityReceiptSHA256: core.SHA256Hex([]byte(in.evidence.QualityReceipt)),
		ApprovedAtMS:         core.Millis(in.now), ExpiresAtMS: core.Millis(in.now.Add(in.ttl)),
	}
	if _, err := verify(c.verifiers.Quality, in.evidence.QualityReceipt); err != nil {
		return nil, releaseError(err)
	}
	if in.evidence.HumanReviewReceipt != "" {
		if _, err := verify(c.verifiers.HumanReview, in.evidence.HumanReviewReceipt); err != nil {
			return nil, releaseError(err)
		}
		payload.HumanReviewReceiptSHA256 = core.SHA256Hex([]byte(in.evidence.HumanReviewReceipt))
	}
	if r := in.evidence.IndependentReview; r != nil {
		signed, err := verify(c.verifiers.IndependentReview, r.Receipt)
		if err != nil {
			return nil, releaseError(err)
		}
		if err := boundReviewer(signed.ReviewerID, r.Provider.ID, in.result.Provider.ID); err != nil {
			return nil, err
		}
		h, err := core.HashCanonical(r)
		if err != nil {
			return nil, core.Wrap(CodeApprovalJSONInvalid, false, err)
		}
		payload.IndependentReviewSHA256 = h
		payload.IndependentReviewProvider = r.Provider.ID
	}
	idHash, err := core.HashCanonical(payload)
	if err != nil {
		return nil, core.Wrap(CodeApprovalJSONInvalid, false, err)
	}
	payload.ApprovalID = "apv-" + idHash[:40]
	raw, err := core.Canonical(payload)
	if err != nil {
		return nil, core.Wrap(CodeApprovalJSONInvalid, false, err)
	}
	sig, err := c.approval.signature(raw)
	if err != nil {
		return nil, core.Wrap(CodeApprovalSigningFailed, true, err)
	}
	rec := ApprovalRecord{
		EventID: payload.EventID, PlanID: payload.PlanID, JobID: payload.JobID,
		TargetLocale: payload.TargetLocale, ResultSHA256: payload.ResultSHA256,
		RequestID: in.requestID, ApprovalID: payload.ApprovalID, KeyID: c.approval.KeyID(),
		ApprovedMS: payload.ApprovedAtMS, ExpiresMS: payload.ExpiresAtMS,
		AwaitingDelivery: in.completes,
	}
	// The signed bytes and the signature, once (docs/design.md "Compact
	// approvals"); Token is set for this step's callers. The approval's
	// event is owed while its evidence record is not succeeded
	// (ApprovalOwed).
	rec.SetSigned(raw, sig)
	var prev int64
	if old := snap.Approvals[in.job.JobID]; old != nil {
		prev = old.Version
	}
	rec.Version = prev + 1
	if err := c.store.Put(ctx, &rec, prev); err != nil {
		if errors.Is(err, ErrConflict) {
			return nil, core.Wrap("release.approval.conflict", true, err)
		}
		return nil, core.Wrap(CodeStoreWriteFailed, true, err)
	}
	snap.Approvals[rec.JobID] = &rec
	return &rec, nil
}

// boundReviewer checks the reviewer named inside the signed independent
// review receipt: it must not be the translator (the evidence policy's
// not_independent) and must be the reviewer the response claims
// (provider.invalid otherwise). The response's own claim is checked
// against the translator earlier, but only the receipt is signed.
func boundReviewer(signed, claimed, translator string) error {
	if signed == translator {
		return core.Fail(CodeIndependentNotIndependent)
	}
	if signed != claimed {
		return core.Fail(CodeIndependentProvider)
	}
	return nil
}

func releaseError(err error) error {
	code := core.CodeOf(err)
	return core.Wrap(externalCode(code, "release"), core.IsRetryable(err), err)
}

// lookupApproval returns the job's current approval: stored, verified with
// the approval authority, bound to the plan's event, plan id, job id and
// target locale and to the current result, and not expired at now.
func (c *Coordinator) lookupApproval(snap *Snapshot, plan *PlanRecord, job PlanJob, now time.Time) (*ApprovalRecord, error) {
	rec := snap.Approvals[job.JobID]
	if rec == nil {
		return nil, core.Fail(CodeApprovalMissing)
	}
	raw, err := c.approval.OpenKey(rec.KeyID, rec.Token)
	if err != nil {
		return nil, core.Wrap(CodeApprovalInvalid, false, err)
	}
	var p contract.ApprovalPayload
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, core.Wrap(CodeApprovalInvalid, false, err)
	}
	if p.Schema != contract.ApprovalSchema || p.ApprovalID != rec.ApprovalID || p.EventID != plan.Event.EventID ||
		p.PlanID != plan.PlanID || p.JobID != job.JobID || p.TargetLocale != job.TargetLocale ||
		p.ResultSHA256 != rec.ResultSHA256 || p.ExpiresAtMS != rec.ExpiresMS {
		return nil, core.Fail(CodeApprovalInvalid)
	}
	if sha, ok := acceptedResultSHA(snap, job.JobID); !ok || sha != p.ResultSHA256 {
		return nil, core.Fail(CodeApprovalResultMismatch)
	}
	if p.ExpiresAtMS <= core.Millis(now) {
		return nil, core.Fail(CodeApprovalExpired)
	}
	return rec, nil
}

// acceptedResultSHA is the hash of the job's current result: the stored
// result's when the snapshot holds it (a full read), else the one its job
// record accepted (the job record and its result are one write, and every
// use of the result checks the two agree: validatedResult).
func acceptedResultSHA(snap *Snapshot, jobID string) (string, bool) {
	if res := snap.Results[jobID]; res != nil {
		return res.ResultSHA256, true
	}
	if j := snap.Jobs[jobID]; j != nil && j.ResultSHA256 != "" {
		return j.ResultSHA256, true
	}
	return "", false
}

// completes says whether jobID's approval completes the plan: from the
// state read (completesPlan), or for a named step from the tally read
// (tallyCompletes).
func (c *Coordinator) completes(snap *Snapshot, plan *PlanRecord, jobID string, now time.Time, named bool) bool {
	if named {
		return tallyCompletes(snap.Tally, plan, jobID)
	}
	return c.completesPlan(snap, plan, jobID, now)
}

// completesPlan says whether every job of the plan but jobID holds a
// current approval at now.
func (c *Coordinator) completesPlan(snap *Snapshot, plan *PlanRecord, jobID string, now time.Time) bool {
	for _, job := range plan.Jobs {
		if job.JobID == jobID {
			continue
		}
		if _, err := c.lookupApproval(snap, plan, job, now); err != nil {
			return false
		}
	}
	return true
}

// Readiness says whether every job of the plan holds a current approval.
type Readiness struct {
	Ready     bool
	Approvals []*ApprovalRecord // in plan (target locale) order when Ready
}

// readiness checks every job of the plan for a current approval. Missing or
// expired approvals mean not ready; any other approval failure is an error.
func (c *Coordinator) readiness(snap *Snapshot, plan *PlanRecord, now time.Time) (Readiness, error) {
	out := Readiness{Ready: true}
	for _, job := range plan.Jobs {
		rec, err := c.lookupApproval(snap, plan, job, now)
		if err != nil {
			if core.HasCode(err, CodeApprovalMissing) || core.HasCode(err, CodeApprovalExpired) {
				out.Ready = false
				continue
			}
			return Readiness{}, err
		}
		out.Approvals = append(out.Approvals, rec)
	}
	if !out.Ready {
		out.Approvals = nil
	}
	return out, nil
}

// SettleApproval settles the published localeflow.release.approved event
// of the event's approval of jobID (docs/design.md "Owed events of
// compact approvals"): the approval is added to the release's tally when
// tally is set and the tally read lacks it (the step that stored it may
// have died before its tally write; false: its step reported it Tallied),
// then its evidence record is finished succeeded (settleEvidence). An
// approval that is no longer owed, or is another approval now, is left as
// it is.
func (c *Coordinator) SettleApproval(ctx context.Context, eventID, jobID, approvalID string, tally bool) error {
	if !core.ValidToken(eventID) {
		return core.Fail(CodeEventIDInvalid)
	}
	if !core.ValidToken(jobID) {
		return nil // no approval has that key
	}
	keys := []string{SKApprovalPrefix + jobID}
	if tally {
		keys = append(keys, SKTally)
	}
	snap, err := c.store.LoadKeys(ctx, eventID, keys...)
	if err != nil {
		return storeRead(err)
	}
	a := snap.Approvals[jobID]
	if a == nil || a.ApprovalID != approvalID {
		return nil
	}
	return c.settleEvidence(ctx, &snap, a)
}

// tallyOwed adds an owed approval's job to the release's tally and reports
// whether the tally is complete. The plan is read only when the tally does
// not hold the job yet (a step died before its tally write).
func (c *Coordinator) tallyOwed(ctx context.Context, snap *Snapshot, a *ApprovalRecord) (bool, error) {
	t := snap.Tally
	if _, found := slices.BinarySearch(t.Approved, a.JobID); found {
		return t.complete(), nil
	}
	p, err := c.store.LoadKeys(ctx, a.EventID, SKPlan)
	if err != nil {
		return false, storeRead(err)
	}
	plan := p.Plan
	if plan == nil || !validTally(t, plan) || plan.PlanID != a.PlanID {
		// Nothing to add to (a tampered tally or plan): the full walk
		// of the sweep's and the queue's runs does not use the tally.
		return false, nil
	}
	if _, ok := plan.Job(a.JobID); !ok {
		return false, nil
	}
	t, err = c.tally(ctx, snap, plan, a.JobID, nil)
	if err != nil {
		return false, err
	}
	return t.complete(), nil
}

// CodeOutboxLost: the owed approval or its evidence record changed
// between read and settling; it stays owed and a later run publishes it
// again.
const CodeOutboxLost = "release.outbox.lost"

// ApprovalOwed is the one predicate of an owed localeflow.release.approved
// event (docs/design.md "Owed events of compact approvals"): the evidence
// record ev of the approval a (the record of a.RequestID; nil when
// missing or not read) is not succeeded. Every reader that decides
// whether to publish or to hold the delivery uses it: the walk, the
// completing read, blocking, Step's re-publication and the
// simulator's checkers.
func ApprovalOwed(a *ApprovalRecord, ev *EvidenceRecord) bool {
	return a != nil && ev != nil && ev.RequestID == a.RequestID && ev.EventID == a.EventID &&
		ev.JobID == a.JobID && ev.Status != StateSucceeded
}

// evidenceSettles reports whether the evidence record ev of the owed
// approval a passes the record checks a settle needs: a valid record of
// a's result and plan. An owed approval whose record fails them can never
// be settled (SettleApproval reports evidence.state.invalid).
func evidenceSettles(a *ApprovalRecord, ev *EvidenceRecord) bool {
	return ValidateEvidenceRecord(ev) == nil && ev.ResultSHA256 == a.ResultSHA256 && ev.PlanID == a.PlanID
}

// owedByEvidence reports whether the snapshot's approval a is owed
// (ApprovalOwed).
func owedByEvidence(snap *Snapshot, a *ApprovalRecord) bool {
	return a != nil && ApprovalOwed(a, snap.Evidence[a.RequestID])
}

// OwedApproval is an owed approval event a step reports for Step
// to publish and settle (SettleApproval): the detail's ids.
type OwedApproval struct {
	JobID        string
	TargetLocale string
	ApprovalID   string
}

// held reports the approvals of the plan whose event is owed
// (owedByEvidence), except the approval except (the step's own, which it
// reports itself). An owed approval whose evidence lease is still running
// belongs to a step that may still publish it: it is not reported, and
// wakeMS is the earliest such lease's expiry (the release runs again
// then). Every other owed approval whose token opens and names the plan's
// job is reported (owed). held is true when any approval is owed: the
// delivery is not prepared then.
func (c *Coordinator) held(snap *Snapshot, plan *PlanRecord, now time.Time, except string) (owed []OwedApproval, held bool, wakeMS int64) {
	nowMS := core.Millis(now)
	for _, job := range plan.Jobs {
		a := snap.Approvals[job.JobID]
		if a == nil || a.PlanID != plan.PlanID || !owedByEvidence(snap, a) {
			continue
		}
		held = true
		if a.ApprovalID == except {
			continue
		}
		if ev := snap.Evidence[a.RequestID]; ev.Status == StateLeased && ev.LeaseExpiresMS > nowMS {
			if wakeMS == 0 || ev.LeaseExpiresMS < wakeMS {
				wakeMS = ev.LeaseExpiresMS
			}
			continue
		}
		if !c.approvalMade(a, plan, job) {
			continue
		}
		owed = append(owed, OwedApproval{JobID: job.JobID, TargetLocale: job.TargetLocale, ApprovalID: a.ApprovalID})
	}
	return owed, held, wakeMS
}

// approvalMade says whether a stored approval's signed token opens and
// names the plan's job: the approval was made (expiry does not matter),
// so its event may be published.
func (c *Coordinator) approvalMade(a *ApprovalRecord, plan *PlanRecord, job PlanJob) bool {
	if !core.ValidToken(a.ApprovalID) || a.JobID != job.JobID || a.TargetLocale != job.TargetLocale {
		return false
	}
	raw, err := c.approval.OpenKey(a.KeyID, a.Token)
	if err != nil {
		return false
	}
	var p contract.ApprovalPayload
	if err := json.Unmarshal(raw, &p); err != nil {
		return false
	}
	return p.Schema == contract.ApprovalSchema && p.ApprovalID == a.ApprovalID && p.EventID == plan.Event.EventID &&
		p.PlanID == plan.PlanID && p.JobID == job.JobID && p.TargetLocale == job.TargetLocale
}

// settleEvidence settles the published event of approval a: it adds the approval to the release's tally when snap
// holds one without it (the step that stored it may have died before its
// tally write; a tally then complete also marks the approval
// AwaitingDelivery, so the release wakes), then
// finishes the approval's evidence record succeeded with a write
// conditional on the record read (its wake entry goes). An approval no
// longer owed is left as it is. An expired approval whose evidence is
// leased again (a new attempt re-approving the locale) is left to that
// attempt.
func (c *Coordinator) settleEvidence(ctx context.Context, snap *Snapshot, a *ApprovalRecord) error {
	evs, err := c.store.LoadKeys(ctx, a.EventID, SKEvidencePrefix+a.RequestID)
	if err != nil {
		return storeRead(err)
	}
	ev := evs.Evidence[a.RequestID]
	if !ApprovalOwed(a, ev) {
		return nil
	}
	if !evidenceSettles(a, ev) {
		// Owed, but its record fails the record checks (corruption,
		// tampering): no write can settle it. An error, never a silent
		// success: the step blocks the release (evidence.state.invalid).
		c.log().ErrorContext(ctx, "owed approval's evidence record fails its checks", "event_id", a.EventID,
			"job_id", a.JobID, "approval_id", a.ApprovalID, "code", CodeEvidenceStateInvalid)
		return core.Fail(CodeEvidenceStateInvalid)
	}
	nowMS := core.Millis(c.now())
	if a.ExpiresMS <= nowMS && ev.Status == StateLeased && ev.LeaseExpiresMS > nowMS {
		return nil
	}
	if snap.Tally != nil {
		complete, err := c.tallyOwed(ctx, snap, a)
		if err != nil {
			return err
		}
		if complete && !a.AwaitingDelivery {
			next := *a
			next.AwaitingDelivery, next.Version = true, a.Version+1
			if err := c.store.Put(ctx, &next, a.Version); err != nil {
				if errors.Is(err, ErrConflict) {
					return core.Wrap(CodeOutboxLost, true, err)
				}
				return core.Wrap(CodeStoreWriteFailed, true, err)
			}
		}
	}
	next := *ev
	next.Lease = ev.succeeded(nowMS)
	next.Version = ev.Version + 1
	if err := c.store.Put(ctx, &next, ev.Version); err != nil {
		if errors.Is(err, ErrConflict) {
			return core.Wrap(CodeOutboxLost, true, err)
		}
		return core.Wrap(CodeStoreWriteFailed, true, err)
	}
	return nil
}
