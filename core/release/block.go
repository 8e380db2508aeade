package release

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/localeflow/localeflow/core"
)

// stuckCodes are final errors that come from the stored records
// themselves, so every later run of the release meets them again: a record
// failed its integrity check, an evidence request is used up, a prepared
// delivery can no longer be sent, an evidence record was created under
// another LOCALEFLOW_EVIDENCE_MAX_ATTEMPTS (the reference blocks it too).
// Transient final errors (a lease that ran
// out or was lost, the operation guard, configuration) are not among them.
var stuckCodes = map[string]bool{
	CodePlanSealInvalid: true, CodePlanInvalid: true, CodeResultJobMismatch: true, CodeQueuePlanMismatch: true,
	CodeApprovalInvalid: true, CodeApprovalResultMismatch: true, CodeBindingMismatch: true,
	CodeEvidenceStateInvalid: true, CodeAttemptPolicyChanged: true, CodeAlreadyConsumed: true, CodeAttemptsExhausted: true,
	CodeDeliveryFailed: true, CodeDeliveryInvalid: true, codeDeliveryBundleMismatch: true,
}

// stuckCode reports whether a final step error blocks the release for good.
func stuckCode(code string) bool {
	return stuckCodes[code] || strings.HasPrefix(code, "result.") || strings.HasPrefix(code, "cms.approval.")
}

// stuckEvidence reports whether the snapshot holds a current-revision
// evidence request that failed for good while its job has no current
// approval: the release selects that job again and again, and its request
// (a hash of the same binding) can only answer attempts_exhausted.
func (c *Coordinator) stuckEvidence(snap *Snapshot, now time.Time) bool {
	plan := snap.Plan
	if plan == nil {
		return false
	}
	for _, e := range snap.Evidence {
		if e.Status != StateFailed || e.EvidenceRevision != c.cfg.EvidenceRevision {
			continue
		}
		job, ok := plan.Job(e.JobID)
		if !ok {
			continue
		}
		if _, err := c.lookupApproval(snap, plan, job, now); err != nil {
			return true
		}
	}
	return false
}

// stuckDelivery reports whether the snapshot holds a prepared delivery
// that failed for good: every later step of the release can only answer
// cms.delivery.failed. The step whose send used up the last attempt ends
// with the CMS's own code (cms.http_503, final): without this check the
// release was blocked only by a later step, after an operator may already
// have acknowledged the failed delivery (dev/proof/sim seed 955).
func stuckDelivery(snap *Snapshot) bool {
	return snap.Delivery != nil && snap.Delivery.Status == StateFailed
}

// blockIfStuck ends a step that failed for good: when the failure is one
// every later run would meet again, the release is marked blocked and
// leaves the wake index (block). It returns stepErr unchanged once the
// release is blocked (or when the failure does not block it).
//
// A block that could not be written (the state read failed, a write
// failed, release.block.lost) is retried, not left to the sweep: the
// stuck records may already be out of the wake index (a failed evidence
// or delivery record is in the attention index only, a cleared
// awaiting_claim), so nothing else would ever run the release again, and a
// later input (a late duplicate, a redrive) would block it days later,
// after an operator acknowledged the failure (dev/proof/sim seed 62877).
// The step then returns the block's retryable error joined with stepErr:
// the message returns and its next receive runs the step again, which is
// idempotent and meets the same stuck error (or the evidence request's
// evidence.attempts_exhausted) and blocks. The retries are the queue's
// (its redrive policy moves the message to the DLQ, alarmed, after 5
// receives); every one logs the step's final code with the block's code
// (ERROR "release not blocked").
func (c *Coordinator) blockIfStuck(ctx context.Context, eventID string, stepErr error) error {
	if stepErr == nil || core.IsRetryable(stepErr) || !core.ValidToken(eventID) || c.Validate() != nil {
		return stepErr
	}
	code := core.CodeOf(stepErr)
	if !core.ValidErrorCode(code) {
		return stepErr
	}
	snap, err := c.store.LoadState(ctx, eventID)
	if err != nil {
		c.log().ErrorContext(ctx, "release not blocked: read failed, the step is retried", "event_id", eventID, "code", code,
			"block_code", CodeStoreReadFailed)
		return errors.Join(storeRead(err), stepErr)
	}
	now := c.now()
	if !stuckCode(code) && !c.stuckEvidence(&snap, now) && !stuckDelivery(&snap) {
		return stepErr
	}
	if err := c.block(ctx, eventID, &snap, code, now); err != nil {
		c.log().ErrorContext(ctx, "release not blocked, the step is retried", "event_id", eventID, "code", code,
			"block_code", core.CodeOf(err))
		return errors.Join(err, stepErr)
	}
	return stepErr
}

