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
	CodeRepublishRead = release.CodeRepublishRead
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
type TextExpirer = release.TextExpirer

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
	metrics     *emf.Writer
	// ports are what the release step publishes, expires and logs
	// through (release.Coordinator.Step).
	ports release.Ports
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
		longestWait: cfg.LongestWait, rejecter: cfg.Rejecter, metrics: cfg.Metrics}
	h.ports = release.Ports{Publisher: release.BusPublisher{Bus: cfg.Bus}, TextRetention: cfg.TextRetention, Log: cfg.Log,
		Observe: h.stepMetrics, HandOn: h.handOn}
	if cfg.Texts != nil {
		h.ports.Texts = cfg.Texts
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

// handOn says a leased step may not start in this invocation: not enough
// time is left (the step is handed to a fresh invocation).
func (h *Handler) handOn(ctx context.Context) bool {
	return !h.hasTime(ctx, h.c.Config().EvidenceLease)
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
		// The step below will not run here (Step hands it on): no
		// evidence lease is created at ingest for it to wait out.
		ingest = h.c.IngestInputUnclaimed
	}
	in, err := ingest(ctx, env.DetailType, env.Detail)
	if err != nil {
		return reject(err)
	}
	h.log.InfoContext(ctx, "input stored", "event_id", in.EventID, "detail_type", env.DetailType, "changed", in.Changed, "named_job_id", in.JobID())
	return h.step(ctx, KindRun, in.EventID, redo, &in)
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
	return h.step(ctx, env.Kind, env.EventID, redo, nil)
}

// step runs one release step and schedules the next: the whole sequence
// is release.Coordinator.Step's (docs/design.md "Release steps"); a
// redelivered message (redo) first re-publishes the stored state's owed
// events. in, when set, runs its named step (release.RunInput).
func (h *Handler) step(ctx context.Context, kind, eventID string, redo bool, in *release.Input) error {
	res, err := h.c.Step(ctx, release.StepRequest{Kind: kind, EventID: eventID, Redo: redo, Input: in}, h.ports)
	next := res.Next
	if err != nil || next.Kind == "" {
		return err
	}
	if err := h.queue.Send(ctx, next.Kind, eventID, next.At, h.clock.Now()); err != nil {
		if next.Cause != nil {
			return errors.Join(next.Cause, err)
		}
		return err
	}
	return nil
}
