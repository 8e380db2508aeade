package release

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
)

// CodeRepublishRead: a redelivered message could not read the stored
// state to re-publish; retryable (the message is redelivered).
const CodeRepublishRead = "coordinator.republish.read_failed"

// Publisher publishes the coordinator's two kinds of output events:
// localeflow.release.approved and the delivery events (delivery.ready,
// delivery.delivered by the detail's status).
type Publisher interface {
	PublishApproved(ctx context.Context, d contract.ReleaseApproved) error
	PublishDelivery(ctx context.Context, d contract.Delivery) error
}

// Bus is an event bus (adapters/eventbus.Publisher).
type Bus interface {
	Publish(ctx context.Context, detailType string, detail any) error
}

// BusPublisher publishes the output events on a Bus with the contract's
// detail types.
type BusPublisher struct{ Bus Bus }

// PublishApproved publishes localeflow.release.approved.
func (p BusPublisher) PublishApproved(ctx context.Context, d contract.ReleaseApproved) error {
	if err := p.Bus.Publish(ctx, contract.DetailReleaseApproved, d); err != nil {
		return fmt.Errorf("publish approved %s: %w", d.EventID, err)
	}
	return nil
}

// PublishDelivery publishes delivery.ready or delivery.delivered by the
// detail's status; other statuses publish nothing.
func (p BusPublisher) PublishDelivery(ctx context.Context, d contract.Delivery) error {
	detailType := ""
	switch d.Status {
	case OutcomeDeliveryReady:
		detailType = contract.DetailDeliveryReady
	case OutcomeDelivered:
		detailType = contract.DetailDeliveryDelivered
	default:
		return nil
	}
	if err := p.Bus.Publish(ctx, detailType, d); err != nil {
		return fmt.Errorf("publish %s %s: %w", detailType, d.EventID, err)
	}
	return nil
}

// TextExpirer sets the expiry of an event's text records that have none
// (a text whose expiry is set keeps it).
type TextExpirer interface {
	ExpireTexts(ctx context.Context, eventID string, at time.Time) error
}

// Ports are what Step publishes, expires and logs through.
type Ports struct {
	Publisher Publisher
	// Texts sets the TTL of the event's texts once its release is
	// delivered or blocked for good; nil keeps them.
	Texts TextExpirer
	// TextRetention: 0 means DefaultTextRetention.
	TextRetention time.Duration
	// Log: nil is the coordinator's logger.
	Log *slog.Logger
	// HandOn, when set, says the step may not start here (the
	// invocation's time is short): Step, after any re-publishing,
	// schedules it at once for a fresh invocation instead.
	HandOn func(ctx context.Context) bool
	// Observe, when set, sees the run's own outcome and error (metrics).
	Observe func(ctx context.Context, kind string, o Outcome, err error)
}

// StepRequest names one release step: a run (contract.KindReleaseRun) or
// a delivery step (contract.KindReleaseDeliver) of the event; Input, when
// set, runs the input's named step instead (RunInput). Redo marks a
// redelivered message: the stored state's owed events are published
// again first.
type StepRequest struct {
	Kind    string
	EventID string
	Redo    bool
	Input   *Input
}

// ApprovedEvent is a release.approved event a step publishes and then
// settles (SettleApproval with Tally).
type ApprovedEvent struct {
	Event contract.ReleaseApproved
	Tally bool
}

// OwedEvents are the events of the owed approvals the outcome reports
// (Owed), published and settled first, with the tally; none without the
// outcome's event and plan ids.
func (o Outcome) OwedEvents() []ApprovedEvent {
	if o.EventID == "" || o.PlanID == "" {
		return nil
	}
	var out []ApprovedEvent
	for _, a := range o.Owed {
		out = append(out, ApprovedEvent{Event: approvedEvent(o.EventID, o.PlanID, a.JobID, a.TargetLocale, a.ApprovalID), Tally: true})
	}
	return out
}

