package release

import (
	"context"
	"errors"
	"time"

	"github.com/localeflow/localeflow/core"
)

// Ingest verifies a signed input event and stores it. Re-delivery of the
// same payload changes nothing (changed = false); a different payload for
// an already stored plan or succeeded job is refused. A job may arrive
// before its plan: it is stored and checked against the plan when a run
// reads it.
func (c *Coordinator) Ingest(ctx context.Context, detailType string, detail []byte) (eventID string, changed bool, err error) {
	in, err := c.ingestInput(ctx, detailType, detail, false)
	return in.EventID, in.Changed, err
}

// IngestInput is Ingest, returning what the step that follows needs
// (RunInput): the fresh completion of a succeeded job of a tallied release
// names its job, with the plan, job record and result ingest read and
// wrote.
//
// For such a completion, ingest also creates the job's evidence request
// leased (its first attempt claimed for that step) before the job record,
// which is then written without awaiting_claim (claimAtIngest): the caller
// must run the step (RunInput) at once. Ingest, which returns no step,
// never does.
func (c *Coordinator) IngestInput(ctx context.Context, detailType string, detail []byte) (Input, error) {
	return c.ingestInput(ctx, detailType, detail, true)
}

// IngestInputUnclaimed is IngestInput without the evidence request created
// at ingest (the job record keeps awaiting_claim): for a caller that will
// not run the step at once (too little time left for an evidence lease).
func (c *Coordinator) IngestInputUnclaimed(ctx context.Context, detailType string, detail []byte) (Input, error) {
	return c.ingestInput(ctx, detailType, detail, false)
}

func (c *Coordinator) ingestInput(ctx context.Context, detailType string, detail []byte, claim bool) (Input, error) {
	ev, err := c.parseEvent(ctx, detailType, detail)
	if err != nil {
		return Input{}, err
	}
	now, err := c.checkedNow()
	if err != nil {
		return Input{}, err
	}
	in := Input{EventID: ev.EventID()}
	if ev.Plan != nil {
		in.Changed, err = c.ingestPlan(ctx, ev.Plan, now)
	} else {
		in.Changed, in.named, err = c.ingestJob(ctx, ev.Job, now, claim)
	}
	return in, err
}

func storeWrite(err error) error {
	if errors.Is(err, ErrConflict) {
		return err
	}
	return core.Wrap("coordinator.store.write_failed", true, err)
}

func (c *Coordinator) ingestPlan(ctx context.Context, p *Plan, now time.Time) (bool, error) {
	snap, err := c.store.Load(ctx, p.Event.EventID)
	if err != nil {
		return false, core.Wrap(CodeStoreReadFailed, true, err)
	}
	if snap.Plan != nil {
		if snap.Plan.PayloadSHA256 == p.PayloadSHA256 {
			return false, nil
		}
		return false, core.Fail(CodePlanConflict)
	}
	// Source texts first: once the plan record exists, every text it
	// refers to exists too.
	for _, job := range p.Jobs {
		if old := snap.Sources[job.JobID]; old != nil {
			if old.SourceSHA256 != job.SourceSHA256 {
				return false, core.Fail(CodePlanConflict)
			}
			continue
		}
		src := SourceRecord{EventID: p.Event.EventID, JobID: job.JobID, SourceSHA256: job.SourceSHA256, Text: p.SourceTexts[job.JobID], Version: 1}
		if err := c.store.Put(ctx, &src, 0); err != nil {
			return false, storeWrite(err)
		}
	}
	rec := PlanRecord{Event: p.Event, PlanID: p.PlanID, Jobs: p.Jobs, PayloadSHA256: p.PayloadSHA256, ReceivedMS: core.Millis(now), Version: 1,
		Tallied: c.cfg.Tally, Compact: c.cfg.Tally && c.cfg.CompactApprovals}
	// Sealed with the current event key (the first of the set in use).
	keys, err := c.eventKeys(ctx)
	if err != nil {
		return false, err
	}
	seal, err := planSeal(keys[0], &rec)
	if err != nil {
		return false, err
	}
	rec.Seal, rec.SealKey = seal, SealKeyID(keys[0])
	if err := c.store.Put(ctx, &rec, 0); err != nil {
		if errors.Is(err, ErrConflict) {
			// A concurrent delivery of the same event won: same payload is
			// a no-op.
			// A read that fails here says nothing about the plan: retry
			// (a final plan.conflict would quarantine a valid input).
			fresh, lerr := c.store.Load(ctx, p.Event.EventID)
			if lerr != nil {
				return false, core.Wrap(CodeStoreReadFailed, true, lerr)
			}
			if fresh.Plan != nil && fresh.Plan.PayloadSHA256 == p.PayloadSHA256 {
				return false, nil
			}
			return false, core.Fail(CodePlanConflict)
		}
		return false, storeWrite(err)
	}
	c.log().InfoContext(ctx, "plan stored", "event_id", p.Event.EventID, "plan_id", p.PlanID, "jobs", len(p.Jobs))
	return true, nil
}

