package release

import (
	"context"
	"errors"
	"slices"

	"github.com/localeflow/localeflow/core"
)

// TallyRecord is a tallied release's tally of approved jobs
// (docs/design.md "Release reads"): the ids of the plan's jobs whose
// approval has been stored, sorted. A job id joins it after its approval
// is stored (by the approving step, or by the settling of the approval's
// owed event after a crash) and never leaves it. It is a trigger, not a
// proof: the step whose write completes it reads the whole release, and
// the delivery is prepared only when every approval checks out there.
type TallyRecord struct {
	EventID string `dynamodbav:"event_id"`
	PlanID  string `dynamodbav:"plan_id"`
	// Jobs is the number of the plan's jobs.
	Jobs     int      `dynamodbav:"jobs"`
	Approved []string `dynamodbav:"approved"`
	// UpdatedMS is the time of the last write (the record's retention
	// starts from it, as the other records' from their last change).
	UpdatedMS int64 `dynamodbav:"updated_ms"`
	Version   int64 `dynamodbav:"v"`
}

func (r *TallyRecord) Key() (string, string) { return r.EventID, SKTally }
func (r *TallyRecord) RecordVersion() int64  { return r.Version }

// CodeTallyLost: the tally kept changing under a step's writes; the
// approval stands, its owed event's settling adds it later.
const CodeTallyLost = "release.tally.lost"

// tallyAttempts bounds the read-modify-write loop of one tally update
// (each lost race means another step's update went in).
const tallyAttempts = 8

// complete reports whether the tally holds every job of the plan.
func (r *TallyRecord) complete() bool { return r != nil && r.Jobs > 0 && len(r.Approved) >= r.Jobs }

// validTally checks a stored tally against the plan: same event and plan,
// the plan's job count, sorted distinct ids of the plan's jobs.
func validTally(t *TallyRecord, plan *PlanRecord) bool {
	if t == nil || t.EventID != plan.Event.EventID || t.PlanID != plan.PlanID || t.Jobs != len(plan.Jobs) || t.Version <= 0 ||
		len(t.Approved) > t.Jobs || !slices.IsSorted(t.Approved) {
		return false
	}
	for i, id := range t.Approved {
		if _, ok := plan.Job(id); !ok || (i > 0 && t.Approved[i-1] == id) {
			return false
		}
	}
	return true
}

// tally records that jobID's approval is stored in the tallied release of
// plan and returns the tally after the write. snap.Tally is the tally
// read, if any; state, when not nil, is the release's full state read
// (LoadState), which seeds a tally that does not exist yet. A tally is
// created only from a full read of the approvals stored (seeding): that
// is how approvals stored before it (by a step that died before its tally
// write, or a full walk whose tally write failed) are counted.
func (c *Coordinator) tally(ctx context.Context, snap *Snapshot, plan *PlanRecord, jobID string, state *Snapshot) (*TallyRecord, error) {
	eventID := plan.Event.EventID
	for range tallyAttempts {
		cur := snap.Tally
		next := TallyRecord{EventID: eventID, PlanID: plan.PlanID, Jobs: len(plan.Jobs), UpdatedMS: core.Millis(c.now())}
		var prev int64
		if cur != nil {
			if !validTally(cur, plan) {
				return nil, core.Fail(CodeTallyInvalid)
			}
			if _, found := slices.BinarySearch(cur.Approved, jobID); found {
				return cur, nil
			}
			next.Approved = append(slices.Clone(cur.Approved), jobID)
			prev = cur.Version
		} else {
			if state == nil {
				full, err := c.store.LoadState(ctx, eventID)
				if err != nil {
					return nil, storeRead(err)
				}
				state = &full
			}
			next.Approved = []string{jobID}
			for id, a := range state.Approvals {
				if _, ok := plan.Job(id); ok && a.PlanID == plan.PlanID && id != jobID {
					next.Approved = append(next.Approved, id)
				}
			}
		}
		slices.Sort(next.Approved)
		next.Version = prev + 1
		err := c.store.Put(ctx, &next, prev)
		if err == nil {
			snap.Tally = &next
			return &next, nil
		}
		if !errors.Is(err, ErrConflict) {
			return nil, core.Wrap(CodeStoreWriteFailed, true, err)
		}
		fresh, lerr := c.store.LoadKeys(ctx, eventID, SKTally)
		if lerr != nil {
			return nil, storeRead(lerr)
		}
		snap.Tally = fresh.Tally
		// A tally created meanwhile was seeded after our approval was
		// stored or is updated below; the state read stays valid for a
		// retry of the creation (nothing removes an approval's job).
	}
	return nil, core.Retry(CodeTallyLost)
}

// CodeTallyInvalid: the stored tally does not match its plan (tampered
// or corrupt). The step falls back to the full walk, which does not use
// it; the delivery never depends on it.
const CodeTallyInvalid = "release.tally.invalid"

// Input is what Ingest stored, for the step that follows it (RunInput).
type Input struct {
	EventID string
	Changed bool
	// named is the fresh completion of a succeeded job of a tallied
	// release: the plan, job record and result ingest read and wrote.
	named *namedInput
}

