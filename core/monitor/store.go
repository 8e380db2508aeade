package monitor

import (
	"context"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/lifecycle"
)

// Store persists records. It is shaped for DynamoDB's cost model: every
// state change is ONE conditional write that returns the new record, due
// discovery reads a sparse index of records that can wake, and health reads
// only open records and those needing attention.
//
// Stores never validate records beyond decoding them (the Service does) and
// never return SDK errors: a failure to reach the store is a *core.Error
// with CodeStoreUnavailable (retryable).
type Store interface {
	// Create inserts rec unless a record with its event id exists. It
	// returns the stored record and whether it was created (false: rec was
	// not written and the existing record is returned).
	Create(ctx context.Context, rec Record) (Record, bool, error)
	// Get reads a record with a consistent read; CodeEventMissing when
	// there is none.
	Get(ctx context.Context, eventID string) (Record, error)
	// Due lists up to limit event ids whose wake time (Record.WakeMS,
	// next_poll_ms) is ≤ nowMS, earliest first: claimable records and
	// leased ones (a claim does not move the wake key, so a leased record
	// stays listed; its claim is refused while the lease lives and reclaims
	// it once expired). A store may also list a final record whose
	// outcome is still owed (adapters/monitordb keeps it at its claim's
	// wake key until Announced, docs/design.md "Owed outcomes in the wake
	// index"), and a record of another schema version (left as it is):
	// their claims are refused and the caller announces what an owed
	// record owes (a sweep once it is OutboxGrace old).
	// It may be stale (eventually consistent); the conditional writes
	// decide.
	Due(ctx context.Context, nowMS int64, limit int) ([]string, error)
	// DuePage is Due continued from cursor: it lists up to limit due ids
	// that come after the cursor's positions and returns the cursor after
	// them (an empty page: nothing more is due). Entries a page skipped
	// stay behind the cursor, so a listing never stalls on entries that
	// cannot be claimed.
	DuePage(ctx context.Context, nowMS int64, limit int, cursor DueCursor) ([]string, DueCursor, error)
	// Claim leases a record if, at write time, its schema_version is
	// SchemaVersion, its state is claimable, next_poll_ms ≤ lease.NowMS and
	// updated_ms ≤ lease.NowMS (Claimable): it applies
	// ApplyClaim and returns the new record with ok=true. Otherwise it
	// writes nothing and returns the current record with ok=false.
	// CodeEventMissing when there is no record.
	Claim(ctx context.Context, eventID string, lease Lease) (rec Record, ok bool, err error)
	// Transition finishes a lease: if the fence holds at write time it
	// applies ApplyUpdate(current, u) and returns the new record; otherwise
	// it writes nothing and returns the error CheckFence gives for the
	// current record (CodeClaimMissing, CodeClaimLost, CodeLeaseExpired,
	// CodeClockRegressed, CodeSchemaAltered for a record of another schema
	// version, or CodeCompletionLost when the store cannot tell).
	Transition(ctx context.Context, f Fence, u Update) (Record, error)
	// MarkInvalid sets a record of this SchemaVersion that failed
	// validation to failed with CodeStateInvalid at nowMS, dropping its
	// lease and setting its outbox key to nowMS (the outcome is owed). It
	// does nothing when the record does not exist, is of another schema
	// version (never this code's to change) or is already MarkedInvalid
	// (one outcome per change: a second marking would owe a second
	// outcome_id).
	MarkInvalid(ctx context.Context, eventID string, nowMS int64) error
	// Hint moves the next poll of a watching record forward to h.NowMS if,
	// at write time, Hintable(current, h) holds: it applies ApplyHint and
	// returns the new record with ok=true, in one conditional write.
	// Otherwise it writes nothing and returns the current record with
	// ok=false. CodeEventMissing when there is no record.
	Hint(ctx context.Context, h Hint) (rec Record, ok bool, err error)
	// Owed lists up to limit event ids whose outbox key is ≤ beforeMS,
	// earliest first (a sparse index of final records whose outcome was
	// not announced yet). It may be stale.
	Owed(ctx context.Context, beforeMS int64, limit int) ([]string, error)
	// Announced clears the outbox key of eventID (and the wake position
	// the owed final record kept) if it equals finishedMS and the record
	// is of this SchemaVersion; it does nothing otherwise (cleared
	// already, another version, or no record).
	Announced(ctx context.Context, eventID string, finishedMS int64) error
	// Census returns every record that can wake or needs attention (see
	// Record.NeedsAttention); its cost never depends on other records.
	Census(ctx context.Context) ([]Record, error)
}

// DueCursor is where a listing of due ids continues: per partition of the
// wake index (a store with one ordering uses partition 0), the last entry
// listed. The zero value starts at the head.
type DueCursor struct {
	// After holds, per partition, the last entry listed.
	After map[int]DueEntry
	// Done marks partitions that have nothing more to list.
	Done map[int]bool
}

// DueEntry is one position in the wake index.
type DueEntry struct {
	WakeMS  int64
	EventID string
}

