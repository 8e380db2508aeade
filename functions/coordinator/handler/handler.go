package handler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/localeflow/localeflow/adapters/delayqueue"
	"github.com/localeflow/localeflow/adapters/quarantine"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/internal/emf"
	"github.com/localeflow/localeflow/internal/lambdalog"
)

// Kinds of delayed envelopes on the release queue.
const (
	KindRun     = contract.KindReleaseRun
	KindDeliver = contract.KindReleaseDeliver
)

// Codes of the handler.
const (
	CodeMessageInvalid = "coordinator.message_invalid"
	CodeInputInvalid   = "coordinator.input_invalid"
	CodeDeadlineShort  = "coordinator.deadline_short"
	// CodeEventInvalid: the invocation is neither an SQS batch nor the
	// sweep schedule's event; the invocation fails.
	CodeEventInvalid = "coordinator.event_invalid"
	// CodeRepublishRead: a redelivered message could not read the stored
	// state to re-publish; retryable (the message is redelivered).
	CodeRepublishRead = "coordinator.republish.read_failed"
)

// SweepLimit is the page size of the sweep's index reads. The sweep reads
// every page (records of blocked releases are not in the wake index, so
// what it pages through is work that can still progress).
const SweepLimit = 500

// Queue schedules delayed steps (adapters/delayqueue.Queue).
type Queue interface {
	Send(ctx context.Context, kind, eventID string, at, now time.Time) error
	Resend(ctx context.Context, e delayqueue.Envelope, now time.Time) error
}

// Bus publishes output events (adapters/eventbus.Publisher).
type Bus interface {
	Publish(ctx context.Context, detailType string, detail any) error
}

// Config wires a Handler.
type Config struct {
	Coordinator *release.Coordinator
	Queue       Queue
	Bus         Bus
	// Due finds due records for the scheduled sweep (the release store).
	Due   release.DueFinder
	Clock core.Clock
	Log   *slog.Logger
	// Margin is kept free of work at the end of an invocation.
	Margin time.Duration
	// Rejecter quarantines, counts and logs rejected inputs (bad
	// signature, idempotency collision, invalid envelope: see reject);
	// nil only logs them.
	Rejecter *quarantine.Rejecter
	// Texts sets the TTL of an event's source and result records once its
	// release is delivered or blocked for good (releasedb.TextExpirer);
	// nil keeps the texts (tests, simulations).
	Texts TextExpirer
	// TextRetention is how long the texts are kept after that; 0 means
	// DefaultTextRetention.
	TextRetention time.Duration
	// LongestWait is the longest delay the coordinator schedules (its
	// backoff cap and leases); a delayed envelope due more than this plus
	// delayqueue.HorizonSlack ahead is refused. 0 means DefaultLongestWait.
	LongestWait time.Duration
	// Metrics receives the evidence and delivery step metrics
	// (internal/emf); nil writes none.
	Metrics *emf.Writer
}

// TextExpirer sets the expiry of an event's text records.
type TextExpirer interface {
	ExpireTexts(ctx context.Context, eventID string, at time.Time) error
}

// DefaultTextRetention keeps source and result texts 7 days after the
// release is delivered or blocked for good.
const DefaultTextRetention = release.DefaultTextRetention

// DefaultLongestWait is the coordinator's longest scheduled wait with the
// default settings: the 3600 s backoff cap (leases are at most 3600 s too).
const DefaultLongestWait = release.BackoffMax

// Handler handles release queue batches.
type Handler struct {
	c      *release.Coordinator
	queue  Queue
	bus    Bus
	due    release.DueFinder
	clock  core.Clock
	log    *slog.Logger
	margin time.Duration
	// longestWait bounds how far ahead a delayed envelope may be due.
	longestWait time.Duration
	rejecter    *quarantine.Rejecter
	texts       TextExpirer
	retention   time.Duration
	metrics     *emf.Writer
}

