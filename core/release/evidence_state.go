package release

import (
	"context"
	"errors"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
)

// Evidence state codes (docs/design.md "Evidence and delivery leases",
// "Release error codes").
const (
	CodeEvidenceStateInvalid   = "evidence.state.invalid"
	CodeBindingMismatch        = "evidence.state.binding_mismatch"
	CodeAttemptPolicyChanged   = "evidence.state.attempt_policy_changed"
	CodeAlreadyConsumed        = "evidence.revision.already_consumed"
	CodeAttemptsExhausted      = "evidence.attempts_exhausted"
	CodeClaimLost              = "evidence.claim.lost"
	CodeEvidenceLeaseLost      = "evidence.lease_lost"
	CodeEvidenceLeaseExpired   = "evidence.lease_expired"
	CodeEvidenceFinishLost     = "evidence.finish_lost"
	CodeEvidenceLeaseInvalid   = "evidence.lease.invalid"
	CodeMaxAttemptsInvalid     = "evidence.max_attempts.invalid"
	CodeWorkerIDInvalid        = "evidence.worker_id.invalid"
	CodeEvidenceRequestInvalid = "evidence.request_id.invalid"
	CodeRevisionInvalid        = "coordinator.evidence_revision.invalid"
	CodeEvidencePlanIDInvalid  = "evidence.plan_id.invalid"
	CodeEvidenceJobIDInvalid   = "evidence.job_id.invalid"
	CodeEvidenceResultInvalid  = "evidence.result_sha256.invalid"
)

// EvidenceState keeps the content-free evidence records of one event in a
// Store. It works on the snapshot the caller loaded (one read per run) and
// writes with compare-and-swap; a lost race surfaces as a "lost" code
// (evidence.claim.lost, evidence.lease_lost, evidence.finish_lost).
type EvidenceState struct {
	Store Store
}

// Claim is a held evidence lease.
type Claim struct {
	RequestID   string
	LeaseOwner  string
	LeaseToken  string
	ExpiresAt   time.Time
	Attempt     int
	MaxAttempts int
	record      *EvidenceRecord
}

func validBinding(req *contract.EvidenceRequest) error {
	if req == nil {
		return core.Fail("evidence.request.invalid")
	}
	checks := []struct{ v, code string }{
		{req.RequestID, CodeEvidenceRequestInvalid}, {req.EventID, CodeEventIDInvalid},
		{req.PlanID, CodeEvidencePlanIDInvalid}, {req.JobID, CodeEvidenceJobIDInvalid},
		{req.EvidenceRevision, CodeRevisionInvalid},
	}
	for _, c := range checks {
		if !core.ValidToken(c.v) {
			return core.Fail(c.code)
		}
	}
	if !core.ValidSHA256(req.ResultSHA256) {
		return core.Fail(CodeEvidenceResultInvalid)
	}
	return nil
}

// ValidateEvidenceRecord checks a stored evidence record with the rules the
// coordinator applies whenever it reads one (ids are tokens, the result
// hash is SHA-256 hex, the version is positive and the lease fields follow
// docs/design.md "Release records"): Fail(CodeEvidenceStateInvalid) unless
// r is a record the coordinator could have written.
func ValidateEvidenceRecord(r *EvidenceRecord) error {
	if r == nil || !core.ValidToken(r.RequestID) || !core.ValidToken(r.EventID) || !core.ValidToken(r.PlanID) ||
		!core.ValidToken(r.JobID) || !core.ValidSHA256(r.ResultSHA256) || !core.ValidToken(r.EvidenceRevision) ||
		r.Version <= 0 || !r.Lease.valid() {
		return core.Fail(CodeEvidenceStateInvalid)
	}
	return nil
}

func (r *EvidenceRecord) sameBinding(req *contract.EvidenceRequest) bool {
	return r.RequestID == req.RequestID && r.EventID == req.EventID && r.PlanID == req.PlanID &&
		r.JobID == req.JobID && r.ResultSHA256 == req.ResultSHA256 && r.EvidenceRevision == req.EvidenceRevision
}

func (s EvidenceState) put(ctx context.Context, snap *Snapshot, next EvidenceRecord, prev int64, lostCode string, retryable bool) (*EvidenceRecord, error) {
	next.Version = prev + 1
	if err := s.Store.Put(ctx, &next, prev); err != nil {
		if errors.Is(err, ErrConflict) {
			return nil, core.Wrap(lostCode, retryable, err)
		}
		return nil, core.Wrap("evidence.state.write_failed", true, err)
	}
	snap.Evidence[next.RequestID] = &next
	return &next, nil
}

