package monitor

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/lifecycle"
)

// finishTimeout bounds a finishing write that runs after the caller's
// context ended (a poll cut short by the Lambda deadline still records its
// outcome rather than leaving the lease to expire).
const finishTimeout = 10 * time.Second

// Service is the lifecycle monitor: it validates everything that enters,
// drives the state machine through single conditional writes on a Store,
// and validates every record it reads back.
type Service struct {
	store Store
	clock core.Clock
	log   *slog.Logger
	cfg   Config
}

// NewService returns a Service; zero Config fields take the defaults. A nil
// logger discards logs.
func NewService(store Store, clock core.Clock, log *slog.Logger, cfg Config) (*Service, error) {
	if store == nil || clock == nil {
		return nil, errors.New("monitor: NewService needs a store and a clock")
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("monitor: config: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{store: store, clock: clock, log: log, cfg: cfg}, nil
}

// Config is the validated configuration in use.
func (s *Service) Config() Config { return s.cfg }

func (s *Service) now() (int64, error) {
	ms := core.Millis(s.clock.Now())
	if !core.ValidMillis(ms) {
		return 0, core.Fail(CodeTimeInvalid)
	}
	return ms, nil
}

// Register binds monitoring to one successful dispatch. It is idempotent on
// event_id: registering the same change again returns the stored status;
// a different identity under the same event_id is
// lifecycle_monitor.idempotency_collision. A dispatch that was superseded
// or cancelled is terminal at once.
func (s *Service) Register(ctx context.Context, d Dispatched) (Status, error) {
	now, err := s.now()
	if err != nil {
		return Status{}, err
	}
	reg, err := validateDispatched(d)
	if err != nil {
		return Status{}, err
	}
	maxFailures := s.cfg.MaxConsecutiveFailures
	binding, err := Binding(reg.eventID, reg.siteID, reg.planID, reg.websiteVersion, reg.sourceSequence, reg.jobCount, reg.changeSHA256, maxFailures)
	if err != nil {
		return Status{}, err
	}
	rec := Record{
		EventID: reg.eventID, SiteID: reg.siteID, PlanID: reg.planID, WebsiteVersion: reg.websiteVersion,
		SourceSequence: reg.sourceSequence, JobCount: reg.jobCount, ChangeSHA256: reg.changeSHA256,
		BindingSHA256: binding, State: StatePending, MaxConsecutiveFailures: maxFailures,
		NextPollMS: now, CreatedMS: now, UpdatedMS: now, SchemaVersion: SchemaVersion,
	}
	if reg.remoteStatus == "superseded" || reg.remoteStatus == "cancelled" {
		rec.State = StateTerminal
		rec.RemoteStatus = reg.remoteStatus
		rec.OutboxMS = now
	}
	stored, created, err := s.store.Create(ctx, rec)
	if err != nil {
		return Status{}, fmt.Errorf("register %s: %w", rec.EventID, err)
	}
	if !created && stored.MaxConsecutiveFailures != rec.MaxConsecutiveFailures {
		// The failure limit is part of the binding (the reference's
		// identity), but it is the deployment's setting, not the
		// change's: after LOCALEFLOW_MAX_CONSECUTIVE_FAILURES changed, a
		// redelivered or re-sent dispatch of a registered change is the
		// same change. It is compared under the limit the record was
		// registered with, which the record keeps (docs/design.md
		// "Registration").
		if rec.BindingSHA256, err = Binding(reg.eventID, reg.siteID, reg.planID, reg.websiteVersion, reg.sourceSequence, reg.jobCount,
			reg.changeSHA256, stored.MaxConsecutiveFailures); err != nil {
			return Status{}, err
		}
		rec.MaxConsecutiveFailures = stored.MaxConsecutiveFailures
	}
	if !created && !sameIdentity(stored, rec) {
		s.log.WarnContext(ctx, "monitor register collision", "event_id", rec.EventID, "code", CodeIdempotencyCollision)
		return Status{}, core.Fail(CodeIdempotencyCollision)
	}
	if created {
		s.log.InfoContext(ctx, "monitor registered", "event_id", rec.EventID, "state", string(rec.State), "job_count", rec.JobCount)
	}
	return s.status(ctx, stored, now)
}

func sameIdentity(a, b Record) bool {
	return a.SiteID == b.SiteID && a.PlanID == b.PlanID && a.WebsiteVersion == b.WebsiteVersion &&
		a.SourceSequence == b.SourceSequence && a.JobCount == b.JobCount && a.ChangeSHA256 == b.ChangeSHA256 &&
		a.BindingSHA256 == b.BindingSHA256 && a.MaxConsecutiveFailures == b.MaxConsecutiveFailures
}

// Status returns the validated status of one change.
func (s *Service) Status(ctx context.Context, eventID string) (Status, error) {
	if !core.ValidToken(eventID) {
		return Status{}, core.Fail(CodeEventInvalid)
	}
	now, err := s.now()
	if err != nil {
		return Status{}, err
	}
	rec, err := s.store.Get(ctx, eventID)
	if err != nil {
		return Status{}, fmt.Errorf("status %s: %w", eventID, err)
	}
	return s.status(ctx, rec, now)
}

// status validates rec and builds its Status; an invalid record is marked
// failed.
func (s *Service) status(ctx context.Context, rec Record, now int64) (Status, error) {
	snap, err := s.validated(ctx, rec, now)
	if err != nil {
		return Status{}, err
	}
	return statusOf(rec, snap, now), nil
}

// validated runs Validate and marks a record that fails it as failed
// (never one of another schema version).
func (s *Service) validated(ctx context.Context, rec Record, now int64) (*lifecycle.Response, error) {
	snap, err := Validate(rec)
	if err == nil {
		return snap, nil
	}
	s.log.ErrorContext(ctx, "monitor record invalid", "event_id", safeID(rec.EventID), "code", core.CodeOf(err))
	// A record of another schema version (CodeSchemaAltered) is refused
	// and left as it is: health reports it; only an operator changes it.
	if core.HasCode(err, CodeStateInvalid) && core.ValidToken(rec.EventID) &&
		!MarkedInvalid(rec) {
		if merr := s.store.MarkInvalid(context.WithoutCancel(ctx), rec.EventID, now); merr != nil {
			return nil, errors.Join(err, fmt.Errorf("mark %s invalid: %w", rec.EventID, merr))
		}
	}
	return nil, err
}

// safeID keeps logs content-free even when a tampered record's id is not a
// token.
func safeID(id string) string {
	if core.ValidToken(id) {
		return id
	}
	return "(invalid)"
}

// Due lists up to limit event ids that may be claimable now (or hold an
// expired lease); the poller polls each with PollOnce.
func (s *Service) Due(ctx context.Context, limit int) ([]string, error) {
	now, err := s.now()
	if err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	ids, err := s.store.Due(ctx, now, limit)
	if err != nil {
		return nil, fmt.Errorf("due: %w", err)
	}
	return ids, nil
}

// DuePage lists up to limit due ids after cursor and the cursor after
// them (an empty page: nothing more is due). A listing pages through the
// whole wake index once, so entries it cannot claim never hide others;
// the scheduled sweep lists with SweepPage (the same, past the grace).
func (s *Service) DuePage(ctx context.Context, limit int, cursor DueCursor) ([]string, DueCursor, error) {
	now, err := s.now()
	if err != nil {
		return nil, cursor, err
	}
	if limit <= 0 {
		return nil, cursor, nil
	}
	ids, next, err := s.store.DuePage(ctx, now, limit, cursor)
	if err != nil {
		return nil, cursor, fmt.Errorf("due: %w", err)
	}
	return ids, next, nil
}

// SweepPage is DuePage for the scheduled sweep: it lists only entries
// whose wake time is at least Config.SweepGrace in the past, so the sweep
// leaves a change that just became due to its queued message (which would
// otherwise find it claimed or rescheduled: a refused claim) and still
// polls one whose message was lost, a grace later (docs/design.md "The
// sweep's grace period"). A lease expired more than the grace after its
// wake time is listed as before.
func (s *Service) SweepPage(ctx context.Context, limit int, cursor DueCursor) ([]string, DueCursor, error) {
	now, err := s.now()
	if err != nil {
		return nil, cursor, err
	}
	if limit <= 0 {
		return nil, cursor, nil
	}
	ids, next, err := s.store.DuePage(ctx, now-s.cfg.SweepGrace.Milliseconds(), limit, cursor)
	if err != nil {
		return nil, cursor, fmt.Errorf("due: %w", err)
	}
	return ids, next, nil
}

// Claim leases eventID for this worker when it is due. ok=false means it
// was not claimable (not due, held by a live lease, terminal, failed); an
// expired lease found on the way is reclaimed as a failure first.
func (s *Service) Claim(ctx context.Context, eventID string) (Claim, bool, error) {
	c, _, ok, _, err := s.claim(ctx, eventID)
	return c, ok, err
}

// ClaimDue claims up to limit due records. Records that cannot be claimed
// are skipped (invalid ones are marked failed and logged). When a store
// failure stops it, the claims made so far are returned with the error:
// they are held and should be finished.
func (s *Service) ClaimDue(ctx context.Context, limit int) ([]Claim, error) {
	ids, err := s.Due(ctx, limit)
	if err != nil {
		return nil, err
	}
	var claims []Claim
	for _, id := range ids {
		c, _, ok, _, err := s.claim(ctx, id)
		switch {
		case err != nil && core.HasCode(err, CodeStoreUnavailable):
			return claims, err
		case err != nil:
			s.log.WarnContext(ctx, "monitor claim skipped", "event_id", id, "code", core.CodeOf(err))
		case ok:
			claims = append(claims, c)
		}
	}
	return claims, nil
}

// claim returns the claim when ok, else the current status; reclaimed
// reports that this call reclaimed an expired lease (it wrote the new
// next_poll_ms, so its caller schedules the poll at it).
func (s *Service) claim(ctx context.Context, eventID string) (c Claim, st Status, ok, reclaimed bool, err error) {
	if !core.ValidToken(eventID) {
		return Claim{}, Status{}, false, false, core.Fail(CodeEventInvalid)
	}
	now, err := s.now()
	if err != nil {
		return Claim{}, Status{}, false, false, err
	}
	token, err := newLeaseToken()
	if err != nil {
		return Claim{}, Status{}, false, false, err
	}
	lease := Lease{Owner: s.cfg.WorkerID, Token: token, NowMS: now, ExpiresMS: now + s.cfg.Lease.Milliseconds()}
	rec, ok, err := s.store.Claim(ctx, eventID, lease)
	if err != nil {
		return Claim{}, Status{}, false, false, fmt.Errorf("claim %s: %w", eventID, err)
	}
	snap, err := s.validated(ctx, rec, now)
	if err != nil {
		return Claim{}, Status{}, false, false, err
	}
	if ok {
		if rec.State != StateLeased || rec.LeaseToken != token || rec.LeaseOwner != lease.Owner {
			return Claim{}, Status{}, false, false, core.Fail(CodeClaimLost)
		}
		s.log.InfoContext(ctx, "monitor claimed", "event_id", eventID, "attempt", rec.PollAttempts, "worker", lease.Owner)
		return claimOf(rec), Status{}, true, false, nil
	}
	// updated_ms > now refuses the claim (the condition), but it is not
	// reported as clock_regressed here: with concurrent workers it mostly
	// means another worker, whose clock read came a moment later, moved the
	// record first. A clock that really went back finds nothing due.
	if rec.State == StateLeased && rec.LeaseExpiresMS <= now && rec.UpdatedMS <= now {
		st, reclaimed, err := s.reclaim(ctx, rec, now)
		return Claim{}, st, false, reclaimed, err
	}
	return Claim{}, statusOf(rec, snap, now), false, false, nil
}

// reclaim counts an expired lease as a failure (docs/design.md "Monitor
// states and transitions"): its holder never finished the poll, and
// counting it means a change whose polls keep dying with their workers
// still reaches the failure limit; retry_wait with backoff, or failed at
// the limit, code "lease_expired". ok reports that this write did it.
func (s *Service) reclaim(ctx context.Context, rec Record, now int64) (st Status, ok bool, err error) {
	failures := rec.ConsecutiveFailures + 1
	u := Update{State: StateRetryWait, ConsecutiveFailures: failures, LastErrorCode: ReclaimErrorCode, UpdatedMS: now,
		NextPollMS: now + s.cfg.RetryDelayFor(rec.EventID, failures).Milliseconds()}
	if failures >= rec.MaxConsecutiveFailures {
		u.State, u.NextPollMS = StateFailed, now
	}
	u.Timeline = AppendTimeline(rec.Timeline, TimelineEntry{AtMS: now, State: u.State, Code: u.LastErrorCode})
	f := FenceOf(rec, now)
	f.Expired = true
	next, err := s.store.Transition(ctx, f, u)
	if err != nil {
		if core.HasCode(err, CodeStoreUnavailable) {
			return Status{}, false, fmt.Errorf("reclaim %s: %w", rec.EventID, err)
		}
		// Someone else reclaimed or finished it first: report what is there.
		st, err := s.Status(ctx, rec.EventID)
		return st, false, err
	}
	s.log.WarnContext(ctx, "monitor lease reclaimed", "event_id", rec.EventID, "state", string(next.State), "failures", failures)
	st, err = s.status(ctx, next, now)
	return st, err == nil, err
}

// newLeaseToken is 256 random bits, URL-safe base64 (a valid token).
func newLeaseToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", core.Wrap(CodeStoreUnavailable, true, fmt.Errorf("lease token: %w", err))
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// Complete records a verified lifecycle answer under the claim's lease:
// watching (next poll after PollInterval) or terminal. The answer is
// re-validated against the claim's identity; one that does not match is
// lifecycle_monitor.response_invalid and nothing is written.
//
// A terminal answer is written first, with its outbox key (the outcome is
// owed), and published only after that write succeeded (docs/design.md
// "One outcome per change"): once a record is final no poller, reclaim or
// sweep can change it, so every announcement of the change is built from
// that one final record.
func (s *Service) Complete(ctx context.Context, c Claim, resp lifecycle.Response) (Status, error) {
	if err := c.validate(); err != nil {
		return Status{}, err
	}
	now, err := s.now()
	if err != nil {
		return Status{}, err
	}
	if !core.ValidToken(resp.RequestID) {
		return Status{}, core.Fail(CodeResponseInvalid)
	}
	parsed, err := lifecycle.Parse(c.Target(), resp.RequestID, resp.Canonical)
	if err != nil || parsed.SHA256 != resp.SHA256 || parsed.Status != resp.Status {
		return Status{}, core.Fail(CodeResponseInvalid)
	}
	u := Update{
		State: StateWatching, NextPollMS: now + s.cfg.PollInterval.Milliseconds(),
		SetSnapshot: true, RemoteStatus: parsed.Status, LifecycleSHA256: parsed.SHA256,
		Lifecycle: parsed.Canonical, UpdatedMS: now,
	}
	if lifecycle.IsTerminal(parsed.Status) {
		u.State, u.NextPollMS = StateTerminal, now
	} else {
		u.RegularPollMS = u.NextPollMS
	}
	return s.finish(ctx, c, u, CodeCompletionLost)
}

// Retry records a retryable failure: retry_wait after RetryDelay, or failed
// once the consecutive failures reach the registration's limit.
func (s *Service) Retry(ctx context.Context, c Claim, code string) (Status, error) {
	return s.failure(ctx, c, code, true, 0)
}

// Fail records a failure that is not retried: failed.
func (s *Service) Fail(ctx context.Context, c Claim, code string) (Status, error) {
	return s.failure(ctx, c, code, false, 0)
}

// failure records a failure; the retry waits for the longer of the backoff
// and atLeast (a server's Retry-After).
func (s *Service) failure(ctx context.Context, c Claim, code string, retryable bool, atLeast time.Duration) (Status, error) {
	if err := c.validate(); err != nil {
		return Status{}, err
	}
	if !core.ValidErrorCode(code) {
		return Status{}, core.Fail(CodeErrorInvalid)
	}
	now, err := s.now()
	if err != nil {
		return Status{}, err
	}
	if regular, ok := hintedEarly(c, now, s.cfg.PollInterval); ok && retryable {
		// A hinted poll that failed before the change's regular poll time
		// does not count (docs/design.md "Hints"): the change stays
		// watching, due at its regular time (or the server's Retry-After,
		// if later), with its failure budget untouched; no hint moves it
		// before the Retry-After ends.
		s.log.WarnContext(ctx, "monitor hinted poll failed early", "event_id", c.EventID, "code", code)
		u := Update{State: StateWatching, ConsecutiveFailures: c.ConsecutiveFailures, UpdatedMS: now,
			NextPollMS: max(regular, now+atLeast.Milliseconds()), HintFailure: code, RegularPollMS: regular}
		if atLeast > 0 {
			u.WaitUntilMS = now + atLeast.Milliseconds()
		}
		return s.finish(ctx, c, u, CodeFailureLost)
	}
	failures := c.ConsecutiveFailures + 1
	u := Update{State: StateRetryWait, ConsecutiveFailures: failures, LastErrorCode: code, UpdatedMS: now,
		NextPollMS: now + max(s.cfg.RetryDelayFor(c.EventID, failures), atLeast).Milliseconds()}
	if !retryable || failures >= c.MaxConsecutiveFailures {
		u.State, u.NextPollMS = StateFailed, now
	}
	return s.finish(ctx, c, u, CodeFailureLost)
}

// hintedEarly reports whether the claim c is a poll a hint brought forward
// and now is still before the change's regular poll time, and returns that
// time. The claimed record was watching (its last timeline entry is
// watching: a completion or a hinted early failure) and a hint moved its
// poll. The regular time is the stored regular_poll_ms; a record written
// before that attribute reads it from the timeline: the last completion
// (the last entry watching without a code) plus the poll interval, only
// entries of hinted early failures (watching, with a code) after it.
func hintedEarly(c Claim, now int64, interval time.Duration) (int64, bool) {
	n := len(c.Timeline)
	if n == 0 || c.Timeline[n-1].State != StateWatching || c.HintMS == 0 {
		return 0, false
	}
	if c.RegularPollMS > 0 {
		return c.RegularPollMS, now < c.RegularPollMS
	}
	for i := n - 1; i >= 0; i-- {
		e := c.Timeline[i]
		if e.State != StateWatching {
			return 0, false
		}
		if e.Code != "" {
			continue
		}
		regular := e.AtMS + interval.Milliseconds()
		return regular, c.HintMS >= e.AtMS && now < regular
	}
	return 0, false
}

func (s *Service) finish(ctx context.Context, c Claim, u Update, lostCode string) (Status, error) {
	entry := TimelineEntry{AtMS: u.UpdatedMS, State: u.State, Code: u.LastErrorCode}
	if u.HintFailure != "" {
		entry.Code = u.HintFailure
	}
	if u.SetSnapshot {
		entry.RemoteStatus = u.RemoteStatus
	}
	u.Timeline = AppendTimeline(c.Timeline, entry)
	f := fenceOfClaim(c, u.UpdatedMS)
	rec, err := s.store.Transition(ctx, f, u)
	if err != nil {
		if core.HasCode(err, CodeCompletionLost) {
			err = core.Fail(lostCode)
		}
		s.log.WarnContext(ctx, "monitor finish refused", "event_id", c.EventID, "state", string(u.State), "code", core.CodeOf(err))
		return Status{}, fmt.Errorf("finish %s: %w", c.EventID, err)
	}
	s.log.InfoContext(ctx, "monitor poll finished", "event_id", c.EventID, "state", string(rec.State),
		"remote_status", rec.RemoteStatus, "code", rec.LastErrorCode, "failures", rec.ConsecutiveFailures)
	return s.status(ctx, rec, u.UpdatedMS)
}

// Health reports the monitor's health: blocked when any lease expired, any
// record failed or any change ended in a remote failure (docs/design.md
// "Health"). Records that fail validation are marked failed and counted as
// failed.
func (s *Service) Health(ctx context.Context) (Health, error) {
	now, err := s.now()
	if err != nil {
		return Health{}, err
	}
	recs, err := s.store.Census(ctx)
	if err != nil {
		return Health{}, fmt.Errorf("health: %w", err)
	}
	h := Health{Counts: map[State]int{}}
	for _, st := range States() {
		h.Counts[st] = 0
	}
	for _, rec := range recs {
		if _, err := s.validated(ctx, rec, now); err != nil {
			if core.HasCode(err, CodeStoreUnavailable) {
				return Health{}, fmt.Errorf("health: %w", err)
			}
			h.Invalid++
			h.Counts[StateFailed]++
			continue
		}
		h.Counts[rec.State]++
		switch {
		case rec.State.Claimable() && rec.NextPollMS <= now:
			h.Due++
		case rec.State == StateLeased && rec.LeaseExpiresMS <= now:
			h.ExpiredLeases++
		}
		if lifecycle.IsRemoteFailure(rec.RemoteStatus) {
			h.RemoteFailures++
		}
	}
	h.Failed = h.Counts[StateFailed]
	h.Status = HealthOK
	if h.ExpiredLeases > 0 || h.Failed > 0 || h.RemoteFailures > 0 {
		h.Status = HealthBlocked
	}
	return h, nil
}