// New validates cfg and returns a Handler. It installs the operation guard
// on the coordinator: evidence, verification and delivery work starts only
// with at least the lease (plus the margin) left in the invocation.
func New(cfg Config) (*Handler, error) {
	if cfg.Coordinator == nil || cfg.Queue == nil || cfg.Bus == nil || cfg.Due == nil || cfg.Clock == nil || cfg.Log == nil || cfg.Margin < 0 {
		return nil, core.Fail(release.CodeConfig)
	}
	if err := cfg.Coordinator.Validate(); err != nil {
		return nil, err
	}
	h := &Handler{c: cfg.Coordinator, queue: cfg.Queue, bus: cfg.Bus, due: cfg.Due, clock: cfg.Clock, log: cfg.Log, margin: cfg.Margin,
		longestWait: cfg.LongestWait, rejecter: cfg.Rejecter, texts: cfg.Texts, retention: cfg.TextRetention,
		metrics: cfg.Metrics}
	if h.retention <= 0 {
		h.retention = DefaultTextRetention
	}
	if h.longestWait <= 0 {
		h.longestWait = DefaultLongestWait
	}
	h.c.SetGuard(h.guard)
	return h, nil
}

// guard refuses work that the invocation may not outlive.
func (h *Handler) guard(ctx context.Context, lease time.Duration) error {
	if !h.hasTime(ctx, lease) {
		return core.Fail(CodeDeadlineShort)
	}
	return nil
}

func (h *Handler) hasTime(ctx context.Context, need time.Duration) bool {
	deadline, ok := ctx.Deadline()
	return !ok || time.Until(deadline) >= need+h.margin
}

// Handle is the Lambda entry point: a release queue batch, or the event of
// the release sweep schedule.
func (h *Handler) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	ctx, flush := h.metrics.Scope(ctx)
	defer flush()
	var probe struct {
		Records json.RawMessage `json:"Records"`
		events.EventBridgeEvent
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, core.Wrap(CodeEventInvalid, false, errors.New("invocation is not a JSON object"))
	}
	switch {
	case len(probe.Records) > 0:
		var batch events.SQSEvent
		if err := json.Unmarshal(raw, &batch); err != nil {
			return nil, core.Wrap(CodeEventInvalid, false, fmt.Errorf("decode SQS batch: %w", err))
		}
		return h.HandleSQS(ctx, batch)
	case probe.Source == contract.ScheduledEventSource && probe.DetailType == contract.ScheduledEventDetailType:
		return h.Sweep(lambdalog.WithEventID(ctx, probe.ID))
	}
	return nil, core.Wrap(CodeEventInvalid, false, errors.New("neither an SQS batch nor a scheduled event"))
}

// SweepResult reports one sweep.
type SweepResult struct {
	Due       int `json:"due"`
	Scheduled int `json:"scheduled"`
}

// Sweep re-enqueues a step for every record the wake index says is due,
// paging through the index with its cursor: the safety net for a lost or
// dropped step message. A duplicate step is harmless (the conditional
// writes decide). An owed approval event wakes its release through its
// evidence record (docs/design.md "Owed events of compact approvals"):
// the run it schedules publishes it.
func (h *Handler) Sweep(ctx context.Context) (SweepResult, error) {
	now := h.clock.Now()
	res := SweepResult{}
	seen := map[string]bool{}
	cursor := ""
	for {
		page, err := h.due.Due(ctx, core.Millis(now), cursor, SweepLimit)
		if err != nil {
			return res, fmt.Errorf("sweep: %w", err)
		}
		res.Due += len(page.Items)
		for _, it := range page.Items {
			kind := KindRun
			if it.Delivery {
				kind = KindDeliver
			}
			if seen[kind+"|"+it.EventID] {
				continue
			}
			seen[kind+"|"+it.EventID] = true
			if err := h.queue.Send(ctx, kind, it.EventID, now, now); err != nil {
				return res, fmt.Errorf("sweep %s: %w", it.EventID, err)
			}
			res.Scheduled++
		}
		if page.Next == "" {
			break
		}
		if !h.hasTime(ctx, 0) {
			// The next sweep starts over; what was sent is not lost.
			h.log.WarnContext(ctx, "coordinator sweep stopped at the invocation deadline", "due", res.Due, "scheduled", res.Scheduled)
			return res, nil
		}
		cursor = page.Next
	}
	h.log.InfoContext(ctx, "coordinator sweep done", "due", res.Due, "scheduled", res.Scheduled)
	return res, nil
}

