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
	"github.com/localeflow/localeflow/adapters/eventbus"
	"github.com/localeflow/localeflow/adapters/quarantine"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/internal/emf"
	"github.com/localeflow/localeflow/internal/lambdalog"
	"github.com/localeflow/localeflow/signing"
)

// KindPoll is the delayed-message kind of the next poll (or retry) of one
// change.
const KindPoll = contract.KindPoll

// Codes logged or returned by the handler.
const (
	// CodeMessageInvalid: an SQS body that can never succeed; acknowledged.
	CodeMessageInvalid = "poller.message_invalid"
	// CodeEventInvalid: the invocation payload is neither an SQS batch nor a
	// scheduled event; the invocation fails.
	CodeEventInvalid = "poller.event_invalid"
	// CodeDeadline: not enough time left to start a poll; the message is
	// reported as a batch item failure and redelivered.
	CodeDeadline = "poller.deadline"
	// The codes of a dispatch detail that is not a signed event are
	// monitor.CodeDispatchEnvelope, .CodeDispatchSignature, .CodeDispatchStale.
	// CodeDispatchKeys: the event key set could not be read (retryable).
	CodeDispatchKeys = "poller.dispatch.keys_unavailable"
	// CodeUnexpected is logged for a sweep failure that carries no code.
	CodeUnexpected = "poller.unexpected"
)

// Defaults.
const (
	DefaultConcurrency = 64
	DefaultMargin      = 5 * time.Second
	DefaultPageSize    = 1000
	MaxConcurrency     = 256
)

// Monitor is what the handler needs from *monitor.Service.
type Monitor interface {
	Register(ctx context.Context, d monitor.Dispatched) (monitor.Status, error)
	Status(ctx context.Context, eventID string) (monitor.Status, error)
	Due(ctx context.Context, limit int) ([]string, error)
	DuePage(ctx context.Context, limit int, cursor monitor.DueCursor) ([]string, monitor.DueCursor, error)
	SweepPage(ctx context.Context, limit int, cursor monitor.DueCursor) ([]string, monitor.DueCursor, error)
	PollOnce(ctx context.Context, eventID string, reader monitor.LifecycleReader) (monitor.Outcome, error)
	Hint(ctx context.Context, d monitor.HintDetail) (monitor.HintResult, error)
	OwedOutcomes(ctx context.Context, limit int) ([]string, error)
	Announcement(ctx context.Context, eventID string) (monitor.Announcement, bool, error)
	Announced(ctx context.Context, a monitor.Announcement) error
}

var _ Monitor = (*monitor.Service)(nil)

// Scheduler sends delayed messages (*delayqueue.Queue). The handler sends
// the messages of one invocation with SendBatch (SendMessageBatch, ten to a
// request).
type Scheduler interface {
	Send(ctx context.Context, kind, eventID string, at, now time.Time) error
	Resend(ctx context.Context, e delayqueue.Envelope, now time.Time) error
	SendBatch(ctx context.Context, envs []delayqueue.Envelope, now time.Time) []error
}

var _ Scheduler = (*delayqueue.Queue)(nil)

// Publisher puts output events on the bus (*eventbus.Publisher).
type Publisher interface {
	Publish(ctx context.Context, detailType string, detail any) error
}

var _ Publisher = (*eventbus.Publisher)(nil)

// Config wires a Handler.
type Config struct {
	Monitor Monitor
	Reader  monitor.LifecycleReader
	Queue   Scheduler
	Bus     Publisher
	// Clock is the monitor's clock (envelope due times, scheduling).
	Clock core.Clock
	// Log receives JSON records; nil discards.
	Log *slog.Logger
	// Concurrency bounds parallel polls (sweep and SQS batch); 0 means
	// DefaultConcurrency.
	Concurrency int
	// Margin is kept free before the Lambda deadline on top of the CMS
	// client's timeout; 0 means DefaultMargin.
	Margin time.Duration
	// PageSize is the number of due ids listed per page; 0 means
	// DefaultPageSize. On DynamoDB one page costs one Query per wake shard
	// that is not drained yet, so a page of 1,000 keeps listing at ≤ 0.008
	// Queries per poll (a page of 100 cost 0.08, above the 2.05 requests
	// per poll budget).
	PageSize int
	// EventKeys verify the signed localeflow.change.dispatched details: the
	// current event key first, then keys still accepted during a rotation.
	// Without a key every dispatch is refused (nothing unsigned is ever
	// accepted).
	EventKeys [][]byte
	// EventKeySet, when set, replaces EventKeys (secretkey.Cache: the
	// secret is re-read on a TTL, so a rotation needs no cold start).
	EventKeySet KeySet
	// EventMaxAge is the oldest v2-signed dispatch accepted; 0 means
	// signing.DefaultEventMaxAge.
	EventMaxAge time.Duration
	// RefuseV1Events refuses v1 dispatch signatures.
	RefuseV1Events bool
	// Rejecter quarantines, counts and logs the messages acknowledged with
	// a final error (adapters/quarantine); nil only logs them.
	Rejecter *quarantine.Rejecter
	// LongestWait is the longest delay the poller schedules (the largest
	// of the poll interval, retry max delay and lease); a delayed envelope
	// due more than this plus delayqueue.HorizonSlack ahead is refused.
	// 0 means DefaultLongestWait.
	LongestWait time.Duration
	// Metrics receives the poll metrics (internal/emf); nil writes none.
	Metrics *emf.Writer
}