// OwnEvent is the event of the approval the step stored (Changed, with an
// approval id), published after the owed ones; its settle reads the tally
// unless the step tallied it (Tallied).
func (o Outcome) OwnEvent() (ApprovedEvent, bool) {
	if !o.Changed || o.ApprovalID == "" {
		return ApprovedEvent{}, false
	}
	return ApprovedEvent{Event: approvedEvent(o.EventID, o.PlanID, o.JobID, o.TargetLocale, o.ApprovalID), Tally: !o.Tallied}, true
}

// Approvals is what the outcome publishes and settles, in order:
// OwedEvents, then OwnEvent.
func (o Outcome) Approvals() []ApprovedEvent {
	out := o.OwedEvents()
	if a, ok := o.OwnEvent(); ok {
		out = append(out, a)
	}
	return out
}

// DeliveryEvent is the delivery event of a changing step, published after
// its approvals (Publisher.PublishDelivery publishes delivery_ready and
// delivered only); false when the step changed nothing.
func (o Outcome) DeliveryEvent() (contract.Delivery, bool) {
	if !o.Changed {
		return contract.Delivery{}, false
	}
	return contract.Delivery{Schema: contract.SchemaDelivery, EventID: o.EventID, PlanID: o.PlanID, DeliveryID: o.DeliveryID, Status: o.Status}, true
}

func approvedEvent(eventID, planID, jobID, locale, approvalID string) contract.ReleaseApproved {
	return contract.ReleaseApproved{Schema: contract.SchemaReleaseApproved, EventID: eventID, PlanID: planID, JobID: jobID, TargetLocale: locale, ApprovalID: approvalID}
}

// Next is the step message to schedule after a step; a zero Kind
// schedules none. Cause is the step's error that the message retries (a
// failed send is reported joined to it).
type Next struct {
	Kind  string
	At    time.Time
	Cause error
}

// StepResult is what Step did: the run's outcome (the completing read's
// when there was one), the message to schedule, and the run's own error
// when Step handled it (the release goes on or is rescheduled: Step
// returns no error then).
type StepResult struct {
	Outcome Outcome
	Next    Next
	StepErr error
}

// Step runs one release step as the coordinator function does, the whole
// sequence (docs/design.md "Release steps"): on a redelivered message
// the stored state's owed events are published again; the step runs (or
// is handed on: Ports.HandOn, Next now); its owed
// approvals, its own approval and its delivery event are published in
// that order, each approval settled after its event; a step that
// completed the tally then runs the completing read; a delivered or
// blocked release's texts start their retention and a blocked release's
// owed approvals are published. It returns the run's outcome (the
// completing read's when there was one) and the message to schedule.
func (c *Coordinator) Step(ctx context.Context, req StepRequest, p Ports) (StepResult, error) {
	d := driver{c: c, p: p, kind: req.Kind, eventID: req.EventID}
	if d.p.Log == nil {
		d.p.Log = c.log()
	}
	if d.p.TextRetention <= 0 {
		d.p.TextRetention = DefaultTextRetention
	}
	o, next, err := d.step(ctx, req)
	return StepResult{Outcome: o, Next: next, StepErr: d.stepErr}, err
}

type driver struct {
	c       *Coordinator
	p       Ports
	kind    string
	eventID string
	// stepErr is the run's own error (StepResult.StepErr).
	stepErr error
}

func (d *driver) now() time.Time { return d.c.clock.Now() }

func (d *driver) runNow() Next { return Next{Kind: contract.KindReleaseRun, At: d.now()} }