// HandleSQS processes a release queue batch and reports the messages to
// redeliver.
func (h *Handler) HandleSQS(ctx context.Context, batch events.SQSEvent) (events.SQSEventResponse, error) {
	ctx, flush := h.metrics.Scope(ctx)
	defer flush()
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	if !h.hasTime(ctx, h.c.Config().EvidenceLease) {
		// The whole invocation is shorter than one lease: re-enqueueing
		// would loop forever, so the messages fail (and reach the DLQ).
		h.log.ErrorContext(ctx, "invocation shorter than the evidence lease", "code", CodeDeadlineShort,
			"lease_ms", h.c.Config().EvidenceLease.Milliseconds())
		for _, m := range batch.Records {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
		}
		return resp, nil
	}
	for _, m := range batch.Records {
		if err := h.message(ctx, m); !h.settle(ctx, m, err) {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
		}
	}
	h.log.InfoContext(ctx, "coordinator batch done", "messages", len(batch.Records), "failures", len(resp.BatchItemFailures))
	return resp, nil
}

// settle logs the message's fate; true acknowledges it.
func (h *Handler) settle(ctx context.Context, m events.SQSMessage, err error) bool {
	if err == nil {
		return true
	}
	code := core.CodeOf(err)
	if code != "" && !core.IsRetryable(err) {
		var rej rejected
		if errors.As(err, &rej) {
			// A rejected input is never acknowledged before it is
			// quarantined (or redelivered).
			if qerr := h.rejecter.Reject(ctx, m.MessageId, m.Body, code); qerr != nil {
				h.log.ErrorContext(ctx, "coordinator message failed", "message_id", m.MessageId, "code", core.CodeOf(qerr), "cause", code)
				return false
			}
		}
		h.log.WarnContext(ctx, "coordinator message settled with a final error", "message_id", m.MessageId, "code", code)
		return true
	}
	if code == "" {
		code = "coordinator.unexpected"
	}
	h.log.ErrorContext(ctx, "coordinator message failed", "message_id", m.MessageId, "code", code)
	return false
}

// rejected marks a final error of the input itself (it can never succeed,
// unlike a release step that failed for good): settle quarantines it.
type rejected struct{ error }

func (r rejected) Unwrap() error { return r.error }

// reject marks err as a rejected input when it is final (coded, not
// retryable); transient errors stay as they are.
func reject(err error) error {
	if err != nil && core.CodeOf(err) != "" && !core.IsRetryable(err) {
		return rejected{err}
	}
	return err
}

func (h *Handler) message(ctx context.Context, m events.SQSMessage) error {
	body := bytes.TrimSpace([]byte(m.Body))
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(body, &probe); err != nil || probe == nil {
		return reject(core.Wrap(CodeMessageInvalid, false, errors.New("body is not a JSON object")))
	}
	redo := receiveCount(m) > 1
	if _, ok := probe["schema"]; ok {
		return h.delayed(ctx, body, redo)
	}
	if _, ok := probe["detail-type"]; ok {
		return h.input(ctx, body, redo)
	}
	return reject(core.Wrap(CodeMessageInvalid, false, errors.New("body has neither schema nor detail-type")))
}