// DefaultLongestWait covers the monitor's default waits (lease 600 s,
// retry max delay 300 s, poll interval 30 s).
const DefaultLongestWait = time.Hour

// KeySet supplies a key set (current key first).
type KeySet interface {
	Keys(ctx context.Context) ([][]byte, error)
}

// Handler is the poller function.
type Handler struct {
	mon         Monitor
	reader      monitor.LifecycleReader
	queue       Scheduler
	bus         Publisher
	clock       core.Clock
	log         *slog.Logger
	concurrency int
	margin      time.Duration
	pageSize    int
	longestWait time.Duration
	events      signing.EventCheck
	rejecter    *quarantine.Rejecter
	eventKeySet KeySet
	metrics     *emf.Writer
}

// New validates cfg and returns a Handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Monitor == nil || cfg.Reader == nil || cfg.Queue == nil || cfg.Bus == nil || cfg.Clock == nil {
		return nil, errors.New("handler: monitor, reader, queue, bus and clock are required")
	}
	if cfg.Reader.Timeout() <= 0 {
		return nil, errors.New("handler: reader timeout must be positive")
	}
	h := &Handler{
		mon: cfg.Monitor, reader: cfg.Reader, queue: cfg.Queue, bus: cfg.Bus, clock: cfg.Clock, log: cfg.Log,
		concurrency: cfg.Concurrency, margin: cfg.Margin, pageSize: cfg.PageSize, longestWait: cfg.LongestWait,
	}
	if h.longestWait <= 0 {
		h.longestWait = DefaultLongestWait
	}
	for _, k := range cfg.EventKeys {
		h.events.Keys = append(h.events.Keys, append([]byte(nil), k...))
	}
	h.events.MaxAge, h.events.RefuseV1 = cfg.EventMaxAge, cfg.RefuseV1Events
	h.rejecter, h.eventKeySet = cfg.Rejecter, cfg.EventKeySet
	h.metrics = cfg.Metrics
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.concurrency == 0 {
		h.concurrency = DefaultConcurrency
	}
	if h.margin == 0 {
		h.margin = DefaultMargin
	}
	if h.pageSize == 0 {
		h.pageSize = DefaultPageSize
	}
	if h.concurrency < 1 || h.concurrency > MaxConcurrency || h.margin < 0 || h.pageSize < 1 || h.pageSize > 1000 {
		return nil, fmt.Errorf("handler: concurrency must be 1..%d, margin ≥ 0, page size 1..1000", MaxConcurrency)
	}
	return h, nil
}

// Handle is the Lambda entry point: an SQS batch (a top-level "Records"
// array) or a scheduled event (detail-type "Scheduled Event").
func (h *Handler) Handle(ctx context.Context, payload json.RawMessage) (any, error) {
	ctx, flush := h.metrics.Scope(ctx)
	defer flush()
	var shape struct {
		Records json.RawMessage `json:"Records"`
		events.EventBridgeEvent
	}
	if err := json.Unmarshal(payload, &shape); err != nil {
		h.log.ErrorContext(ctx, "poller invocation invalid", "code", CodeEventInvalid)
		return nil, core.Wrap(CodeEventInvalid, false, errors.New("payload is not a JSON object"))
	}
	switch {
	case len(shape.Records) > 0 && shape.Records[0] == '[':
		var batch events.SQSEvent
		if err := json.Unmarshal(payload, &batch); err != nil {
			h.log.ErrorContext(ctx, "poller invocation invalid", "code", CodeEventInvalid)
			return nil, core.Wrap(CodeEventInvalid, false, errors.New("SQS batch does not decode"))
		}
		return h.HandleSQS(ctx, batch), nil
	case shape.DetailType == contract.ScheduledEventDetailType && shape.Source == contract.ScheduledEventSource:
		return h.Sweep(lambdalog.WithEventID(ctx, shape.ID))
	}
	h.log.ErrorContext(ctx, "poller invocation invalid", "code", CodeEventInvalid)
	return nil, core.Fail(CodeEventInvalid)
}

// budget reports whether a poll may start: the time left before ctx's
// deadline must exceed the CMS client's timeout plus the margin.
func (h *Handler) budget(ctx context.Context) bool {
	if ctx.Err() != nil {
		return false
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		return true
	}
	return time.Until(deadline) > h.reader.Timeout()+h.margin
}

