package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/internal/lambdalog"
)

// hint handles a localeflow.change.hint envelope: when the hint moved the
// change's next poll to now (one conditional write, at most once per hint
// gap), the change is polled at once through the normal signed poll. Any
// other outcome changes nothing and is logged with its code. A redelivered
// hint also polls a watching change that is due (the first attempt may have
// moved the poll and failed before polling). A hint that finds a poll in
// flight (leased) is tried again once that poll has finished, since the
// poll may have read the status from before the change.
func (h *Handler) hint(ctx context.Context, body []byte, redo bool) error {
	var env events.EventBridgeEvent
	if err := json.Unmarshal(body, &env); err != nil || env.Source != contract.EventSource ||
		env.DetailType != contract.DetailChangeHint || len(env.Detail) == 0 || env.Detail[0] != '{' {
		return core.Wrap(CodeMessageInvalid, false, errors.New("not a localeflow.change.hint envelope"))
	}
	ctx = lambdalog.WithEventID(ctx, env.ID)
	d, err := monitor.ParseHint(env.Detail)
	if err != nil {
		return err
	}
	res, err := h.mon.Hint(ctx, d)
	if err != nil {
		return fmt.Errorf("hint: %w", err)
	}
	if res.State == monitor.StateLeased {
		if res, err = h.hintAfterLease(ctx, d); err != nil {
			return err
		}
	}
	if !res.Advanced && !(redo && res.Code == monitor.CodeHintAlreadyDue) {
		h.log.InfoContext(ctx, "poller hint ignored", "event_id", d.EventID, "code", res.Code, "state", string(res.State))
		return nil
	}
	if !h.budget(ctx) {
		return core.Retry(CodeDeadline)
	}
	h.log.InfoContext(ctx, "poller hint accepted", "event_id", d.EventID)
	out, err := h.poll(ctx, d.EventID)
	if err != nil {
		return fmt.Errorf("poll %s after hint: %w", d.EventID, err)
	}
	return h.afterPoll(ctx, out, redo)
}

// hintRetryInterval spaces the tries of a hint that found its change
// leased.
const hintRetryInterval = 200 * time.Millisecond

// hintAfterLease tries the hint again every hintRetryInterval while the
// change is leased, for at most the CMS client's timeout (a live poll ends
// within it; a longer lease belongs to a poller that died, and the lease
// expiry handles it) and while the invocation has time left for a poll. It
// returns the last try's result.
func (h *Handler) hintAfterLease(ctx context.Context, d monitor.HintDetail) (monitor.HintResult, error) {
	h.log.InfoContext(ctx, "poller hint waits for the poll in flight", "event_id", d.EventID)
	deadline := time.Now().Add(h.reader.Timeout())
	for {
		select {
		case <-ctx.Done():
			return monitor.HintResult{}, core.Retry(CodeDeadline)
		case <-time.After(hintRetryInterval):
		}
		res, err := h.mon.Hint(ctx, d)
		if err != nil {
			return monitor.HintResult{}, fmt.Errorf("hint: %w", err)
		}
		if res.State != monitor.StateLeased || !time.Now().Before(deadline) || !h.budget(ctx) {
			return res, nil
		}
	}
}