func (d *driver) step(ctx context.Context, req StepRequest) (Outcome, Next, error) {
	c, log, eventID, kind := d.c, d.p.Log, d.eventID, d.kind
	if req.Redo {
		if err := d.republish(ctx); err != nil {
			return Outcome{}, Next{}, err
		}
	}
	if d.p.HandOn != nil && d.p.HandOn(ctx) {
		// Not enough time left for a leased step: hand it to a fresh
		// invocation instead of failing the batch.
		return Outcome{}, Next{Kind: kind, At: d.now()}, nil
	}
	var (
		o   Outcome
		err error
	)
	switch {
	case req.Input != nil:
		o, err = c.RunInput(ctx, *req.Input)
	case kind == contract.KindReleaseDeliver:
		o, err = c.Deliver(ctx, eventID)
	default:
		o, err = c.RunNextRelease(ctx, eventID)
	}
	if d.p.Observe != nil {
		d.p.Observe(ctx, kind, o, err)
	}
	d.stepErr = err
	if err != nil && o.Changed && o.ApprovalID != "" {
		// The step stored an approval and then failed: the approval
		// stands, so its event is published and the release goes on.
		log.WarnContext(ctx, "release step failed after storing an approval", "event_id", eventID,
			"job_id", o.JobID, "approval_id", o.ApprovalID, "code", core.CodeOf(err), "retryable", core.IsRetryable(err))
		if _, _, perr := d.publish(ctx, o); perr != nil {
			return o, Next{}, perr
		}
		if core.IsRetryable(err) {
			n, aerr := d.afterError(ctx, err)
			return o, n, aerr
		}
		return o, d.runNow(), nil
	}
	if err != nil {
		if _, perr := d.publishOwed(ctx, o); perr != nil {
			return o, Next{}, errors.Join(err, perr)
		}
		n, aerr := d.afterError(ctx, err)
		return o, n, aerr
	}
	log.InfoContext(ctx, "release step", "event_id", eventID, "kind", kind, "status", o.Status,
		"changed", o.Changed, "job_id", o.JobID, "delivery_id", o.DeliveryID)
	settled, owedSettled, err := d.publish(ctx, o)
	if err != nil {
		return o, Next{}, err
	}
	if o.Completes {
		// The named step's tally write completed the release's tally:
		// its approval is published and settled, now the completing read.
		if !settled {
			// Still owed: the completing read would only hold the
			// delivery. Its evidence lease wakes the release (the sweep).
			return o, Next{}, nil
		}
		if o, err = d.complete(ctx); err != nil {
			d.stepErr = err
			n, aerr := d.afterError(ctx, err)
			return o, n, aerr
		}
		if _, _, err := d.publish(ctx, o); err != nil {
			return o, Next{}, err
		}
	} else if o.Held && len(o.Owed) > 0 {
		// The delivery waited for owed approvals this step settled: run
		// the release again, once they all are (otherwise their evidence
		// leases wake it).
		if owedSettled {
			return o, d.runNow(), nil
		}
		return o, Next{}, nil
	}
	if o.Status == OutcomeDelivered || o.Ended {
		// Delivered, or a run of a release that ended: a text a late
		// input stored since expires with the others (an expiry already
		// set is kept).
		if err := d.expireTexts(ctx); err != nil {
			return o, Next{}, err
		}
	}
	return o, d.next(o), nil
}

// expireTexts starts the retention of the event's texts: the release is
// delivered, blocked for good or ended, nothing reads them any more. A
// text whose retention started already keeps its expiry
// (TextExpirer), so running an ended release again never moves it later.
func (d *driver) expireTexts(ctx context.Context) error {
	if d.p.Texts == nil {
		return nil
	}
	at := d.now().Add(d.p.TextRetention)
	if err := d.p.Texts.ExpireTexts(ctx, d.eventID, at); err != nil {
		return err
	}
	d.p.Log.InfoContext(ctx, "release texts expire", "event_id", d.eventID, "expires_at_ms", core.Millis(at))
	return nil
}