// create inserts a fresh evidence record. When its job still wakes as
// never claimed, the job's mark is cleared next (the evidence record wakes
// the release from now on); that second write is best effort: a mark left
// behind only costs the sweep one extra step, which clears it.
func (s EvidenceState) create(ctx context.Context, snap *Snapshot, fresh EvidenceRecord) (*EvidenceRecord, error) {
	rec, err := s.put(ctx, snap, fresh, 0, CodeClaimLost, true)
	if err != nil {
		return nil, err
	}
	s.clearAwaitingClaim(ctx, snap, fresh.JobID)
	return rec, nil
}

// clearAwaitingClaim clears a job's never-claimed mark once its evidence
// record exists; best effort.
func (s EvidenceState) clearAwaitingClaim(ctx context.Context, snap *Snapshot, jobID string) {
	job := snap.Jobs[jobID]
	if job == nil || !job.AwaitingClaim {
		return
	}
	claimed := *job
	claimed.AwaitingClaim, claimed.NotBeforeMS = false, 0
	claimed.Version = job.Version + 1
	if err := s.Store.Put(ctx, &claimed, job.Version); err == nil {
		snap.Jobs[jobID] = &claimed
	}
}

// Claim inserts the request's record if new (or checks the stored binding
// and attempt policy), expires a stale lease, and takes the lease when an
// attempt is due. It returns nil, nil when the request is leased by another
// worker or waiting for its backoff.
func (s EvidenceState) Claim(ctx context.Context, snap *Snapshot, req *contract.EvidenceRequest, workerID string, now time.Time, lease time.Duration, maxAttempts int) (*Claim, error) {
	if err := validBinding(req); err != nil {
		return nil, err
	}
	if !core.ValidTokenN(workerID, core.MaxWorkerIDLength) {
		return nil, core.Fail(CodeWorkerIDInvalid)
	}
	if lease <= 0 || lease > MaxLease || lease%time.Millisecond != 0 {
		return nil, core.Fail(CodeEvidenceLeaseInvalid)
	}
	if maxAttempts < 1 || maxAttempts > MaxAttempts {
		return nil, core.Fail(CodeMaxAttemptsInvalid)
	}
	nowMS := core.Millis(now)
	rec := snap.Evidence[req.RequestID]
	if rec == nil {
		// A new request is due at once: it is created leased (its first
		// attempt claimed), one write where a pending record and its
		// claim were two. A crash after it leaves the lease to expire,
		// exactly as a crash after a claim does.
		fresh := EvidenceRecord{
			RequestID: req.RequestID, EventID: req.EventID, PlanID: req.PlanID, JobID: req.JobID,
			ResultSHA256: req.ResultSHA256, EvidenceRevision: req.EvidenceRevision,
			Lease: Lease{Status: StatePending, MaxAttempts: maxAttempts, NextAttemptMS: nowMS, CreatedMS: nowMS, UpdatedMS: nowMS},
		}
		token, err := newLeaseToken()
		if err != nil {
			return nil, err
		}
		fresh.Lease = fresh.claimed(workerID, token, nowMS, lease.Milliseconds())
		if rec, err = s.create(ctx, snap, fresh); err != nil {
			return nil, err
		}
		return &Claim{
			RequestID: rec.RequestID, LeaseOwner: workerID, LeaseToken: token,
			ExpiresAt: core.FromMillis(rec.LeaseExpiresMS), Attempt: rec.Attempts, MaxAttempts: rec.MaxAttempts,
			record: rec,
		}, nil
	}
	if err := ValidateEvidenceRecord(rec); err != nil {
		return nil, err
	}
	s.clearAwaitingClaim(ctx, snap, rec.JobID)
	if !rec.sameBinding(req) {
		return nil, core.Fail(CodeBindingMismatch)
	}
	if rec.MaxAttempts != maxAttempts {
		return nil, core.Fail(CodeAttemptPolicyChanged)
	}
	if l, changed := rec.Lease.expired(nowMS); changed {
		next := *rec
		next.Lease = l
		var err error
		if rec, err = s.put(ctx, snap, next, rec.Version, CodeClaimLost, true); err != nil {
			return nil, err
		}
	}
	switch rec.Status {
	case StateSucceeded:
		return nil, core.Fail(CodeAlreadyConsumed)
	case StateFailed:
		return nil, core.Fail(CodeAttemptsExhausted)
	}
	if rec.Status == StateLeased || rec.NextAttemptMS > nowMS {
		return nil, nil
	}
	if !rec.claimable(nowMS) {
		return nil, core.Retry(CodeClaimLost)
	}
	token, err := newLeaseToken()
	if err != nil {
		return nil, err
	}
	next := *rec
	next.Lease = rec.claimed(workerID, token, nowMS, lease.Milliseconds())
	if rec, err = s.put(ctx, snap, next, rec.Version, CodeClaimLost, true); err != nil {
		return nil, err
	}
	return &Claim{
		RequestID: rec.RequestID, LeaseOwner: workerID, LeaseToken: token,
		ExpiresAt: core.FromMillis(rec.LeaseExpiresMS), Attempt: rec.Attempts, MaxAttempts: rec.MaxAttempts,
		record: rec,
	}, nil
}