func (c *Coordinator) ingestJob(ctx context.Context, j *JobCompletion, now time.Time, claim bool) (bool, *namedInput, error) {
	// The plan, the job's record and its result: nothing of the other
	// locales (docs/design.md "Release reads").
	snap, err := c.store.LoadKeys(ctx, j.EventID, SKPlan, SKJobPrefix+j.JobID, SKResultPrefix+j.JobID)
	if err != nil {
		return false, nil, core.Wrap(CodeStoreReadFailed, true, err)
	}
	if snap.Plan != nil {
		if _, ok := snap.Plan.Job(j.JobID); !ok || snap.Plan.PlanID != j.PlanID {
			return false, nil, core.Fail("coordinator.job.plan_mismatch")
		}
	}
	old := snap.Jobs[j.JobID]
	if old != nil {
		if old.PayloadSHA256 == j.PayloadSHA256 {
			return false, nil, nil
		}
		if old.Status == JobSucceeded {
			return false, nil, core.Fail(CodeJobConflict)
		}
	}
	rec := JobRecord{
		EventID: j.EventID, PlanID: j.PlanID, JobID: j.JobID, Status: j.Status, ErrorCode: j.ErrorCode,
		PayloadSHA256: j.PayloadSHA256, ReceivedMS: core.Millis(now), AwaitingClaim: j.Status == JobSucceeded,
	}
	var prev int64
	if old != nil {
		prev = old.Version
	}
	rec.Version = prev + 1
	var named *namedInput
	if j.Result != nil {
		// The result first, written once: the job record that accepts it
		// follows. A stored result is never replaced by another one, so
		// the job record can only ever name the stored result (the
		// result reviewed is the one the job record accepted) without a
		// transaction of the two items (docs/design.md "Ingest: plan and
		// job events").
		sha := core.SHA256Hex(j.ResultJSON)
		rec.ResultSHA256 = sha
		res := ResultRecord{EventID: j.EventID, PlanID: j.PlanID, JobID: j.JobID, ResultSHA256: sha, ResultJSON: string(j.ResultJSON)}
		if err := c.putResultOnce(ctx, snap.Results[j.JobID], &res); err != nil {
			return false, nil, err
		}
		if rec.Status == JobSucceeded && snap.Plan != nil && snap.Plan.Tallied {
			named = &namedInput{plan: snap.Plan, job: &rec, result: &res}
			// The evidence request's first record, created leased before
			// the job record: its lease expiry is the job's wake entry, so
			// the job record needs no awaiting_claim (docs/design.md
			// "Release wake entries").
			if claim {
				var walk bool
				named.claim, named.source, walk = c.claimAtIngest(ctx, snap.Plan, &rec, &res, now)
				if walk {
					named = nil
				} else if named.claim != nil {
					rec.AwaitingClaim = false
				}
			}
		}
	}
	if err := c.store.Put(ctx, &rec, prev); err != nil {
		return false, nil, storeWrite(err)
	}
	c.log().InfoContext(ctx, "job stored", "event_id", j.EventID, "job_id", j.JobID, "status", j.Status)
	return true, named, nil
}

// putResultOnce stores a succeeded job's result before its job record. A
// result item that exists while the job record does not accept it yet is
// left by an ingestion that has not written its job record (still
// running, or crashed and retried by its message): the same result is
// written again (its version checked: a text expiry set meanwhile is
// cleared, the text is new input), a different one is refused
// (coordinator.job.conflict), never written over it — otherwise that
// ingestion's job record could name a result that is no longer stored.
// The first write is conditional on the item not existing, so of two
// racing different results exactly one is stored.
func (c *Coordinator) putResultOnce(ctx context.Context, cur *ResultRecord, res *ResultRecord) error {
	var prev int64
	if cur != nil {
		if cur.ResultSHA256 != res.ResultSHA256 || cur.PlanID != res.PlanID {
			return core.Fail(CodeJobConflict)
		}
		prev = cur.Version
	}
	res.Version = prev + 1
	if err := c.store.Put(ctx, res, prev); err != nil {
		return storeWrite(err)
	}
	return nil
}

// claimAtIngest creates the evidence request of a succeeded job of a
// tallied release, leased (its first attempt claimed for the step that
// follows, runNamed), before the job record is written: from then on the
// lease's wake entry covers the job, so the job record is written without
// awaiting_claim and never needs the clearing write (docs/design.md
// "Release wake entries", issue 29). It reads the locale's source (the
// named step would read it anyway). Anything off that path returns no
// claim and the job record keeps awaiting_claim: a missing source, a
// result that does not validate (the step reports its result.* code), a
// failed write. An evidence record that exists already (an earlier
// ingestion of this input died after creating it) means walk: the step
// that follows is the full walk, which reads it.
func (c *Coordinator) claimAtIngest(ctx context.Context, plan *PlanRecord, rec *JobRecord, res *ResultRecord, now time.Time) (*Claim, *SourceRecord, bool) {
	job, ok := plan.Job(rec.JobID)
	if !ok {
		return nil, nil, false
	}
	texts, err := c.store.LoadKeys(ctx, rec.EventID, SKSourcePrefix+rec.JobID)
	if err != nil {
		return nil, nil, false
	}
	src := texts.Sources[rec.JobID]
	if src == nil {
		return nil, nil, false
	}
	snap := NewSnapshot()
	snap.Plan = plan
	accepted := *rec
	accepted.AwaitingClaim = false
	snap.Jobs[rec.JobID] = &accepted
	snap.Results[rec.JobID], snap.Sources[rec.JobID] = res, src
	result, resultSHA, sourceText, err := validatedResult(&snap, plan, job)
	if err != nil {
		return nil, src, false
	}
	req, err := BuildEvidenceRequest(plan.Event.EventID, plan.PlanID, job, sourceText, result, resultSHA, c.cfg.EvidenceRevision)
	if err != nil {
		return nil, src, false
	}
	claim, err := c.evidenceState().Claim(ctx, &snap, req, c.cfg.WorkerID, now, c.cfg.EvidenceLease, c.cfg.EvidenceMaxAttempts)
	if err != nil || claim == nil {
		c.log().InfoContext(ctx, "evidence not created at ingest", "event_id", rec.EventID, "job_id", rec.JobID, "code", core.CodeOf(err))
		return nil, src, errors.Is(err, ErrConflict)
	}
	return claim, src, false
}