// afterError schedules the step at the stored wake time, if any: the
// evidence or delivery state already recorded the failure.
func (d *driver) afterError(ctx context.Context, stepErr error) (Next, error) {
	c, log, eventID := d.c, d.p.Log, d.eventID
	if core.HasCode(stepErr, CodePlanMissing) {
		// The plan's own event runs the release when it arrives.
		log.InfoContext(ctx, "release waits for its plan", "event_id", eventID)
		return Next{}, nil
	}
	if !core.IsRetryable(stepErr) && !core.HasCode(stepErr, CodeGuardFailed) {
		// A final failure does not heal by running again. Only a release
		// the step blocked for good (attempts exhausted, a refused
		// review, a failed delivery: it has its blocked record) has
		// ended, and only then do its texts start their retention; other
		// final errors (a stray deliver envelope: cms.delivery.missing)
		// leave the release, and its texts, as they are.
		blocked, err := c.Blocked(ctx, eventID)
		if err == nil && blocked {
			// A blocked release's owed approval events are still
			// published (docs/design.md "Owed events of compact
			// approvals").
			err = d.republishOwed(ctx)
		}
		if err == nil && blocked {
			err = d.expireTexts(ctx)
		}
		if err != nil {
			// Retryable: the redelivered message meets the same final
			// error and tries again.
			return Next{}, fmt.Errorf("after %s: %w", core.CodeOf(stepErr), err)
		}
		return Next{}, stepErr
	}
	at, ok, err := c.NextWake(ctx, eventID)
	if err != nil || !ok {
		return Next{}, stepErr
	}
	now := d.now()
	if at.Before(now.Add(time.Second)) {
		at = now.Add(time.Second)
	}
	log.WarnContext(ctx, "release step failed, rescheduled", "event_id", eventID, "kind", d.kind,
		"code", core.CodeOf(stepErr), "retryable", core.IsRetryable(stepErr), "at_ms", core.Millis(at))
	return Next{Kind: d.kind, At: at, Cause: stepErr}, nil
}

// next is the message a successful step schedules.
func (d *driver) next(o Outcome) Next {
	now := d.now()
	switch o.Status {
	case OutcomeApproved:
		if o.Quiet {
			// A named step: the other locales run on their own inputs,
			// and the step whose tally write completes the tally
			// prepares the delivery (docs/design.md "Release reads").
			return Next{}
		}
		return Next{Kind: contract.KindReleaseRun, At: now}
	case OutcomeDeliveryReady:
		at := now
		if o.WakeAt.After(now) {
			at = o.WakeAt
		}
		return Next{Kind: contract.KindReleaseDeliver, At: at}
	case OutcomeWaiting:
		if !o.WakeAt.IsZero() {
			at := o.WakeAt
			if at.Before(now.Add(time.Second)) {
				at = now.Add(time.Second)
			}
			return Next{Kind: contract.KindReleaseRun, At: at}
		}
	}
	return Next{}
}

// publish publishes the step's events: the owed approvals it reports
// (Outcome.Owed, each settled), its own approval (settled), then its
// delivery event. settled says the step's own approval was settled (or
// there is none), owedSettled that every reported owed approval was.
func (d *driver) publish(ctx context.Context, o Outcome) (settled, owedSettled bool, err error) {
	if owedSettled, err = d.publishOwed(ctx, o); err != nil {
		return false, false, err
	}
	dl, changed := o.DeliveryEvent()
	if !changed {
		return true, owedSettled, nil
	}
	settled = true
	if a, ok := o.OwnEvent(); ok {
		if settled, err = d.publishApproved(ctx, a); err != nil {
			return false, false, err
		}
	}
	if err := d.p.Publisher.PublishDelivery(ctx, dl); err != nil {
		return false, false, err
	}
	d.settleAnnounced(ctx, dl)
	return settled, owedSettled, nil
}

// publishOwed publishes and settles (SettleApproval, with the tally) the
// owed approvals a step reports (Outcome.Owed: approvals whose step is
// gone); all says every one was settled.
func (d *driver) publishOwed(ctx context.Context, o Outcome) (all bool, err error) {
	if len(o.Owed) > 0 && (o.EventID == "" || o.PlanID == "") {
		return false, nil
	}
	all = true
	for _, a := range o.OwedEvents() {
		ok, err := d.publishApproved(ctx, a)
		if err != nil {
			return false, err
		}
		all = all && ok
	}
	if len(o.Owed) > 0 {
		d.p.Log.InfoContext(ctx, "owed approval events published", "event_id", o.EventID, "approved", len(o.Owed), "settled", all)
	}
	return all, nil
}

