package monitor

import (
	"context"
	"errors"
	"time"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/lifecycle"
)

// LifecycleReader reads one verified lifecycle answer from the CMS. The
// CMS client implements it: it signs a fresh request per call, verifies the
// response and returns it parsed with lifecycle.Parse, or a *core.Error
// whose Code is stable (cms.http_503, cms.timeout,
// lifecycle_monitor.response_invalid…) and whose Retryable says whether to
// try again. Timeout is the client's own request timeout; the lease must
// outlast it.
type LifecycleReader interface {
	ReadLifecycle(ctx context.Context, target lifecycle.Target) (lifecycle.Response, error)
	Timeout() time.Duration
}

func (s *Service) checkReader(r LifecycleReader) error {
	if r == nil {
		return core.Fail(CodeClientInvalid)
	}
	t := r.Timeout()
	if t <= 0 {
		return core.Fail(CodeClientInvalid)
	}
	if s.cfg.Lease <= t {
		return core.Fail(CodeLeaseTooShort)
	}
	return nil
}

// PollOnce claims eventID if it is due, reads its lifecycle and records the
// outcome: one claim, one CMS read and one finishing write for this record
// (docs/design.md "Claim and poll"). When the record is
// not claimable it returns its current state with Polled false: NextPoll
// says when it is due (watching, retry_wait, pending), leased means another
// worker holds it, terminal and failed need nothing. An expired lease found
// here is reclaimed first.
//
// Error mapping: a *core.Error from the reader retries when Retryable and
// fails otherwise (lifecycle_monitor.response_invalid is never retried,
// even if marked retryable); an
// error without a valid code fails with lifecycle_monitor.client_failure;
// when the caller's context ended during the read, the poll is retried
// with lifecycle_monitor.client_failure (the deadline was ours, not the
// CMS's).
func (s *Service) PollOnce(ctx context.Context, eventID string, reader LifecycleReader) (Outcome, error) {
	if err := s.checkReader(reader); err != nil {
		return Outcome{}, err
	}
	c, st, ok, reclaimed, err := s.claim(ctx, eventID)
	if err != nil {
		return Outcome{}, err
	}
	if !ok {
		out := outcomeOf(st, false)
		out.Reclaimed = reclaimed
		return out, nil
	}
	return s.poll(ctx, c, reader)
}

// RunOnce claims the first claimable due record and polls it; ok=false
// when nothing was claimable.
func (s *Service) RunOnce(ctx context.Context, reader LifecycleReader) (Outcome, bool, error) {
	if err := s.checkReader(reader); err != nil {
		return Outcome{}, false, err
	}
	// Leased records stay listed (the claim keeps their wake key), so it
	// pages on past the ones it cannot claim.
	const batch = 25
	var cursor DueCursor
	for {
		ids, next, err := s.DuePage(ctx, batch, cursor)
		if err != nil || len(ids) == 0 {
			return Outcome{}, false, err
		}
		cursor = next
		for _, id := range ids {
			c, _, ok, _, err := s.claim(ctx, id)
			if err != nil {
				if core.HasCode(err, CodeStoreUnavailable) {
					return Outcome{}, false, err
				}
				continue
			}
			if ok {
				out, err := s.poll(ctx, c, reader)
				return out, err == nil, err
			}
		}
	}
}

// Poll reads the lifecycle for a held claim and records the outcome.
func (s *Service) Poll(ctx context.Context, c Claim, reader LifecycleReader) (Outcome, error) {
	if err := s.checkReader(reader); err != nil {
		return Outcome{}, err
	}
	if err := c.validate(); err != nil {
		return Outcome{}, err
	}
	return s.poll(ctx, c, reader)
}

func (s *Service) poll(ctx context.Context, c Claim, reader LifecycleReader) (Outcome, error) {
	resp, readErr := reader.ReadLifecycle(ctx, c.Target())
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	var st Status
	var err error
	if readErr == nil {
		st, err = s.Complete(wctx, c, resp)
		switch {
		case core.HasCode(err, CodeResponseInvalid):
			st, err = s.Fail(wctx, c, CodeResponseInvalid)
		case core.HasCode(err, CodeStoreRejected):
			// The store will never take this answer: fail the change
			// (a small write) rather than let the lease expire.
			st, err = s.Fail(wctx, c, CodeStoreRejected)
		}
	} else {
		st, err = s.finishReadError(wctx, ctx, c, readErr)
	}
	if err != nil {
		return Outcome{}, err
	}
	return outcomeOf(st, true), nil
}

func (s *Service) finishReadError(wctx, ctx context.Context, c Claim, readErr error) (Status, error) {
	var ce *core.Error
	switch {
	case errors.As(readErr, &ce) && core.ValidErrorCode(ce.Code):
		s.log.WarnContext(ctx, "monitor read failed", "event_id", c.EventID, "code", ce.Code, "retryable", ce.Retryable)
		// A contract violation is never retried, whatever the client says.
		if ce.Retryable && ce.Code != CodeResponseInvalid {
			// A server's Retry-After (429/503) is a floor on the backoff.
			return s.failure(wctx, c, ce.Code, true, core.RetryAfterOf(readErr))
		}
		return s.Fail(wctx, c, ce.Code)
	case ctx.Err() != nil:
		s.log.WarnContext(ctx, "monitor read cut short", "event_id", c.EventID, "code", CodeClientFailure)
		return s.Retry(wctx, c, CodeClientFailure)
	default:
		s.log.WarnContext(ctx, "monitor read failed", "event_id", c.EventID, "code", CodeClientFailure)
		return s.Fail(wctx, c, CodeClientFailure)
	}
}