// receiveCount is the SQS ApproximateReceiveCount (1 when absent or
// invalid).
func receiveCount(m events.SQSMessage) int {
	n, err := strconv.Atoi(m.Attributes["ApproximateReceiveCount"])
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// input stores a signed plan or job event and runs a step for its event.
// redo marks a redelivered message (see step).
func (h *Handler) input(ctx context.Context, body []byte, redo bool) error {
	var env events.EventBridgeEvent
	if err := json.Unmarshal(body, &env); err != nil || env.Source != contract.EventSource || len(env.Detail) == 0 {
		return reject(core.Wrap(CodeInputInvalid, false, errors.New("not a localeflow event envelope")))
	}
	ctx = lambdalog.WithEventID(ctx, env.ID)
	ingest := h.c.IngestInput
	if !h.hasTime(ctx, h.c.Config().EvidenceLease) {
		// The step below will not run here (runStep hands it on): no
		// evidence lease is created at ingest for it to wait out.
		ingest = h.c.IngestInputUnclaimed
	}
	in, err := ingest(ctx, env.DetailType, env.Detail)
	if err != nil {
		return reject(err)
	}
	h.log.InfoContext(ctx, "input stored", "event_id", in.EventID, "detail_type", env.DetailType, "changed", in.Changed, "named_job_id", in.JobID())
	return h.runStep(ctx, KindRun, in.EventID, redo, func() (release.Outcome, error) { return h.c.RunInput(ctx, in) })
}

// delayed handles a delayed step envelope; redo marks a redelivered
// message (see step).
func (h *Handler) delayed(ctx context.Context, body []byte, redo bool) error {
	env, err := delayqueue.Parse(body)
	if err != nil {
		return reject(err)
	}
	if (env.Kind != KindRun && env.Kind != KindDeliver) || env.Ref != "" {
		return reject(core.Wrap(CodeMessageInvalid, false, fmt.Errorf("kind %q is not the coordinator's", env.Kind)))
	}
	now := h.clock.Now()
	if err := delayqueue.CheckHorizon(env, now, h.longestWait); err != nil {
		return reject(err)
	}
	if _, due := delayqueue.Due(env, now); !due {
		return h.queue.Resend(ctx, env, now)
	}
	return h.step(ctx, env.Kind, env.EventID, redo)
}

// step runs one release step and schedules the next. On a redelivered
// message (redo) it first re-publishes the output events of the event's
// stored state: an earlier attempt may have written a change and then
// failed to publish it, and the step below finds nothing left to change.
func (h *Handler) step(ctx context.Context, kind, eventID string, redo bool) error {
	return h.runStep(ctx, kind, eventID, redo, nil)
}

// runStep is step with the run step given (run; nil: RunNextRelease or
// Deliver by kind): a job input runs its named step (release.RunInput).
func (h *Handler) runStep(ctx context.Context, kind, eventID string, redo bool, run func() (release.Outcome, error)) error {
	if redo {
		if err := h.republish(ctx, eventID); err != nil {
			return err
		}
	}
	if !h.hasTime(ctx, h.c.Config().EvidenceLease) {
		// Not enough time left for a leased step: hand it to a fresh
		// invocation instead of failing the batch.
		return h.queue.Send(ctx, kind, eventID, h.clock.Now(), h.clock.Now())
	}
	var (
		o   release.Outcome
		err error
	)
	switch {
	case run != nil:
		o, err = run()
	case kind == KindDeliver:
		o, err = h.c.Deliver(ctx, eventID)
	default:
		o, err = h.c.RunNextRelease(ctx, eventID)
	}
	h.stepMetrics(ctx, kind, o, err)
	if err != nil && o.Changed && o.ApprovalID != "" {
		// The step stored an approval and then failed: the approval
		// stands, so its event is published and the release goes on.
		h.log.WarnContext(ctx, "release step failed after storing an approval", "event_id", eventID,
			"job_id", o.JobID, "approval_id", o.ApprovalID, "code", core.CodeOf(err), "retryable", core.IsRetryable(err))
		if _, _, perr := h.publish(ctx, o); perr != nil {
			return perr
		}
		if core.IsRetryable(err) {
			return h.afterError(ctx, kind, eventID, err)
		}
		now := h.clock.Now()
		return h.queue.Send(ctx, KindRun, eventID, now, now)
	}
	if err != nil {
		if _, perr := h.publishOwed(ctx, o); perr != nil {
			return errors.Join(err, perr)
		}
		return h.afterError(ctx, kind, eventID, err)
	}
	h.log.InfoContext(ctx, "release step", "event_id", eventID, "kind", kind, "status", o.Status,
		"changed", o.Changed, "job_id", o.JobID, "delivery_id", o.DeliveryID)
	settled, owedSettled, err := h.publish(ctx, o)
	if err != nil {
		return err
	}
	if o.Completes {
		// The named step's tally write completed the release's tally:
		// its approval is published and settled, now the completing read.
		if !settled {
			// Still owed: the completing read would only hold the
			// delivery. Its evidence lease wakes the release (the sweep).
			return nil
		}
		if o, err = h.complete(ctx, eventID); err != nil {
			return h.afterError(ctx, kind, eventID, err)
		}
		if _, _, err := h.publish(ctx, o); err != nil {
			return err
		}
	} else if o.Held && len(o.Owed) > 0 {
		// The delivery waited for owed approvals this step settled: run
		// the release again, once they all are (otherwise their evidence
		// leases wake it).
		if owedSettled {
			now := h.clock.Now()
			return h.queue.Send(ctx, KindRun, eventID, now, now)
		}
		return nil
	}
	if o.Status == release.OutcomeDelivered {
		if err := h.expireTexts(ctx, eventID); err != nil {
			return err
		}
	}
	return h.next(ctx, kind, o)
}

// expireTexts starts the retention of the event's texts: the release is
// delivered or blocked for good, nothing reads them any more.
func (h *Handler) expireTexts(ctx context.Context, eventID string) error {
	if h.texts == nil {
		return nil
	}
	at := h.clock.Now().Add(h.retention)
	if err := h.texts.ExpireTexts(ctx, eventID, at); err != nil {
		return err
	}
	h.log.InfoContext(ctx, "release texts expire", "event_id", eventID, "expires_at_ms", core.Millis(at))
	return nil
}

// afterError schedules the step at the stored wake time, if any: the
// evidence or delivery state already recorded the failure.
func (h *Handler) afterError(ctx context.Context, kind, eventID string, stepErr error) error {
	if core.HasCode(stepErr, release.CodePlanMissing) {
		// The plan's own event runs the release when it arrives.
		h.log.InfoContext(ctx, "release waits for its plan", "event_id", eventID)
		return nil
	}
	if !core.IsRetryable(stepErr) && !core.HasCode(stepErr, release.CodeGuardFailed) {
		// A final failure does not heal by running again. Only a release
		// the step blocked for good (attempts exhausted, a refused
		// review, a failed delivery: it has its blocked record) has
		// ended, and only then do its texts start their retention; other
		// final errors (a stray deliver envelope: cms.delivery.missing)
		// leave the release, and its texts, as they are.
		blocked, err := h.c.Blocked(ctx, eventID)
		if err == nil && blocked {
			// A blocked release's owed approval events are still
			// published (docs/design.md "Owed events of compact
			// approvals").
			err = h.republishOwed(ctx, eventID)
		}
		if err == nil && blocked {
			err = h.expireTexts(ctx, eventID)
		}
		if err != nil {
			// Retryable: the redelivered message meets the same final
			// error and tries again.
			return fmt.Errorf("after %s: %w", core.CodeOf(stepErr), err)
		}
		return stepErr
	}
	at, ok, err := h.c.NextWake(ctx, eventID)
	if err != nil || !ok {
		return stepErr
	}
	now := h.clock.Now()
	if at.Before(now.Add(time.Second)) {
		at = now.Add(time.Second)
	}
	if err := h.queue.Send(ctx, kind, eventID, at, now); err != nil {
		return errors.Join(stepErr, err)
	}
	h.log.WarnContext(ctx, "release step failed, rescheduled", "event_id", eventID, "kind", kind,
		"code", core.CodeOf(stepErr), "retryable", core.IsRetryable(stepErr), "at_ms", core.Millis(at))
	return nil
}

func (h *Handler) next(ctx context.Context, kind string, o release.Outcome) error {
	now := h.clock.Now()
	switch o.Status {
	case release.OutcomeApproved:
		if o.Quiet {
			// A named step: the other locales run on their own inputs,
			// and the step whose tally write completes the tally
			// prepares the delivery (docs/design.md "Release reads").
			return nil
		}
		return h.queue.Send(ctx, KindRun, o.EventID, now, now)
	case release.OutcomeDeliveryReady:
		at := now
		if o.WakeAt.After(now) {
			at = o.WakeAt
		}
		return h.queue.Send(ctx, KindDeliver, o.EventID, at, now)
	case release.OutcomeWaiting:
		if !o.WakeAt.IsZero() {
			at := o.WakeAt
			if at.Before(now.Add(time.Second)) {
				at = now.Add(time.Second)
			}
			return h.queue.Send(ctx, KindRun, o.EventID, at, now)
		}
	}
	return nil
}

// publish publishes the step's events: the owed approvals it reports
// (Outcome.Owed, each settled), its own approval (settled), then its
// delivery event. settled says the step's own approval was settled (or
// there is none), owedSettled that every reported owed approval was.
func (h *Handler) publish(ctx context.Context, o release.Outcome) (settled, owedSettled bool, err error) {
	if owedSettled, err = h.publishOwed(ctx, o); err != nil {
		return false, false, err
	}
	if !o.Changed {
		return true, owedSettled, nil
	}
	settled = true
	if o.ApprovalID != "" {
		tally := !o.Tallied
		settle := func(ctx context.Context, eventID, jobID, approvalID string) error {
			return h.c.SettleApproval(ctx, eventID, jobID, approvalID, tally)
		}
		if settled, err = h.publishApproved(ctx, contract.ReleaseApproved{
			Schema: contract.SchemaReleaseApproved, EventID: o.EventID, PlanID: o.PlanID, JobID: o.JobID, TargetLocale: o.TargetLocale, ApprovalID: o.ApprovalID,
		}, settle); err != nil {
			return false, false, err
		}
	}
	d := contract.Delivery{Schema: contract.SchemaDelivery, EventID: o.EventID, PlanID: o.PlanID, DeliveryID: o.DeliveryID, Status: o.Status}
	if err := h.publishDelivery(ctx, d); err != nil {
		return false, false, err
	}
	h.settleAnnounced(ctx, d)
	return settled, owedSettled, nil
}

// publishOwed publishes and settles (SettleApproval, with the tally) the
// owed approvals a step reports (release.Outcome.Owed: approvals whose
// step is gone); all says every one was settled.
func (h *Handler) publishOwed(ctx context.Context, o release.Outcome) (all bool, err error) {
	all = true
	settle := func(ctx context.Context, eventID, jobID, approvalID string) error {
		return h.c.SettleApproval(ctx, eventID, jobID, approvalID, true)
	}
	for _, a := range o.Owed {
		if o.EventID == "" || o.PlanID == "" {
			return false, nil
		}
		ok, err := h.publishApproved(ctx, contract.ReleaseApproved{
			Schema: contract.SchemaReleaseApproved, EventID: o.EventID, PlanID: o.PlanID, JobID: a.JobID, TargetLocale: a.TargetLocale, ApprovalID: a.ApprovalID,
		}, settle)
		if err != nil {
			return false, err
		}
		all = all && ok
	}
	if len(o.Owed) > 0 {
		h.log.InfoContext(ctx, "owed approval events published", "event_id", o.EventID, "approved", len(o.Owed), "settled", all)
	}
	return all, nil
}

// complete runs the completing read of a release
// (release.Coordinator.CompleteRelease) after the step that completed the
// tally settled its approval. Owed approvals it reports (a crashed step's)
// are published and settled and the read is tried once more; a release
// still held after that is run again from the queue (or, when an owed
// approval could not be settled, by its evidence lease's wake), never in
// a loop here. The outcome returned is the last read's, without an
// approval of its own (published already).
func (h *Handler) complete(ctx context.Context, eventID string) (release.Outcome, error) {
	var o release.Outcome
	all := true
	for try := 0; try < 2; try++ {
		var err error
		if o, err = h.c.CompleteRelease(ctx, eventID); err != nil {
			if _, perr := h.publishOwed(ctx, o); perr != nil {
				return o, errors.Join(err, perr)
			}
			o.Owed = nil
			return o, err
		}
		if !o.Held {
			return o, nil // its owed approvals, if any, are published by the caller
		}
		if all, err = h.publishOwed(ctx, o); err != nil {
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
	if o.WakeAt.IsZero() && all && o.Status == release.OutcomeWaiting {
		o.WakeAt = h.clock.Now()
	}
	return o, nil
}

// settleAnnounced records that the delivery event of d's status was
// published (release.Coordinator.SettleAnnounced), so a redelivered
// message does not publish it again. A failed write only means one more
// publish of the same event (consumers dedupe on delivery_id and status).
func (h *Handler) settleAnnounced(ctx context.Context, d contract.Delivery) {
	if d.Status != release.OutcomeDeliveryReady && d.Status != release.OutcomeDelivered {
		return
	}
	if err := h.c.SettleAnnounced(ctx, d.EventID, d.DeliveryID, d.Status); err != nil {
		h.log.WarnContext(ctx, "delivery event published, not marked announced", "event_id", d.EventID,
			"delivery_id", d.DeliveryID, "status", d.Status, "code", core.CodeOf(err))
	}
}

// publishApproved publishes localeflow.release.approved and then settles
// it (nil: none, the event is not owed; release.Coordinator.
// SettleApproval). A failed settling only means a later run publishes the
// same event again (its evidence record still wakes the release;
// consumers dedupe on approval_id).
func (h *Handler) publishApproved(ctx context.Context, d contract.ReleaseApproved, settle func(ctx context.Context, eventID, jobID, approvalID string) error) (bool, error) {
	if err := h.bus.Publish(ctx, contract.DetailReleaseApproved, d); err != nil {
		return false, fmt.Errorf("publish approved %s: %w", d.EventID, err)
	}
	if settle == nil {
		return true, nil
	}
	if err := settle(ctx, d.EventID, d.JobID, d.ApprovalID); err != nil {
		h.log.WarnContext(ctx, "approved event published, not settled", "event_id", d.EventID,
			"job_id", d.JobID, "approval_id", d.ApprovalID, "code", core.CodeOf(err))
		return false, nil
	}
	return true, nil
}

// owedSettle is the settling of an owed approval (nil when not owed):
// SettleApproval with the tally.
func (h *Handler) owedSettle(owed bool) func(ctx context.Context, eventID, jobID, approvalID string) error {
	if !owed {
		return nil
	}
	return func(ctx context.Context, eventID, jobID, approvalID string) error {
		return h.c.SettleApproval(ctx, eventID, jobID, approvalID, true)
	}
}

// publishDelivery publishes delivery.ready or delivery.delivered by the
// detail's status; other statuses publish nothing.
func (h *Handler) publishDelivery(ctx context.Context, d contract.Delivery) error {
	detailType := ""
	switch d.Status {
	case release.OutcomeDeliveryReady:
		detailType = contract.DetailDeliveryReady
	case release.OutcomeDelivered:
		detailType = contract.DetailDeliveryDelivered
	default:
		return nil
	}
	if err := h.bus.Publish(ctx, detailType, d); err != nil {
		return fmt.Errorf("publish %s %s: %w", detailType, d.EventID, err)
	}
	return nil
}

// republish publishes, again, the output events of the event's stored
// state that are still owed: release.approved for every stored approval
// whose event is owed (release.ApprovalOwed) and whose signed token
// opens and names the plan's job, and delivery.ready for a prepared
// (pending, leased or retry_wait) delivery or delivery.delivered for a
// succeeded one unless that status is already announced; a failed delivery
// publishes nothing. An event already published (marker cleared, status
// announced) is not published again: every returning message would
// otherwise publish every stored approval once more (issue 25). The
// details are the ones the changing step published; consumers dedupe on
// the ids.
func (h *Handler) republish(ctx context.Context, eventID string) error {
	snap, plan, err := h.stored(ctx, eventID)
	if err != nil || plan == nil {
		return err
	}
	approved, err := h.republishApprovals(ctx, snap, plan, true)
	if err != nil {
		return err
	}
	status := ""
	if d := snap.Delivery; d != nil && d.EventID == eventID && d.PlanID == plan.PlanID && core.ValidToken(d.DeliveryID) &&
		d.Announced != release.AnnouncedStatus(d.Status) {
		status = release.AnnouncedStatus(d.Status)
		dd := contract.Delivery{Schema: contract.SchemaDelivery, EventID: eventID, PlanID: plan.PlanID, DeliveryID: d.DeliveryID, Status: status}
		if err := h.publishDelivery(ctx, dd); err != nil {
			return err
		}
		h.settleAnnounced(ctx, dd)
	}
	h.log.InfoContext(ctx, "coordinator events republished", "event_id", eventID, "approved", approved, "delivery_status", status)
	return nil
}

// republishOwed publishes and settles the owed approval events of a
// blocked release from its stored state (release.ApprovalOwed): their
// evidence leases no longer wake anything once the release is blocked.
func (h *Handler) republishOwed(ctx context.Context, eventID string) error {
	snap, plan, err := h.stored(ctx, eventID)
	if err != nil || plan == nil {
		return err
	}
	n, err := h.republishApprovals(ctx, snap, plan, true)
	if n > 0 {
		h.log.InfoContext(ctx, "owed approval events of a blocked release published", "event_id", eventID, "approved", n)
	}
	return err
}

// stored reads the event's records for re-publication; plan is nil when
// there is nothing to publish from (no plan, or a plan that fails its
// seal: the step reports it).
func (h *Handler) stored(ctx context.Context, eventID string) (release.Snapshot, *release.PlanRecord, error) {
	if !core.ValidToken(eventID) {
		return release.Snapshot{}, nil, nil // the step reports the invalid id
	}
	// The state only: approvals, the delivery and the plan (no texts).
	snap, err := h.c.Store().LoadState(ctx, eventID)
	if err != nil {
		return release.Snapshot{}, nil, core.Wrap(CodeRepublishRead, true, fmt.Errorf("republish %s: %w", eventID, err))
	}
	plan := snap.Plan
	if plan == nil || plan.Event.EventID != eventID || h.c.CheckPlan(ctx, plan) != nil {
		return snap, nil, nil
	}
	return snap, plan, nil
}

// republishApprovals publishes release.approved for the stored approvals
// that bind the plan's jobs (onlyOwed: only those whose event is still
// owed) and settles those that are.
func (h *Handler) republishApprovals(ctx context.Context, snap release.Snapshot, plan *release.PlanRecord, onlyOwed bool) (int, error) {
	n := 0
	for _, job := range plan.Jobs {
		rec := snap.Approvals[job.JobID]
		if rec == nil {
			continue
		}
		owed := release.ApprovalOwed(rec, snap.Evidence[rec.RequestID])
		if (onlyOwed && !owed) || !h.approvalBinds(rec, plan, job) {
			continue
		}
		if _, err := h.publishApproved(ctx, contract.ReleaseApproved{
			Schema: contract.SchemaReleaseApproved, EventID: plan.Event.EventID, PlanID: plan.PlanID, JobID: job.JobID, TargetLocale: job.TargetLocale, ApprovalID: rec.ApprovalID,
		}, h.owedSettle(owed)); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// approvalBinds says whether a stored approval's signed token opens and
// names the plan's job. Expiry does not matter: the approval was made.
func (h *Handler) approvalBinds(rec *release.ApprovalRecord, plan *release.PlanRecord, job release.PlanJob) bool {
	if !core.ValidToken(rec.ApprovalID) || rec.JobID != job.JobID || rec.TargetLocale != job.TargetLocale {
		return false
	}
	raw, err := h.c.OpenApproval(rec.KeyID, rec.Token)
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