// complete runs the completing read of a release (CompleteRelease) after
// the step that completed the tally settled its approval. Owed approvals
// it reports (a crashed step's) are published and settled and the read is
// tried once more; a release still held after that is run again from the
// queue (or, when an owed approval could not be settled, by its evidence
// lease's wake), never in a loop here. The outcome returned is the last
// read's, without an approval of its own (published already).
func (d *driver) complete(ctx context.Context) (Outcome, error) {
	var o Outcome
	all := true
	for try := 0; try < 2; try++ {
		var err error
		if o, err = d.c.CompleteRelease(ctx, d.eventID); err != nil {
			if _, perr := d.publishOwed(ctx, o); perr != nil {
				return o, errors.Join(err, perr)
			}
			o.Owed = nil
			return o, err
		}
		if !o.Held {
			return o, nil // its owed approvals, if any, are published by the caller
		}
		if all, err = d.publishOwed(ctx, o); err != nil {
			return o, err
		}
		o.Owed = nil
		if !all {
			break
		}
	}
	// Still held: a later run prepares the delivery. o carries the wake
	// of a lease still running (next schedules it); an owed approval not
	// settled wakes the release by its evidence lease (the sweep);
	// otherwise the release runs again from the queue now.
	if o.WakeAt.IsZero() && all && o.Status == OutcomeWaiting {
		o.WakeAt = d.now()
	}
	return o, nil
}

// settleAnnounced records that the delivery event of dl's status was
// published (SettleAnnounced), so a redelivered message does not publish
// it again. A failed write only means one more publish of the same event
// (consumers dedupe on delivery_id and status).
func (d *driver) settleAnnounced(ctx context.Context, dl contract.Delivery) {
	if dl.Status != OutcomeDeliveryReady && dl.Status != OutcomeDelivered {
		return
	}
	if err := d.c.SettleAnnounced(ctx, dl.EventID, dl.DeliveryID, dl.Status); err != nil {
		d.p.Log.WarnContext(ctx, "delivery event published, not marked announced", "event_id", dl.EventID,
			"delivery_id", dl.DeliveryID, "status", dl.Status, "code", core.CodeOf(err))
	}
}

// publishApproved publishes localeflow.release.approved and then settles
// it (SettleApproval, with a.Tally): the one settle path. A failed settling
// only means a later run publishes the same event again (its evidence
// record still wakes the release; consumers dedupe on approval_id).
func (d *driver) publishApproved(ctx context.Context, ae ApprovedEvent) (bool, error) {
	a := ae.Event
	if err := d.p.Publisher.PublishApproved(ctx, a); err != nil {
		return false, err
	}
	if err := d.c.SettleApproval(ctx, a.EventID, a.JobID, a.ApprovalID, ae.Tally); err != nil {
		d.p.Log.WarnContext(ctx, "approved event published, not settled", "event_id", a.EventID,
			"job_id", a.JobID, "approval_id", a.ApprovalID, "code", core.CodeOf(err))
		if core.CodeOf(err) != "" && !core.IsRetryable(err) {
			// A settle that can never write (the owed approval's evidence
			// record fails its checks) blocks the release: it stops here
			// instead of publishing the event again on every run.
			return false, d.c.blockIfStuck(ctx, a.EventID, err)
		}
		return false, nil
	}
	return true, nil
}

