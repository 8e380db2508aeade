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
}

// Sweep polls every due change once, concurrently, until none is left or
// the deadline leaves no room for another poll. It fails only when the
// first page of due ids cannot be read.
func (h *Handler) Sweep(ctx context.Context) (SweepResult, error) {
	var (
		res  SweepResult
		mu   sync.Mutex
		wg   sync.WaitGroup
		work = make(chan string)
	)
	for range h.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range work {
				r := h.sweepOne(ctx, id)
				mu.Lock()
				res.add(r)
				mu.Unlock()
			}
		}()
	}
	stopped, listed, err := h.feed(ctx, work)
	close(work)
	wg.Wait()
	res.Listed, res.Stopped = listed, stopped
	h.log.InfoContext(ctx, "poller sweep done", "listed", res.Listed, "polled", res.Polled, "skipped", res.Skipped,
		"terminal", res.Terminal, "failed", res.Failed, "errors", res.Errors, "stopped", res.Stopped)
	if err != nil && listed == 0 {
		return res, fmt.Errorf("sweep: %w", err)
	}
	return res, nil
}

// feed lists due ids page by page and hands each new one to a worker. A
// page with no new id ends the sweep: what was listed is done or in flight
// (leased, so no longer due).
func (h *Handler) feed(ctx context.Context, work chan<- string) (stopped string, listed int, err error) {
	seen := map[string]bool{}
	for {
		if !h.budget(ctx) {
			return StopDeadline, listed, nil
		}
		ids, err := h.mon.Due(ctx, h.pageSize)
		if err != nil {
			h.log.ErrorContext(ctx, "poller sweep listing failed", "code", codeOr(err, "poller.unexpected"))
			return StopError, listed, err
		}
		fresh := 0
		for _, id := range ids {
			if seen[id] {
				continue
			}
			seen[id] = true
			fresh++
			listed++
			if !h.budget(ctx) {
				return StopDeadline, listed, nil
			}
			select {
			case work <- id:
			case <-ctx.Done():
				return StopDeadline, listed, nil
			}
		}
		if fresh == 0 {
			return StopDrained, listed, nil
		}
	}
}

type oneResult struct {
	polled, skipped, terminal, failed, errored bool
}

func (r *SweepResult) add(o oneResult) {
	r.Polled += b2i(o.polled)
	r.Skipped += b2i(o.skipped)
	r.Terminal += b2i(o.terminal)
	r.Failed += b2i(o.failed)
	r.Errors += b2i(o.errored)
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
	out, err := h.mon.PollOnce(ctx, id, h.reader)
	if err != nil {
		h.log.WarnContext(ctx, "poller sweep poll failed", "event_id", id, "code", codeOr(err, "poller.unexpected"))
		return oneResult{errored: true}
	}
	r := oneResult{polled: out.Polled, skipped: !out.Polled}
	if out.Polled {
		r.terminal = out.State == monitor.StateTerminal
		r.failed = out.State == monitor.StateFailed
	}
	if err := h.afterPoll(ctx, out, false); err != nil {
		h.log.WarnContext(ctx, "poller sweep follow-up failed", "event_id", id, "code", codeOr(err, "poller.unexpected"))
		r.errored = true
	}
	return r
}

func codeOr(err error, fallback string) string {
	if c := core.CodeOf(err); c != "" {
		return c
	}
	return fallback
}