// finish applies a terminal transition of a held lease. A record another
// worker already marked succeeded (mark_approved) is left as it is.
func (s EvidenceState) finish(ctx context.Context, snap *Snapshot, c *Claim, now time.Time, apply func(Lease) Lease) error {
	if c == nil || c.record == nil {
		return core.Fail("evidence.claim.invalid")
	}
	rec := snap.Evidence[c.RequestID]
	if rec == nil {
		rec = c.record
	}
	for attempt := 0; attempt < 2; attempt++ {
		if rec.Status == StateSucceeded {
			return nil
		}
		nowMS := core.Millis(now)
		if err := rec.holds(c.LeaseOwner, c.LeaseToken, nowMS, CodeEvidenceLeaseLost, CodeEvidenceLeaseExpired); err != nil {
			return err
		}
		next := *rec
		next.Lease = apply(rec.Lease)
		_, err := s.put(ctx, snap, next, rec.Version, CodeEvidenceFinishLost, false)
		if err == nil || !core.HasCode(err, CodeEvidenceFinishLost) {
			return err
		}
		// Lost a race: re-read once and apply the same checks to the
		// current record (it may have been marked approved, which ends
		// the finish as a no-op).
		fresh, lerr := s.Store.LoadKeys(ctx, rec.EventID, SKEvidencePrefix+c.RequestID)
		if lerr != nil {
			return core.Wrap(CodeEvidenceFinishLost, false, lerr)
		}
		if rec = fresh.Evidence[c.RequestID]; rec == nil {
			return core.Fail(CodeEvidenceLeaseLost)
		}
		snap.Evidence[c.RequestID] = rec
	}
	return core.Fail(CodeEvidenceFinishLost)
}

// Succeed ends the lease successfully.
func (s EvidenceState) Succeed(ctx context.Context, snap *Snapshot, c *Claim, now time.Time) error {
	nowMS := core.Millis(now)
	return s.finish(ctx, snap, c, now, func(l Lease) Lease { return l.succeeded(nowMS) })
}

// Fail records a failed attempt with cause's code: retry_wait after the
// backoff (or the provider's longer Retry-After carried by cause, see
// core.WithRetryAfter) when cause is retryable and attempts remain, else
// failed.
func (s EvidenceState) Fail(ctx context.Context, snap *Snapshot, c *Claim, cause error, now time.Time) error {
	code := core.CodeOf(cause)
	if code == "" {
		return core.Fail("evidence.failure.invalid")
	}
	retryable := core.IsRetryable(cause)
	nowMS := core.Millis(now)
	after := core.RetryAfterOf(cause)
	return s.finish(ctx, snap, c, now, func(l Lease) Lease { return l.failed(code, retryable, nowMS, after) })
}

// MarkApproved marks every evidence record of the job succeeded once its
// result is approved; a record bound to another result is a binding
// mismatch.
func (s EvidenceState) MarkApproved(ctx context.Context, snap *Snapshot, eventID, planID, jobID, resultSHA256 string, now time.Time) error {
	if !core.ValidToken(eventID) {
		return core.Fail(CodeEventIDInvalid)
	}
	if !core.ValidToken(planID) {
		return core.Fail(CodeEvidencePlanIDInvalid)
	}
	if !core.ValidToken(jobID) {
		return core.Fail(CodeEvidenceJobIDInvalid)
	}
	if !core.ValidSHA256(resultSHA256) {
		return core.Fail(CodeEvidenceResultInvalid)
	}
	var todo []*EvidenceRecord
	for _, rec := range snap.Evidence {
		if rec.EventID != eventID || rec.PlanID != planID || rec.JobID != jobID {
			continue
		}
		if err := ValidateEvidenceRecord(rec); err != nil {
			return err
		}
		if rec.ResultSHA256 != resultSHA256 {
			return core.Fail(CodeBindingMismatch)
		}
		if rec.Status != StateSucceeded {
			todo = append(todo, rec)
		}
	}
	nowMS := core.Millis(now)
	for _, rec := range todo {
		next := *rec
		next.Lease = rec.succeeded(nowMS)
		if _, err := s.put(ctx, snap, next, rec.Version, "evidence.mark_approved.lost", true); err != nil {
			return err
		}
	}
	return nil
}