type namedInput struct {
	plan   *PlanRecord
	job    *JobRecord
	result *ResultRecord
	// claim is the job's evidence request created leased at ingest, before
	// the job record (claimAtIngest); source is the locale's source text
	// read for it. Both nil when ingest did not create it (the job record
	// then carries awaiting_claim and the step creates the request).
	claim  *Claim
	source *SourceRecord
}

// JobID is the job a named step runs ("" for a full walk).
func (in Input) JobID() string {
	if in.named == nil {
		return ""
	}
	return in.named.job.JobID
}

// RunInput runs the step that follows an ingested input: for the fresh
// completion of a succeeded job of a tallied release, the named step of
// that job (runNamed: it reads that locale's records, not the release);
// otherwise RunNextRelease (the full walk).
func (c *Coordinator) RunInput(ctx context.Context, in Input) (Outcome, error) {
	if in.named == nil {
		return c.RunNextRelease(ctx, in.EventID)
	}
	o, err := c.runNamed(ctx, in.EventID, in.named)
	return o, c.blockIfStuck(ctx, in.EventID, err)
}

// runNamed approves the named job's locale reading what it needs: the
// plan, job record and result ingest just read and wrote, every job record
// (one Query of job#: whether the release has ended, which jobs still wake
// as never claimed), the locale's source and the tally. Anything off the
// happy path (a source missing, a job record that is not the one ingest
// wrote, a tally that does not match the plan) runs the full walk instead
// (runNextRelease). After the approval is stored it is
// added to the tally; the write that completes the tally is followed by
// one full read that prepares the delivery when every approval checks out
// (prepareIfReady), as the full walk does.
func (c *Coordinator) runNamed(ctx context.Context, eventID string, in *namedInput) (Outcome, error) {
	if err := c.Validate(); err != nil {
		return Outcome{}, err
	}
	now, err := c.checkedNow()
	if err != nil {
		return Outcome{}, err
	}
	plan, jobID := in.plan, in.job.JobID
	job, ok := plan.Job(jobID)
	if plan.Event.EventID != eventID || len(plan.Jobs) == 0 || !ok || in.result == nil {
		return c.runNextReleaseClaimed(ctx, eventID, in.claim)
	}
	// Neither the job's approval nor its evidence record is read: for the
	// fresh completion of a job neither exists (a job succeeds once; a
	// step that died after creating either leaves its input to come back
	// as a duplicate, which runs the full walk), and both are created by
	// writes conditional on their absence, so one that does exist after
	// all is a lost race (retryable), never overwritten.
	keys := []string{SKSourcePrefix + jobID, SKTally}
	if in.source != nil {
		keys = keys[1:]
	}
	snap, err := c.store.LoadKeys(ctx, eventID, keys...)
	if err != nil {
		return Outcome{}, storeRead(err)
	}
	if in.source != nil {
		snap.Sources[jobID] = in.source
	}
	jobs, err := c.store.LoadPrefix(ctx, eventID, SKJobPrefix)
	if err != nil {
		return Outcome{}, storeRead(err)
	}
	snap.Plan, snap.Jobs = plan, jobs.Jobs
	snap.Results[jobID] = in.result
	if src := snap.Sources[jobID]; src != nil && src.ExpiresAt != 0 {
		// The texts' retention started: the release was delivered,
		// blocked or ended (docs/design.md "Retention"). The full walk
		// reads the whole state and does nothing for a release that
		// stays so (load).
		return c.runNextReleaseClaimed(ctx, eventID, in.claim)
	}
	if o, ok := c.ended(&snap, plan); ok {
		// Reported before the seal is checked, as load does; a late
		// input's wake entries leave the wake index.
		c.log().InfoContext(ctx, "release has ended, nothing to do", "event_id", eventID, "status", o.Status)
		full, err := c.store.LoadState(ctx, eventID)
		if err != nil {
			return Outcome{}, storeRead(err)
		}
		full.Plan = plan
		if err := c.park(ctx, &full); err != nil {
			return Outcome{}, err
		}
		o.Owed, _, _ = c.held(&full, plan, now, "")
		o.Ended = true
		return o, nil
	}
	current, err := c.checkPlan(ctx, plan)
	if err != nil {
		return Outcome{}, err
	}
	if j := snap.Jobs[jobID]; j == nil || j.Version < in.job.Version ||
		snap.Sources[jobID] == nil || (snap.Tally != nil && !validTally(snap.Tally, plan)) {
		// Not the fresh completion ingest wrote, or a retry: the full walk.
		return c.runNextReleaseClaimed(ctx, eventID, in.claim)
	}
	if !current {
		c.reseal(ctx, &snap)
		plan = snap.Plan
	}
	if ok, err := jobSucceeded(&snap, plan, job); err != nil || !ok {
		if err != nil {
			return Outcome{}, err
		}
		return c.runNextReleaseClaimed(ctx, eventID, in.claim)
	}
	o, err := c.approveSelected(ctx, &snap, plan, job, now, true, in.claim)
	if o.ApprovalID == "" || !o.Changed {
		return o, err
	}
	t, terr := c.tally(ctx, &snap, plan, jobID, nil)
	if terr != nil {
		// The approval stands; settling its owed event adds it.
		c.log().WarnContext(ctx, "approval stored, not tallied", "event_id", eventID, "job_id", jobID, "code", core.CodeOf(terr))
		return o, errors.Join(err, terr)
	}
	if err != nil {
		// Approved and tallied, then failed (the evidence lease's
		// finish): Step runs the release again at once.
		o.Tallied = !t.complete()
		return o, err
	}
	if !t.complete() {
		// The other locales run on their own inputs: no run at once.
		o.Tallied, o.Quiet = true, true
		return o, nil
	}
	// Step publishes and settles this approval first, then runs
	// the completing read (CompleteRelease): the delivery is prepared only
	// when no approval is owed.
	o.Tallied, o.Completes = true, true
	return o, nil
}