// Less orders entries by wake time, then event id.
func (e DueEntry) Less(o DueEntry) bool {
	if e.WakeMS != o.WakeMS {
		return e.WakeMS < o.WakeMS
	}
	return e.EventID < o.EventID
}

// Advance returns a copy of c with partition p moved to last (when set)
// and marked done when done is true.
func (c DueCursor) Advance(p int, last *DueEntry, done bool) DueCursor {
	next := DueCursor{After: map[int]DueEntry{}, Done: map[int]bool{}}
	for k, v := range c.After {
		next.After[k] = v
	}
	for k, v := range c.Done {
		next.Done[k] = v
	}
	if last != nil {
		next.After[p] = *last
	}
	if done {
		next.Done[p] = true
	}
	return next
}

// Lease is what a claim writes.
type Lease struct {
	Owner     string
	Token     string
	NowMS     int64
	ExpiresMS int64
}

// Fence is the condition of a finishing write: the whole claim
// (docs/design.md "Finishing writes fence on the whole claim"). A live fence
// (Expired false) requires state = leased AND lease_token = Token AND
// lease_owner = Owner AND lease_expires_ms = LeaseExpiresMS AND
// poll_attempts = Attempt AND consecutive_failures = ConsecutiveFailures AND
// max_consecutive_failures = MaxConsecutiveFailures AND the identity (site,
// plan, website version, source sequence, job count, change hash) equal to
// the claim's, AND lease_expires_ms > NowMS AND updated_ms <= NowMS. An
// expired fence (reclaiming someone else's lease) requires the same with
// lease_expires_ms <= NowMS. A finishing write therefore never applies a
// failure count or limit the stored record does not have.
type Fence struct {
	EventID string
	Owner   string
	Token   string
	NowMS   int64
	Expired bool

	SiteID                 string
	PlanID                 string
	WebsiteVersion         string
	SourceSequence         int64
	JobCount               int
	ChangeSHA256           string
	Attempt                int
	ConsecutiveFailures    int
	MaxConsecutiveFailures int
	LeaseExpiresMS         int64
}

// FenceOf is the live fence of the lease held on rec (as a claim returned
// it), for a finishing write at nowMS.
func FenceOf(rec Record, nowMS int64) Fence {
	return Fence{
		EventID: rec.EventID, Owner: rec.LeaseOwner, Token: rec.LeaseToken, NowMS: nowMS,
		SiteID: rec.SiteID, PlanID: rec.PlanID, WebsiteVersion: rec.WebsiteVersion,
		SourceSequence: rec.SourceSequence, JobCount: rec.JobCount, ChangeSHA256: rec.ChangeSHA256,
		Attempt: rec.PollAttempts, ConsecutiveFailures: rec.ConsecutiveFailures,
		MaxConsecutiveFailures: rec.MaxConsecutiveFailures, LeaseExpiresMS: rec.LeaseExpiresMS,
	}
}

func fenceOfClaim(c Claim, nowMS int64) Fence {
	return Fence{
		EventID: c.EventID, Owner: c.LeaseOwner, Token: c.LeaseToken, NowMS: nowMS,
		SiteID: c.SiteID, PlanID: c.PlanID, WebsiteVersion: c.WebsiteVersion,
		SourceSequence: c.SourceSequence, JobCount: c.JobCount, ChangeSHA256: c.ChangeSHA256,
		Attempt: c.Attempt, ConsecutiveFailures: c.ConsecutiveFailures,
		MaxConsecutiveFailures: c.MaxConsecutiveFailures, LeaseExpiresMS: core.Millis(c.LeaseExpires),
	}
}

// SameClaim reports whether the stored record r holds exactly the claim f
// describes (everything but the times checked against NowMS).
func SameClaim(r Record, f Fence) bool {
	return r.State == StateLeased && r.LeaseToken == f.Token && r.LeaseOwner == f.Owner &&
		r.LeaseExpiresMS == f.LeaseExpiresMS && r.PollAttempts == f.Attempt &&
		r.ConsecutiveFailures == f.ConsecutiveFailures && r.MaxConsecutiveFailures == f.MaxConsecutiveFailures &&
		r.SiteID == f.SiteID && r.PlanID == f.PlanID && r.WebsiteVersion == f.WebsiteVersion &&
		r.SourceSequence == f.SourceSequence && r.JobCount == f.JobCount && r.ChangeSHA256 == f.ChangeSHA256
}