// afterPoll schedules what follows a poll outcome. Whoever writes a
// record's next_poll_ms sends the message for it: a poll, and a claim that
// reclaimed an expired lease instead. A visit that changed nothing (a live
// lease, not due yet, final) sends nothing: the writer of the record's
// current state owns its next message, so duplicate chains collapse. redo
// is set on a redelivered message: then a change that was not polled here
// still gets its follow-up (next message, or the outcome if it is still
// owed), in case the earlier attempt failed after its transition.
func (h *Handler) afterPoll(ctx context.Context, out monitor.Outcome, redo bool) error {
	h.pollMetrics(ctx, out)
	switch {
	case out.Owed != nil:
		// This call finished the change (poll or reclaim), or found its
		// outcome still owed: announce it.
		return h.announce(ctx, *out.Owed)
	case out.State.Final() && redo:
		return h.announceID(ctx, out.EventID)
	case !out.Polled && !out.Reclaimed && !redo:
		return nil
	case out.State.Claimable():
		if err := h.scheduleAt(ctx, KindPoll, out.EventID, out.NextPoll); err != nil {
			return fmt.Errorf("schedule %s: %w", out.EventID, err)
		}
	}
	return nil
}

// leaseLost reports a poll whose finishing write the fence refused: the
// lease ran out (or was taken over) before the write, so nothing was
// written (docs/design.md "A poll that outlived its lease").
func leaseLost(err error) bool {
	switch core.CodeOf(err) {
	case monitor.CodeLeaseExpired, monitor.CodeClaimLost, monitor.CodeCompletionLost,
		monitor.CodeFailureLost, monitor.CodeClockRegressed:
		return true
	}
	return false
}

// afterLostLease follows up a poll of eventID whose finishing write was
// refused: nothing else may wake the record (it may still hold this poll's
// expired lease, or the write may have been applied with its answer lost),
// so the poller reads it (one GetItem) and sends a poll for when it can
// next be claimed: at the lease's end when leased (at once when that is
// past: the poll reclaims it), at next_poll_ms when claimable; a final
// record's owed outcome is announced. A message too many is a duplicate
// chain, which collapses at its claim.
func (h *Handler) afterLostLease(ctx context.Context, eventID string, err error) error {
	h.log.WarnContext(ctx, "poller lease lost", "event_id", eventID, "code", core.CodeOf(err))
	st, serr := h.mon.Status(ctx, eventID)
	if serr != nil {
		return fmt.Errorf("status %s after lost lease: %w", eventID, serr)
	}
	at := st.NextPoll
	switch {
	case st.State.Final():
		if a, ok := st.Announcement(); ok {
			return h.announce(ctx, a)
		}
		return nil
	case st.State == monitor.StateLeased:
		at = st.LeaseExpires
	}
	if now := h.clock.Now(); at.Before(now) {
		at = now
	}
	if serr := h.scheduleAt(ctx, KindPoll, eventID, at); serr != nil {
		return fmt.Errorf("schedule %s after lost lease: %w", eventID, serr)
	}
	return nil
}

// announceID publishes the outcome owed for eventID, if any.
func (h *Handler) announceID(ctx context.Context, eventID string) error {
	a, ok, err := h.mon.Announcement(ctx, eventID)
	if err != nil {
		return fmt.Errorf("outcome %s: %w", eventID, err)
	}
	if !ok {
		return nil
	}
	return h.announce(ctx, a)
}

// poll polls eventID once. A final outcome (terminal CMS answer or a
// failure) is written, with its outbox key, before anything publishes it;
// the caller announces it from the record the write returned (Outcome.Owed).
func (h *Handler) poll(ctx context.Context, eventID string) (monitor.Outcome, error) {
	return h.mon.PollOnce(ctx, eventID, h.reader)
}

// publish puts localeflow.change.terminal for a on the bus.
func (h *Handler) publish(ctx context.Context, a monitor.Announcement) error {
	detail := contract.ChangeTerminal{
		Schema: contract.SchemaChangeTerminal, EventID: a.EventID, OutcomeID: a.OutcomeID, SiteID: optional(a.SiteID), PlanID: optional(a.PlanID),
		State: string(a.State), RemoteStatus: optional(a.RemoteStatus), ErrorCode: optional(a.ErrorCode),
		LifecycleSHA256: optional(a.LifecycleSHA256),
	}
	if err := h.bus.Publish(ctx, contract.DetailChangeTerminal, detail); err != nil {
		return fmt.Errorf("publish terminal %s: %w", a.EventID, err)
	}
	return nil
}

// announce emits localeflow.change.terminal for an owed outcome and then
// clears it from the outbox. A failure leaves it owed: the sweep publishes
// it again (with the same outcome id) after monitor.OutboxGrace.
func (h *Handler) announce(ctx context.Context, a monitor.Announcement) error {
	if err := h.publish(ctx, a); err != nil {
		return err
	}
	if err := h.mon.Announced(ctx, a); err != nil {
		return fmt.Errorf("clear outbox %s: %w", a.EventID, err)
	}
	h.log.InfoContext(ctx, "poller change terminal", "event_id", a.EventID, "state", string(a.State),
		"remote_status", a.RemoteStatus, "code", a.ErrorCode, "outcome_id", a.OutcomeID)
	return nil
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// receiveCount is the SQS ApproximateReceiveCount (1 when absent).
func receiveCount(m events.SQSMessage) int {
	n, err := strconv.Atoi(m.Attributes["ApproximateReceiveCount"])
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// trimmed is b without surrounding JSON whitespace.
func trimmed(b []byte) []byte { return bytes.TrimSpace(b) }