// republish publishes, again, the output events of the event's stored
// state that are still owed: release.approved for every stored approval
// whose event is owed (ApprovalOwed) and whose signed token opens and
// names the plan's job, and delivery.ready for a prepared (pending,
// leased or retry_wait) delivery or delivery.delivered for a succeeded
// one unless that status is already announced; a failed delivery
// publishes nothing. An event already published (evidence settled,
// status announced) is not published again (issue 25). The details are
// the ones the changing step published; consumers dedupe on the ids.
func (d *driver) republish(ctx context.Context) error {
	eventID := d.eventID
	snap, plan, err := d.stored(ctx)
	if err != nil || plan == nil {
		return err
	}
	approved, err := d.republishApprovals(ctx, snap, plan)
	if err != nil {
		return err
	}
	status := ""
	if dr := snap.Delivery; dr != nil && dr.EventID == eventID && dr.PlanID == plan.PlanID && core.ValidToken(dr.DeliveryID) &&
		dr.Announced != AnnouncedStatus(dr.Status) {
		status = AnnouncedStatus(dr.Status)
		dl := contract.Delivery{Schema: contract.SchemaDelivery, EventID: eventID, PlanID: plan.PlanID, DeliveryID: dr.DeliveryID, Status: status}
		if err := d.p.Publisher.PublishDelivery(ctx, dl); err != nil {
			return err
		}
		d.settleAnnounced(ctx, dl)
	}
	d.p.Log.InfoContext(ctx, "coordinator events republished", "event_id", eventID, "approved", approved, "delivery_status", status)
	return nil
}

// republishOwed publishes and settles the owed approval events of a
// blocked release from its stored state (ApprovalOwed): their evidence
// leases no longer wake anything once the release is blocked.
func (d *driver) republishOwed(ctx context.Context) error {
	snap, plan, err := d.stored(ctx)
	if err != nil || plan == nil {
		return err
	}
	n, err := d.republishApprovals(ctx, snap, plan)
	if n > 0 {
		d.p.Log.InfoContext(ctx, "owed approval events of a blocked release published", "event_id", d.eventID, "approved", n)
	}
	return err
}

// stored reads the event's records for re-publication; plan is nil when
// there is nothing to publish from (no plan, or a plan that fails its
// seal: the step reports it).
func (d *driver) stored(ctx context.Context) (Snapshot, *PlanRecord, error) {
	eventID := d.eventID
	if !core.ValidToken(eventID) {
		return Snapshot{}, nil, nil // the step reports the invalid id
	}
	// The state only: approvals, the delivery and the plan (no texts).
	snap, err := d.c.store.LoadState(ctx, eventID)
	if err != nil {
		return Snapshot{}, nil, core.Wrap(CodeRepublishRead, true, fmt.Errorf("republish %s: %w", eventID, err))
	}
	plan := snap.Plan
	if plan == nil || plan.Event.EventID != eventID || d.c.CheckPlan(ctx, plan) != nil {
		return snap, nil, nil
	}
	return snap, plan, nil
}

// republishApprovals publishes release.approved for the stored approvals
// that bind the plan's jobs and whose event is still owed, and settles
// them.
func (d *driver) republishApprovals(ctx context.Context, snap Snapshot, plan *PlanRecord) (int, error) {
	n := 0
	for _, job := range plan.Jobs {
		rec := snap.Approvals[job.JobID]
		if rec == nil {
			continue
		}
		if !ApprovalOwed(rec, snap.Evidence[rec.RequestID]) || !d.approvalBinds(rec, plan, job) {
			continue
		}
		if _, err := d.publishApproved(ctx, ApprovedEvent{
			Event: approvedEvent(plan.Event.EventID, plan.PlanID, job.JobID, job.TargetLocale, rec.ApprovalID), Tally: true,
		}); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// approvalBinds says whether a stored approval's signed token opens and
// names the plan's job. Expiry does not matter: the approval was made.
func (d *driver) approvalBinds(rec *ApprovalRecord, plan *PlanRecord, job PlanJob) bool {
	if !core.ValidToken(rec.ApprovalID) || rec.JobID != job.JobID || rec.TargetLocale != job.TargetLocale {
		return false
	}
	raw, err := d.c.OpenApproval(rec.KeyID, rec.Token)
	if err != nil {
		return false
	}
	var p contract.ApprovalPayload
	if err := json.Unmarshal(raw, &p); err != nil {
		return false
	}
	return p.Schema == contract.ApprovalSchema && p.ApprovalID == rec.ApprovalID && p.EventID == plan.Event.EventID &&
		p.PlanID == plan.PlanID && p.JobID == job.JobID && p.TargetLocale == job.TargetLocale
}
