package handler

import (
	"context"
	"fmt"
	"sync"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
)

// Why a sweep stopped.
const (
	StopDrained  = "drained"
	StopDeadline = "deadline"
	StopError    = "error"
)

// SweepResult is the content-free summary a sweep returns (and logs).
type SweepResult struct {
	// Listed is the number of distinct due ids seen.
	Listed int `json:"listed"`
	// Polled counts polls this sweep finished (it held the lease).
	Polled int `json:"polled"`
	// Skipped counts ids that were not claimable when visited.
	Skipped int `json:"skipped"`
	// Terminal and Failed count polls that ended the change.
	Terminal int `json:"terminal"`
	Failed   int `json:"failed"`
	// Errors counts ids whose poll or follow-up failed (logged by code).
	Errors  int    `json:"errors"`
	Stopped string `json:"stopped"`
	// Owed counts outcomes found owed for longer than monitor.OutboxGrace
	// (their first publish failed or never ran); Announced counts those
	// this sweep published.
	Owed      int `json:"owed"`
	Announced int `json:"announced"`
}

// Sweep polls every due change once, concurrently, until none is left or
// the deadline leaves no room for another poll; then it publishes the
// outcomes still owed (monitor.OutboxGrace after their finishing write).
// It fails only when the first page of due ids cannot be read.
func (h *Handler) Sweep(ctx context.Context) (SweepResult, error) {
	ctx, flush := h.metrics.Scope(ctx)
	defer flush()
	var (
		res  SweepResult
		mu   sync.Mutex
		wg   sync.WaitGroup
		work = make(chan sweepItem)
	)
	// The next polls go out ten to a SendMessageBatch request; a failed
	// entry counts and logs as a failed follow-up of its poll.
	sends := &sendBatch{h: h, auto: true, done: func(_ int, id string, err error) {
		h.log.WarnContext(ctx, "poller sweep follow-up failed", "event_id", id, "code", codeOr(err, CodeUnexpected))
		mu.Lock()
		res.Errors++
		mu.Unlock()
	}}
	bctx := withBatch(ctx, sends, -1)
	for range h.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range work {
				var r oneResult
				if it.owed {
					r = h.announceOne(ctx, it.id)
				} else {
					r = h.sweepOne(bctx, it.id)
				}
				mu.Lock()
				res.add(r)
				mu.Unlock()
			}
		}()
	}
	stopped, listed, err := h.feed(ctx, work)
	if stopped == StopDrained {
		var owed int
		stopped, owed = h.feedOwed(ctx, work)
		res.Owed = owed
	}
	close(work)
	wg.Wait()
	sends.flush(ctx)
	res.Listed, res.Stopped = listed, stopped
	h.log.InfoContext(ctx, "poller sweep done", "listed", res.Listed, "polled", res.Polled, "skipped", res.Skipped,
		"terminal", res.Terminal, "failed", res.Failed, "errors", res.Errors, "owed", res.Owed,
		"announced", res.Announced, "stopped", res.Stopped)
	if err != nil && listed == 0 {
		return res, fmt.Errorf("sweep: %w", err)
	}
	return res, nil
}

// sweepItem is one unit of sweep work: a due id to poll, or an id whose
// outcome is owed.
type sweepItem struct {
	id   string
	owed bool
}

// feedOwed lists the owed outcomes and hands each new one to a worker.
// Each listing asks for one page more than the last, so outcomes that
// cannot be announced now (they stay owed for the next sweep) never hide
// the ones behind them; it ends when a listing comes back short.
func (h *Handler) feedOwed(ctx context.Context, work chan<- sweepItem) (stopped string, listed int) {
	seen := map[string]bool{}
	for limit := h.pageSize; ; limit += h.pageSize {
		if !h.budget(ctx) {
			return StopDeadline, listed
		}
		ids, err := h.mon.OwedOutcomes(ctx, limit)
		if err != nil {
			h.log.ErrorContext(ctx, "poller outbox listing failed", "code", codeOr(err, CodeUnexpected))
			return StopError, listed
		}
		for _, id := range ids {
			if seen[id] {
				continue
			}
			seen[id] = true
			listed++
			select {
			case work <- sweepItem{id: id, owed: true}:
			case <-ctx.Done():
				return StopDeadline, listed
			}
		}
		if len(ids) < limit {
			return StopDrained, listed
		}
	}
}

func (h *Handler) announceOne(ctx context.Context, id string) oneResult {
	a, ok, err := h.mon.Announcement(ctx, id)
	if err == nil && ok {
		err = h.announce(ctx, a)
	}
	if err != nil {
		h.log.WarnContext(ctx, "poller sweep announce failed", "event_id", id, "code", codeOr(err, CodeUnexpected))
		return oneResult{errored: true}
	}
	return oneResult{announced: ok}
}

