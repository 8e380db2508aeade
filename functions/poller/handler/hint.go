package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

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
// moved the poll and failed before polling). A hint that finds the change
// leased (a poll in flight) is refused like any other: one conditional
// write, no wait and no retry (docs/design.md "Hints"). A poll whose
// finishing write is refused is followed up as on the SQS and sweep paths:
// the record is read and its next poll scheduled, and the hint is
// acknowledged (never quarantined).
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
		if leaseLost(err) {
			// Not an input error: acknowledged (never quarantined) once
			// the next poll is scheduled, as on the SQS and sweep paths.
			return h.afterLostLease(ctx, d.EventID, err)
		}
		if core.HasCode(err, monitor.CodeStateInvalid) {
			if aerr := h.announceID(ctx, d.EventID); aerr != nil {
				return aerr
			}
		}
		return fmt.Errorf("poll %s after hint: %w", d.EventID, err)
	}
	return h.afterPoll(ctx, out, redo)
}
