package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/aws/aws-lambda-go/events"

	"github.com/localeflow/localeflow/adapters/delayqueue"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/internal/lambdalog"
)

// HandleSQS processes a batch concurrently (bounded) and reports the
// messages to redeliver. The delayed messages the batch sends (next polls,
// first polls, chained envelopes) go out together at the end with
// SendMessageBatch; a record whose send failed is settled with that
// failure, as if its own send had failed.
func (h *Handler) HandleSQS(ctx context.Context, batch events.SQSEvent) events.SQSEventResponse {
	ctx, flush := h.metrics.Scope(ctx)
	defer flush()
	failed := make([]bool, len(batch.Records))
	sendErr := make([]error, len(batch.Records))
	sends := &sendBatch{h: h, done: func(owner int, _ string, err error) { sendErr[owner] = err }}
	sem := make(chan struct{}, h.concurrency)
	var wg sync.WaitGroup
	for i, m := range batch.Records {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			failed[i] = !h.settle(ctx, m, h.message(withBatch(ctx, sends, i), m))
		}()
	}
	wg.Wait()
	sends.flush(ctx)
	for i, err := range sendErr {
		if err != nil && !failed[i] {
			failed[i] = !h.settle(ctx, batch.Records[i], wrapSend(batch.Records[i], err))
		}
	}
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	for i, f := range failed {
		if f {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: batch.Records[i].MessageId})
		}
	}
	h.log.InfoContext(ctx, "poller batch done", "messages", len(batch.Records), "failures", len(resp.BatchItemFailures))
	return resp
}

// settle decides a message's fate from its error and logs it; true means
// acknowledge.
func (h *Handler) settle(ctx context.Context, m events.SQSMessage, err error) bool {
	if err == nil {
		return true
	}
	code := core.CodeOf(err)
	if code != "" && !core.IsRetryable(err) {
		// Never acknowledged before it is quarantined (or redelivered).
		if qerr := h.rejecter.Reject(ctx, m.MessageId, m.Body, code); qerr != nil {
			h.log.ErrorContext(ctx, "poller message failed", "message_id", m.MessageId, "code", core.CodeOf(qerr), "cause", code)
			return false
		}
		h.log.WarnContext(ctx, "poller message dropped", "message_id", m.MessageId, "code", CodeMessageInvalid, "cause", code)
		return true
	}
	if code == "" {
		code = CodeUnexpected
	}
	h.log.ErrorContext(ctx, "poller message failed", "message_id", m.MessageId, "code", code)
	return false
}

// message handles one body; nil acknowledges it, a non-retryable coded
// error acknowledges and logs it, anything else redelivers it.
func (h *Handler) message(ctx context.Context, m events.SQSMessage) error {
	body := trimmed([]byte(m.Body))
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(body, &probe); err != nil || probe == nil {
		return core.Wrap(CodeMessageInvalid, false, errors.New("body is not a JSON object"))
	}
	if _, ok := probe["schema"]; ok {
		return h.delayed(ctx, m, body)
	}
	if dt, ok := probe["detail-type"]; ok {
		if string(dt) == `"`+contract.DetailChangeHint+`"` {
			return h.hint(ctx, body, receiveCount(m) > 1)
		}
		return h.intake(ctx, body, receiveCount(m) > 1)
	}
	return core.Wrap(CodeMessageInvalid, false, errors.New("body has neither schema nor detail-type"))
}

// intake registers a dispatched change from its EventBridge envelope.
func (h *Handler) intake(ctx context.Context, body []byte, redo bool) error {
	var env events.EventBridgeEvent
	if err := json.Unmarshal(body, &env); err != nil || env.Source != contract.EventSource ||
		env.DetailType != contract.DetailChangeDispatched || len(env.Detail) == 0 || env.Detail[0] != '{' {
		return core.Wrap(CodeMessageInvalid, false, errors.New("not a localeflow.change.dispatched envelope"))
	}
	ctx = lambdalog.WithEventID(ctx, env.ID)
	payload, err := h.openDispatch(ctx, env.Detail)
	if err != nil {
		return err
	}
	d, err := monitor.ParseDispatched([]byte(payload))
	if err != nil {
		return err
	}
	st, err := h.mon.Register(ctx, d)
	if err != nil {
		return fmt.Errorf("register: %w", err)
	}
	switch {
	case st.State == monitor.StatePending:
		// New, or a duplicate of a change never polled: both enqueue; the
		// chains collapse at the first poll (only the claimer schedules).
		if err := h.scheduleAt(ctx, KindPoll, st.EventID, st.NextPoll); err != nil {
			return fmt.Errorf("enqueue first poll %s: %w", st.EventID, err)
		}
	case st.State.Final():
		// Terminal at once (superseded or cancelled dispatch), or a
		// duplicate of a finished change: announce what is still owed.
		if a, ok := st.Announcement(); ok {
			return h.announce(ctx, a)
		}
	}
	return nil
}

// openDispatch verifies a signed dispatch detail (v1 or v2, under any of
// the event keys) and returns its payload, the dispatch JSON.
func (h *Handler) openDispatch(ctx context.Context, detail []byte) (string, error) {
	check := h.events
	check.Now = h.clock.Now()
	if h.eventKeySet != nil {
		keys, err := h.eventKeySet.Keys(ctx)
		if err != nil {
			return "", core.Wrap(CodeDispatchKeys, true, err)
		}
		check.Keys = keys
	}
	return monitor.OpenDispatch(check, detail)
}

// delayed handles a delayed poll envelope.
func (h *Handler) delayed(ctx context.Context, m events.SQSMessage, body []byte) error {
	env, err := delayqueue.Parse(body)
	if err != nil {
		return err
	}
	if env.Kind != KindPoll || env.Ref != "" {
		return core.Wrap(CodeMessageInvalid, false, fmt.Errorf("kind %q is not the poller's", env.Kind))
	}
	now := h.clock.Now()
	if err := delayqueue.CheckHorizon(env, now, h.longestWait); err != nil {
		return err
	}
	if _, due := delayqueue.Due(env, now); !due {
		if err := h.schedule(ctx, env); err != nil {
			return fmt.Errorf("chain %s: %w", env.EventID, err)
		}
		return nil
	}
	if !h.budget(ctx) {
		return core.Retry(CodeDeadline)
	}
	out, err := h.poll(ctx, env.EventID)
	if err != nil {
		if leaseLost(err) {
			// Not an input error: acknowledged (never quarantined) once
			// the next poll is scheduled.
			return h.afterLostLease(ctx, env.EventID, err)
		}
		if core.HasCode(err, monitor.CodeStateInvalid) {
			// The record was marked failed: announce that outcome (a
			// failure redelivers the message; the sweep also retries).
			if aerr := h.announceID(ctx, env.EventID); aerr != nil {
				return aerr
			}
		}
		return fmt.Errorf("poll %s: %w", env.EventID, err)
	}
	return h.afterPoll(ctx, out, receiveCount(m) > 1)
}

// wrapSend is the error a record's failed send settles it with (the one the
// send itself would have returned in its path).
func wrapSend(m events.SQSMessage, err error) error {
	return fmt.Errorf("send for message %s: %w", m.MessageId, err)
}