// Blocked reports whether the event's release is blocked for good (its
// blocked record exists): the release has ended and its texts start their
// retention (docs/design.md "Retention"). A read failure is
// coordinator.store.read_failed (retryable).
func (c *Coordinator) Blocked(ctx context.Context, eventID string) (bool, error) {
	if !core.ValidToken(eventID) {
		return false, core.Fail(CodeEventIDInvalid)
	}
	snap, err := c.store.LoadKeys(ctx, eventID, SKBlocked)
	if err != nil {
		return false, storeRead(err)
	}
	return snap.Blocked != nil, nil
}

// CodeBlockLost: a record changed while the release was being blocked;
// the next run or sweep blocks it again.
const CodeBlockLost = "release.block.lost"

// CodeReleaseBlocked: a deliver step met the release's blocked record and
// sent nothing (final; the release stays blocked until an operator removes
// the record).
const CodeReleaseBlocked = "release.blocked"

// block marks the release blocked for good with code (a blocked record in
// the attention index, which health shows) and takes every other record of
// the release out of the wake index: evidence and delivery records are
// parked, a never-claimed job and an approval awaiting delivery lose their
// marks. Writes go in transactions of at most MaxWrites records, each
// conditional on the version read; an already blocked release only parks
// what still wakes.
func (c *Coordinator) block(ctx context.Context, eventID string, snap *Snapshot, code string, now time.Time) error {
	writes := c.parkWrites(snap)
	if snap.Blocked == nil {
		writes = append([]Write{{Rec: &BlockedRecord{EventID: eventID, Code: code, BlockedMS: core.Millis(now), Version: 1}}}, writes...)
	}
	if err := c.putParked(ctx, writes, CodeBlockLost); err != nil {
		return err
	}
	if len(writes) > 0 {
		c.log().WarnContext(ctx, "release blocked", "event_id", eventID, "code", code, "parked", len(writes))
	}
	return nil
}

// stillBlocked ends the walk of a blocked release whose stored state
// still holds the failure it met (a current-revision evidence request
// failed for a job without a current approval, a prepared delivery
// failed) with the error the walk would meet for it
// (evidence.attempts_exhausted, cms.delivery.failed), before any job is
// selected: a late locale's input neither calls the evidence provider nor
// approves anything on it, and what that input left in the wake index
// leaves it (park). A blocked release whose failure the state does not
// show, or no longer shows (a new evidence revision), is walked as any
// other: it meets its error again, or goes on.
func (c *Coordinator) stillBlocked(ctx context.Context, snap *Snapshot, now time.Time) error {
	if snap.Blocked == nil {
		return nil
	}
	code := ""
	switch {
	case stuckDelivery(snap):
		code = CodeDeliveryFailed
	case c.stuckEvidence(snap, now):
		code = CodeAttemptsExhausted
	default:
		return nil
	}
	if err := c.park(ctx, snap); err != nil {
		return err
	}
	c.log().InfoContext(ctx, "release is blocked, nothing to do", "event_id", snap.Plan.Event.EventID, "code", code,
		"blocked_code", snap.Blocked.Code)
	return core.Fail(code)
}