// Update is the mutable part of a record a finishing write sets. The lease
// fields are always cleared; poll_attempts is kept. When SetSnapshot is
// false the stored remote status and snapshot are kept. A final State also
// sets the outbox key to UpdatedMS (the outcome is owed until announced).
type Update struct {
	State               State
	ConsecutiveFailures int
	NextPollMS          int64
	LastErrorCode       string
	SetSnapshot         bool
	RemoteStatus        string
	LifecycleSHA256     string
	Lifecycle           []byte
	UpdatedMS           int64
	// Timeline, when not nil, replaces the record's timeline (the claim's
	// timeline with this write appended).
	Timeline []TimelineEntry
	// HintFailure, set on a write back to watching after a hinted poll
	// failed before the regular poll time, is the failure's code: it goes
	// into the timeline entry only (the failure is not counted, and a
	// watching record has no last_error_code).
	HintFailure string
	// RegularPollMS is the record's regular_poll_ms after the write: a
	// completion to watching sets its next_poll_ms, a hinted early failure
	// keeps the regular time; 0 (removed) for every other write.
	RegularPollMS int64
	// WaitUntilMS is the record's wait_until_ms after the write: the end
	// of the server's Retry-After on a hinted early failure, else 0
	// (removed).
	WaitUntilMS int64
}

// Attention reports whether the updated record needs attention, given the
// remote status it will have.
func (u Update) Attention(remoteStatus string) bool {
	if u.SetSnapshot {
		remoteStatus = u.RemoteStatus
	}
	return u.State == StateFailed || (u.State == StateTerminal && lifecycle.IsRemoteFailure(remoteStatus))
}

// ApplyClaim is the record a successful claim writes.
func ApplyClaim(r Record, l Lease) Record {
	r.State = StateLeased
	r.PollAttempts++
	r.LeaseOwner = l.Owner
	r.LeaseToken = l.Token
	r.LeaseExpiresMS = l.ExpiresMS
	r.LastErrorCode = ""
	r.UpdatedMS = l.NowMS
	return r
}

// Claimable reports whether the claim condition holds for r at nowMS. A
// record of another schema version is never claimable: the claim would
// write a lease that validation then refuses, leaving it leased by nobody.
func Claimable(r Record, nowMS int64) bool {
	return r.SchemaVersion == SchemaVersion && r.State.Claimable() && r.NextPollMS <= nowMS && r.UpdatedMS <= nowMS
}

// ApplyUpdate is the record a successful Transition writes.
func ApplyUpdate(r Record, u Update) Record {
	r.State = u.State
	r.ConsecutiveFailures = u.ConsecutiveFailures
	r.NextPollMS = u.NextPollMS
	r.LastErrorCode = u.LastErrorCode
	r.LeaseOwner, r.LeaseToken, r.LeaseExpiresMS = "", "", 0
	if u.SetSnapshot {
		r.RemoteStatus = u.RemoteStatus
		r.LifecycleSHA256 = u.LifecycleSHA256
		r.Lifecycle = append([]byte(nil), u.Lifecycle...)
	}
	r.UpdatedMS = u.UpdatedMS
	r.RegularPollMS, r.WaitUntilMS = u.RegularPollMS, u.WaitUntilMS
	if u.Timeline != nil {
		r.Timeline = append([]TimelineEntry(nil), u.Timeline...)
	}
	r.OutboxMS = 0
	if u.Owes() {
		r.OutboxMS = u.UpdatedMS
	}
	return r
}

// Owes reports whether the write leaves the outcome owed: every final
// state (an outcome is published only after the write that decided it).
func (u Update) Owes() bool { return u.State.Final() }

// MarkedInvalid reports a record MarkInvalid already wrote: failed with
// CodeStateInvalid. MarkInvalid leaves such a record as it is.
func MarkedInvalid(r Record) bool {
	return r.State == StateFailed && r.LastErrorCode == CodeStateInvalid
}

// ApplyInvalid is the record MarkInvalid writes.
func ApplyInvalid(r Record, nowMS int64) Record {
	r.State = StateFailed
	r.AcknowledgedMS, r.ExpiresAt = 0, 0
	r.LastErrorCode = CodeStateInvalid
	r.LeaseOwner, r.LeaseToken, r.LeaseExpiresMS = "", "", 0
	r.UpdatedMS = nowMS
	r.OutboxMS = nowMS
	return r
}

// CheckFence explains whether f holds for the current record: nil when it
// holds, else CodeClaimMissing (no record), CodeClaimLost (not leased, or
// not exactly this claim: another token, owner, lease expiry, attempt,
// failure count or limit, or identity), CodeLeaseExpired, CodeClockRegressed
// (updated_ms > now), checked in that order: a record held under another
// claim is CodeClaimLost even when its lease also expired. For an expired
// fence, a lease still live is CodeClaimLost.
func CheckFence(current Record, exists bool, f Fence) error {
	switch {
	case !exists:
		return core.Fail(CodeClaimMissing)
	case !SameClaim(current, f):
		return core.Fail(CodeClaimLost)
	case !f.Expired && current.LeaseExpiresMS <= f.NowMS:
		return core.Fail(CodeLeaseExpired)
	case f.Expired && current.LeaseExpiresMS > f.NowMS:
		return core.Fail(CodeClaimLost)
	case current.UpdatedMS > f.NowMS:
		return core.Fail(CodeClockRegressed)
	}
	return nil
}

// LostWrite is the error a store returns when its condition failed but the
// current record satisfies the fence (it cannot tell why); the Service
// reports it as completion_lost or failure_lost.
func LostWrite() error { return core.Fail(CodeCompletionLost) }
