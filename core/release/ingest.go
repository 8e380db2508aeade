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
		return false, storeRead(err)
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
	rec := PlanRecord{Event: p.Event, PlanID: p.PlanID, Jobs: p.Jobs, PayloadSHA256: p.PayloadSHA256, ReceivedMS: core.Millis(now), Version: 1}
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
				return false, storeRead(lerr)
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
	// The plan only: nothing of the other locales (docs/design.md "Release
	// reads"), and not the job's own record and result either when the
	// input can be written first (below).
	snap, err := c.store.LoadKeys(ctx, j.EventID, SKPlan)
	if err != nil {
		return false, nil, storeRead(err)
	}
	plan := snap.Plan
	if plan != nil {
		if _, ok := plan.Job(j.JobID); !ok || plan.PlanID != j.PlanID {
			return false, nil, core.Fail("coordinator.job.plan_mismatch")
		}
	}
	// Write first, read on conflict (issue 29): the first input of a job
	// finds neither its job record nor its result, and AWS bills each of
	// those empty reads a full read unit. So a fresh input is written as
	// if neither exists — every write conditional on the item's absence —
	// and only a write that finds its item (a duplicate, an earlier job
	// event, a racing copy) reads the two records and goes on as from a
	// read (docs/design.md "Ingest: plan and job events"). A failed job
	// (no result) is always written first. A succeeded one only on the
	// path that reads the locale's source anyway (the evidence request
	// created at ingest), and only while that source holds no text expiry:
	// texts expire only once the release ended, so a live source means the
	// result was never deleted by its TTL, and a result create that
	// succeeds means no earlier succeeded job record exists. Without that
	// check, a late duplicate of a delivered release whose result text had
	// expired would store the text again, with no expiry.
	var (
		src       *SourceRecord
		srcLoaded bool
		fresh     = j.Result == nil
	)
	if j.Result != nil && claim && plan != nil && j.Status == JobSucceeded {
		src, srcLoaded = c.loadSource(ctx, j.EventID, j.JobID)
		fresh = src != nil && src.ExpiresAt == 0
	}
	var (
		old *JobRecord
		cur *ResultRecord
	)
	if !fresh {
		if old, cur, err = c.loadJob(ctx, j); err != nil {
			return false, nil, err
		}
	}
	var (
		rereads int           // reads after a refused write (maxIngestRereads)
		mine    *ResultRecord // the result this ingestion created
		named   *namedInput
		tried   bool // the evidence request was tried (claimAtIngest) already
	)
	for {
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
			switch {
			case mine != nil && cur != nil && *cur == *mine:
				// Stored as this ingestion created it: not written again.
				res = *mine
			default:
				if err := c.putResultOnce(ctx, cur, &res); err != nil {
					if errors.Is(err, ErrConflict) && rereads < maxIngestRereads {
						// The result exists (written first and found it, or
						// a racing copy created it since the read): read,
						// and go on as from a read.
						fresh = false
						rereads++
						if old, cur, err = c.loadJob(ctx, j); err != nil {
							return false, nil, err
						}
						continue
					}
					return false, nil, err
				}
				if fresh {
					created := res
					mine = &created
				}
			}
			if rec.Status == JobSucceeded && plan != nil {
				if !tried {
					named = &namedInput{plan: plan, job: &rec, result: &res}
				} else if named != nil {
					named.job, named.result = &rec, &res
				}
				// The evidence request's first record, created leased before
				// the job record: its lease expiry is the job's wake entry, so
				// the job record needs no awaiting_claim (docs/design.md
				// "Release wake entries"). Tried once per ingestion: a job
				// record found after it (the write below refused) is written
				// on top of the request already made.
				if claim && !tried {
					tried = true
					var walk bool
					named.claim, named.source, walk = c.claimAtIngest(ctx, plan, &rec, &res, src, srcLoaded, now)
					if walk {
						named = nil
					}
				}
				if named != nil && named.claim != nil {
					rec.AwaitingClaim = false
				}
			}
		}
		if err := c.store.Put(ctx, &rec, prev); err != nil {
			if errors.Is(err, ErrConflict) && rereads < maxIngestRereads {
				// The job record exists or moved since the read (an
				// earlier event of the job, a racing copy): read, and go
				// on as from a read.
				fresh = false
				rereads++
				if old, cur, err = c.loadJob(ctx, j); err != nil {
					return false, nil, err
				}
				continue
			}
			return false, nil, storeWrite(err)
		}
		c.log().InfoContext(ctx, "job stored", "event_id", j.EventID, "job_id", j.JobID, "status", j.Status)
		return true, named, nil
	}
}

// maxIngestRereads bounds the reads one job ingestion makes after a
// refused write (each refusal means another writer's write went in: a
// racing copy, an earlier event of the job); past it the conflict is
// returned, retryable, and the message comes back.
const maxIngestRereads = 4

// loadJob reads a job input's own job record and, for a succeeded job
// whose job record does not decide the input already (the same payload: a
// no-op; a succeeded job: a conflict), its result.
func (c *Coordinator) loadJob(ctx context.Context, j *JobCompletion) (*JobRecord, *ResultRecord, error) {
	snap, err := c.store.LoadKeys(ctx, j.EventID, SKJobPrefix+j.JobID)
	if err != nil {
		return nil, nil, storeRead(err)
	}
	old := snap.Jobs[j.JobID]
	if j.Result == nil || (old != nil && (old.PayloadSHA256 == j.PayloadSHA256 || old.Status == JobSucceeded)) {
		return old, nil, nil
	}
	res, err := c.store.LoadKeys(ctx, j.EventID, SKResultPrefix+j.JobID)
	if err != nil {
		return nil, nil, storeRead(err)
	}
	return old, res.Results[j.JobID], nil
}

// loadSource reads a job's source record; loaded is false when the read
// failed (src is then nil).
func (c *Coordinator) loadSource(ctx context.Context, eventID, jobID string) (src *SourceRecord, loaded bool) {
	texts, err := c.store.LoadKeys(ctx, eventID, SKSourcePrefix+jobID)
	if err != nil {
		return nil, false
	}
	return texts.Sources[jobID], true
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
// "Release wake entries", issue 29). It uses the locale's source ingest
// read (src, when srcLoaded), or reads it (the named step would read it
// anyway). Anything off that path returns no
// claim and the job record keeps awaiting_claim: a missing source, a
// result that does not validate (the step reports its result.* code), a
// failed write. An evidence record that exists already (an earlier
// ingestion of this input died after creating it) means walk: the step
// that follows is the full walk, which reads it.
func (c *Coordinator) claimAtIngest(ctx context.Context, plan *PlanRecord, rec *JobRecord, res *ResultRecord, src *SourceRecord, srcLoaded bool, now time.Time) (*Claim, *SourceRecord, bool) {
	job, ok := plan.Job(rec.JobID)
	if !ok {
		return nil, nil, false
	}
	if !srcLoaded {
		// Not read yet by ingest (or that read failed): read it here.
		if src, srcLoaded = c.loadSource(ctx, rec.EventID, rec.JobID); !srcLoaded {
			return nil, nil, false
		}
	}
	if src == nil {
		return nil, nil, false
	}
	if src.ExpiresAt != 0 {
		// The texts' retention started: the release was delivered,
		// blocked or ended. No evidence request for it; the step that
		// follows is the full walk, which does nothing for a release
		// that stays so.
		return nil, src, false
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