// CodeParkLost: a record changed while an ended or blocked release was
// taken out of the wake index; the next run parks it.
const CodeParkLost = "release.park.lost"

// park takes every record of an ended or blocked release out of the wake
// index (parkWrites): a late input's evidence lease or awaiting_claim
// mark, nothing else once parked. Nothing is written when nothing wakes.
func (c *Coordinator) park(ctx context.Context, snap *Snapshot) error {
	writes := c.parkWrites(snap)
	if err := c.putParked(ctx, writes, CodeParkLost); err != nil {
		return err
	}
	if len(writes) > 0 && snap.Plan != nil {
		c.log().InfoContext(ctx, "release records parked", "event_id", snap.Plan.Event.EventID, "parked", len(writes))
	}
	return nil
}

// parkWrites are the writes that take the snapshot's records out of the
// wake index: evidence and delivery records are parked, a never-claimed
// job and an approval awaiting delivery lose their marks. The evidence
// record of an owed compact approval keeps its wake while its event can
// still be published and settled: it is what runs the release until then
// (docs/design.md "Owed events of compact approvals"). One whose approval
// does not verify or whose record fails the record checks never will be:
// it is parked too.
func (c *Coordinator) parkWrites(snap *Snapshot) []Write {
	var writes []Write
	park := func(rec Record) {
		if w, ok := parked(rec); ok {
			writes = append(writes, w)
		}
	}
	owed := map[string]bool{}
	for _, a := range snap.Approvals {
		owed[a.RequestID] = owed[a.RequestID] || c.publishableOwed(snap, a)
	}
	for _, e := range snap.Evidence {
		if !owed[e.RequestID] {
			park(e)
		}
	}
	for _, j := range snap.Jobs {
		park(j)
	}
	for _, a := range snap.Approvals {
		park(a)
	}
	if snap.Delivery != nil {
		park(snap.Delivery)
	}
	return writes
}

// publishableOwed reports whether the snapshot's approval a is owed and
// its event can still be published and settled: its token opens and names
// its plan job, and its evidence record passes the settle's checks.
func (c *Coordinator) publishableOwed(snap *Snapshot, a *ApprovalRecord) bool {
	if !owedByEvidence(snap, a) || !evidenceSettles(a, snap.Evidence[a.RequestID]) || snap.Plan == nil || a.PlanID != snap.Plan.PlanID {
		return false
	}
	job, ok := snap.Plan.Job(a.JobID)
	return ok && c.approvalMade(a, snap.Plan, job)
}

// putParked writes writes in transactions of at most MaxWrites records,
// each conditional on the version read; a lost race is lostCode.
func (c *Coordinator) putParked(ctx context.Context, writes []Write, lostCode string) error {
	for start := 0; start < len(writes); start += MaxWrites {
		if err := c.store.PutAll(ctx, writes[start:min(start+MaxWrites, len(writes))]...); err != nil {
			if errors.Is(err, ErrConflict) {
				return core.Wrap(lostCode, true, err)
			}
			return core.Wrap(CodeStoreWriteFailed, true, err)
		}
	}
	return nil
}

// parked returns the write that takes rec out of the wake index, if it is
// in it.
func parked(rec Record) (Write, bool) {
	if _, wakes, _, _ := Wake(rec); !wakes {
		return Write{}, false
	}
	switch r := rec.(type) {
	case *EvidenceRecord:
		n := *r
		n.Parked, n.Version = true, r.Version+1
		return Write{Rec: &n, Prev: r.Version}, true
	case *DeliveryRecord:
		n := *r
		n.Parked, n.Version = true, r.Version+1
		return Write{Rec: &n, Prev: r.Version}, true
	case *JobRecord:
		n := *r
		n.AwaitingClaim, n.Version = false, r.Version+1
		return Write{Rec: &n, Prev: r.Version}, true
	case *ApprovalRecord:
		n := *r
		n.AwaitingDelivery, n.Version = false, r.Version+1
		return Write{Rec: &n, Prev: r.Version}, true
	}
	return Write{}, false
}