// feed pages through the due ids with a cursor (per wake shard), past
// the sweep grace (monitor.Config.SweepGrace), and hands each new one to
// a worker; an empty page ends the sweep. Entries that
// cannot be claimed stay behind the cursor, so they never hide due changes
// after them.
func (h *Handler) feed(ctx context.Context, work chan<- sweepItem) (stopped string, listed int, err error) {
	seen := map[string]bool{}
	var cursor monitor.DueCursor
	for {
		if !h.budget(ctx) {
			return StopDeadline, listed, nil
		}
		ids, next, err := h.mon.SweepPage(ctx, h.pageSize, cursor)
		if err != nil {
			h.log.ErrorContext(ctx, "poller sweep listing failed", "code", codeOr(err, CodeUnexpected))
			return StopError, listed, err
		}
		if len(ids) == 0 {
			return StopDrained, listed, nil
		}
		cursor = next
		for _, id := range ids {
			if seen[id] {
				continue
			}
			seen[id] = true
			listed++
			if !h.budget(ctx) {
				return StopDeadline, listed, nil
			}
			select {
			case work <- sweepItem{id: id}:
			case <-ctx.Done():
				return StopDeadline, listed, nil
			}
		}
	}
}

type oneResult struct {
	polled, skipped, terminal, failed, errored, announced bool
}

func (r *SweepResult) add(o oneResult) {
	r.Polled += b2i(o.polled)
	r.Skipped += b2i(o.skipped)
	r.Terminal += b2i(o.terminal)
	r.Failed += b2i(o.failed)
	r.Errors += b2i(o.errored)
	r.Announced += b2i(o.announced)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (h *Handler) sweepOne(ctx context.Context, id string) oneResult {
	if !h.budget(ctx) {
		return oneResult{skipped: true}
	}
	out, err := h.poll(ctx, id)
	if err != nil && leaseLost(err) {
		if serr := h.afterLostLease(ctx, id, err); serr != nil {
			h.log.WarnContext(ctx, "poller sweep follow-up failed", "event_id", id, "code", codeOr(serr, CodeUnexpected))
		}
		return oneResult{errored: true}
	}
	if err != nil {
		h.log.WarnContext(ctx, "poller sweep poll failed", "event_id", id, "code", codeOr(err, CodeUnexpected))
		if core.HasCode(err, monitor.CodeStateInvalid) {
			// Marked failed: its outcome is owed; announce it now (the
			// outbox keeps it for the next sweep if this fails).
			if aerr := h.announceID(ctx, id); aerr != nil {
				h.log.WarnContext(ctx, "poller sweep follow-up failed", "event_id", id, "code", codeOr(aerr, CodeUnexpected))
			}
		}
		return oneResult{errored: true}
	}
	if out.Owed != nil && !out.Polled && !out.Reclaimed && h.withinOutboxGrace(*out.Owed) {
		// A final record whose claim was refused and whose outcome is
		// owed, younger than the outbox grace: with the wake layout an
		// owed record stays in the wake index, so the due listing meets
		// it (docs/design.md "Owed outcomes in the wake index"). Its
		// announcement is still the finishing path's; the owed pass of a
		// later sweep re-publishes it once the grace has passed, as for
		// any owed outcome ("Monitor outbox").
		out.Owed = nil
	}
	r := oneResult{polled: out.Polled, skipped: !out.Polled}
	if out.Polled {
		r.terminal = out.State == monitor.StateTerminal
		r.failed = out.State == monitor.StateFailed
	}
	if err := h.afterPoll(ctx, out, false); err != nil {
		h.log.WarnContext(ctx, "poller sweep follow-up failed", "event_id", id, "code", codeOr(err, CodeUnexpected))
		r.errored = true
	}
	return r
}

// withinOutboxGrace reports whether a was finished less than the
// monitor's OutboxGrace ago (monitor.OutboxGrace when the monitor does not
// say) on the handler's clock: the sweep's owed pass would not list it yet.
func (h *Handler) withinOutboxGrace(a monitor.Announcement) bool {
	grace := monitor.OutboxGrace
	if c, ok := h.mon.(interface{ Config() monitor.Config }); ok && c.Config().OutboxGrace > 0 {
		grace = c.Config().OutboxGrace
	}
	return a.FinishedMS > h.clock.Now().UnixMilli()-grace.Milliseconds()
}

func codeOr(err error, fallback string) string {
	if c := core.CodeOf(err); c != "" {
		return c
	}
	return fallback
}