// CompleteRelease is the completing read of a release
// (afterTallyComplete), run by Step after it published and settled
// the approval of the named step whose tally write completed the tally
// (Outcome.Completes): it prepares the delivery when every approval
// checks out and none is owed; otherwise it reports the owed approvals
// (Outcome.Owed, Held) for Step to settle. A failure every later
// run would meet again blocks the release, as RunNextRelease does.
func (c *Coordinator) CompleteRelease(ctx context.Context, eventID string) (Outcome, error) {
	if err := c.Validate(); err != nil {
		return Outcome{}, err
	}
	o, err := c.afterTallyComplete(ctx, eventID, Outcome{})
	return o, c.blockIfStuck(ctx, eventID, err)
}

// afterTallyComplete is the one full read of a tallied release: the step
// whose tally write completed the tally reads the whole state and
// prepares the delivery when every approval checks out (prepareIfReady).
// When one does not (expired, replaced), the step reports its approval
// and Step runs the full walk at once, which approves again.
func (c *Coordinator) afterTallyComplete(ctx context.Context, eventID string, o Outcome) (Outcome, error) {
	full, plan, done, err := c.load(ctx, eventID, false)
	if err != nil {
		return o, err
	}
	if o.Status == "" {
		// CompleteRelease: no approval of this step to report.
		o = outcome(OutcomeWaiting, full.Plan)
		if done != nil {
			o = *done
		}
	}
	if done != nil {
		o.Tallied, o.Quiet = true, true
		o.Owed = done.Owed
		return o, nil
	}
	c.settleAwaitingDelivery(ctx, full)
	if full.Delivery != nil {
		// Prepared by another step: it hands it on.
		o.Tallied, o.Quiet = true, true
		return o, nil
	}
	now := c.now()
	// As the full walk does before it prepares the delivery: the evidence
	// of every approved job is marked succeeded (a step whose approval
	// was stored and whose evidence lease was not finished leaves it
	// leased; once the delivery exists no run walks the jobs again).
	state := c.evidenceState()
	for _, job := range plan.Jobs {
		if ok, err := jobSucceeded(full, plan, job); err != nil || !ok {
			continue
		}
		approval, err := c.lookupApproval(full, plan, job, now)
		if err != nil || owedByEvidence(full, approval) {
			// Owed (compact): settled after its publish, never marked
			// here (prepareIfReady reports it and holds the delivery).
			continue
		}
		if err := state.MarkApproved(ctx, full, plan.Event.EventID, plan.PlanID, job.JobID, approval.ResultSHA256, now); err != nil {
			return o, err
		}
	}
	next, err := c.prepareIfReady(ctx, full, plan, now, o)
	if err != nil {
		return o, err
	}
	next.Tallied = true
	return next, nil
}

// tallyCompletes reports whether the tally read holds every job of the
// plan but jobID: the approval of jobID then completes the plan, and it is
// stored marked AwaitingDelivery (it wakes the release until the delivery
// is prepared), as the full walk marks the approval completesPlan finds.
func tallyCompletes(t *TallyRecord, plan *PlanRecord, jobID string) bool {
	if t == nil {
		return len(plan.Jobs) == 1
	}
	n := len(t.Approved)
	if _, found := slices.BinarySearch(t.Approved, jobID); found {
		n--
	}
	return n >= len(plan.Jobs)-1
}

// tallyAfterWalk adds an approval stored by the full walk to the tally of
// a tallied release (state is the walk's full read, which seeds a tally
// that does not exist yet). A failure leaves the approval's owed event to
// add it when it is settled.
func (c *Coordinator) tallyAfterWalk(ctx context.Context, state *Snapshot, plan *PlanRecord, jobID string) bool {
	t, err := c.store.LoadKeys(ctx, plan.Event.EventID, SKTally)
	if err == nil {
		_, err = c.tally(ctx, &t, plan, jobID, state)
	}
	if err != nil {
		c.log().WarnContext(ctx, "approval stored, not tallied", "event_id", plan.Event.EventID, "job_id", jobID, "code", core.CodeOf(err))
		return false
	}
	return true
}
