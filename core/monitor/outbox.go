package monitor

import (
	"context"
	"fmt"
	"time"

	"github.com/localeflow/localeflow/core"
)

// OutboxGrace is the default Config.OutboxGrace: how long an owed outcome
// is left to the path that finished the change (which publishes it right
// after its finishing write) before a sweep re-publishes it.
const OutboxGrace = 30 * time.Second

// OutcomeSchema is the schema string hashed into an outcome id.
const OutcomeSchema = "localeflow.change-outcome.v1"

// Announcement is what localeflow.change.terminal says about one finished
// change. OutcomeID is stable across re-publishes of the same outcome
// (consumers dedupe on it): it is derived from the event id, the final
// state and the time of the finishing write (FinishedMS, the record's
// outbox key).
type Announcement struct {
	EventID string
	// SiteID and PlanID are "" when unknown (a record that failed
	// validation: only its event id is trusted).
	SiteID          string
	PlanID          string
	State           State
	RemoteStatus    string
	ErrorCode       string
	LifecycleSHA256 string
	FinishedMS      int64
	OutcomeID       string
}

// OutcomeID is the SHA-256 hex of the RFC 8785 form of
// {"schema": OutcomeSchema, "event_id", "state", "finished_ms"}.
func OutcomeID(eventID string, state State, finishedMS int64) string {
	h, err := core.HashCanonical(struct {
		Schema     string `json:"schema"`
		EventID    string `json:"event_id"`
		State      string `json:"state"`
		FinishedMS int64  `json:"finished_ms"`
	}{OutcomeSchema, eventID, string(state), finishedMS})
	if err != nil {
		// Strings and an integer always canonicalize.
		panic(fmt.Sprintf("monitor: outcome id: %v", err))
	}
	return h
}

func newAnnouncement(eventID, siteID, planID string, state State, remote, code, lifecycleSHA string, finishedMS int64) Announcement {
	return Announcement{
		EventID: eventID, SiteID: siteID, PlanID: planID, State: state, RemoteStatus: remote,
		ErrorCode: code, LifecycleSHA256: lifecycleSHA, FinishedMS: finishedMS,
		OutcomeID: OutcomeID(eventID, state, finishedMS),
	}
}

// OwedOutcomes lists up to limit event ids whose outcome has been owed for
// at least Config.OutboxGrace (the sweep re-publishes them).
func (s *Service) OwedOutcomes(ctx context.Context, limit int) ([]string, error) {
	now, err := s.now()
	if err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	ids, err := s.store.Owed(ctx, now-s.cfg.OutboxGrace.Milliseconds(), limit)
	if err != nil {
		return nil, fmt.Errorf("owed outcomes: %w", err)
	}
	return ids, nil
}

// Announcement returns the outcome owed for eventID (ok=false when none is
// owed). A record that fails validation is marked failed with
// lifecycle_monitor.state_invalid first (which owes that outcome); its
// announcement carries only the event id, the state and the code.
func (s *Service) Announcement(ctx context.Context, eventID string) (Announcement, bool, error) {
	if !core.ValidToken(eventID) {
		return Announcement{}, false, core.Fail(CodeEventInvalid)
	}
	now, err := s.now()
	if err != nil {
		return Announcement{}, false, err
	}
	rec, err := s.store.Get(ctx, eventID)
	if err != nil {
		return Announcement{}, false, fmt.Errorf("announcement %s: %w", eventID, err)
	}
	if _, err := s.validated(ctx, rec, now); err != nil {
		if !core.HasCode(err, CodeStateInvalid) {
			return Announcement{}, false, err
		}
		if rec.State != StateFailed || rec.LastErrorCode != CodeStateInvalid {
			// Just marked: read the outbox key the mark wrote.
			if rec, err = s.store.Get(ctx, eventID); err != nil {
				return Announcement{}, false, fmt.Errorf("announcement %s: %w", eventID, err)
			}
		}
		if rec.State != StateFailed || rec.LastErrorCode != CodeStateInvalid || rec.OutboxMS == 0 {
			return Announcement{}, false, nil
		}
		return newAnnouncement(eventID, "", "", StateFailed, "", CodeStateInvalid, "", rec.OutboxMS), true, nil
	}
	st := statusOf(rec, nil, now)
	a, ok := st.Announcement()
	return a, ok, nil
}

// Announced records that a's event was published: it clears the record's
// outbox key if it still holds a.FinishedMS (a conditional write; nothing
// happens when it was cleared already).
func (s *Service) Announced(ctx context.Context, a Announcement) error {
	if !core.ValidToken(a.EventID) || !core.ValidMillis(a.FinishedMS) || a.FinishedMS == 0 {
		return core.Fail(CodeEventInvalid)
	}
	if err := s.store.Announced(ctx, a.EventID, a.FinishedMS); err != nil {
		return fmt.Errorf("announced %s: %w", a.EventID, err)
	}
	s.log.InfoContext(ctx, "monitor outcome announced", "event_id", a.EventID, "state", string(a.State), "outcome_id", a.OutcomeID)
	return nil
}
