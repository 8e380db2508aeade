package monitor

import (
	"encoding/json"
	"time"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/lifecycle"
)

// BindingSchema is the schema string of the binding object (see doc.go).
const BindingSchema = "localeflow.lifecycle-monitor-binding.v1"

// Record is the stored form of one registered change. It is content-free:
// identities, counts, codes, hashes and the canonical lifecycle snapshot.
// Times are integer milliseconds since the epoch; an absent optional value
// is the zero value ("" or 0, Lifecycle nil).
type Record struct {
	EventID                string
	SiteID                 string
	PlanID                 string
	WebsiteVersion         string
	SourceSequence         int64
	JobCount               int
	ChangeSHA256           string
	BindingSHA256          string
	State                  State
	PollAttempts           int
	ConsecutiveFailures    int
	MaxConsecutiveFailures int
	NextPollMS             int64
	LeaseOwner             string
	LeaseToken             string
	LeaseExpiresMS         int64
	LastErrorCode          string
	RemoteStatus           string
	LifecycleSHA256        string
	// Lifecycle is the canonical JSON of the last verified CMS answer.
	Lifecycle []byte
	CreatedMS int64
	UpdatedMS int64
	// OutboxMS is set (to the time of the finishing write, = UpdatedMS) on
	// a final record whose localeflow.change.terminal is still owed; 0 once
	// the event was published (or for a record that is not final).
	OutboxMS int64
	// HintMS is the time of the last hint that moved next_poll_ms forward
	// (0: never). Hints are refused until HintMS + the hint gap.
	HintMS int64
	// RegularPollMS is a watching change's regular poll time: the
	// next_poll_ms its last completion set (0: not watching, or a record
	// written before the attribute, whose regular time is read from the
	// timeline). A hint moves next_poll_ms, never this: a hinted poll that
	// fails before it does not count (docs/design.md "Hints").
	RegularPollMS int64
	// WaitUntilMS is when the wait the CMS asked for (Retry-After) after a
	// hinted poll's early failure ends (0: none): no hint moves the next
	// poll while it runs.
	WaitUntilMS int64
	// AcknowledgedMS is when an operator acknowledged a record that needed
	// attention (`localeflow ack`); 0 when it was not acknowledged. An
	// acknowledged record no longer needs attention: it leaves the
	// attention index and health stops counting it. Who and why are in the
	// acknowledgement's journal item.
	AcknowledgedMS int64
	// ExpiresAt (epoch seconds) is when DynamoDB TTL may delete a finished
	// record that needs no attention; 0 for every other record.
	ExpiresAt int64
	// Timeline is the change's last transitions (at most TimelineMax,
	// oldest first), content-free: time, state, remote status, code.
	Timeline []TimelineEntry
	// SchemaVersion of the stored layout; stores set SchemaVersion.
	SchemaVersion int
	// Corrupt is set by a store when the stored item could not be decoded
	// into a Record or its derived attributes (index keys) disagree with
	// it. A corrupt record never validates.
	Corrupt bool
}

// TimelineMax is how many transitions a record keeps (the full history is
// in the poller's log, one line per transition).
const TimelineMax = 5

// TimelineEntry is one finishing write of a change: when, the state it
// left, the CMS status it saw ("" when the poll got no answer) and the
// error code ("" when none).
type TimelineEntry struct {
	AtMS         int64  `json:"at_ms"`
	State        State  `json:"state"`
	RemoteStatus string `json:"remote_status,omitempty"`
	Code         string `json:"code,omitempty"`
}

// Valid reports whether e could have been written.
func (e TimelineEntry) Valid() bool {
	return core.ValidMillis(e.AtMS) && e.State.Valid() &&
		(e.RemoteStatus == "" || lifecycle.IsRemoteStatus(e.RemoteStatus)) &&
		(e.Code == "" || core.ValidErrorCode(e.Code))
}

// AppendTimeline returns t with e appended, keeping the last TimelineMax
// entries (a new slice; t is not changed).
func AppendTimeline(t []TimelineEntry, e TimelineEntry) []TimelineEntry {
	out := append(append(make([]TimelineEntry, 0, len(t)+1), t...), e)
	if len(out) > TimelineMax {
		out = out[len(out)-TimelineMax:]
	}
	return out
}

// Target is the identity a lifecycle answer must match.
func (r Record) Target() lifecycle.Target {
	return lifecycle.Target{
		EventID: r.EventID, SiteID: r.SiteID, PlanID: r.PlanID,
		WebsiteVersion: r.WebsiteVersion, SourceSequence: r.SourceSequence, JobCount: r.JobCount,
	}
}

// WakeMS is the record's position in the wake index: next_poll_ms for
// claimable and leased records, none otherwise. A claim leaves the wake key
// where it was (next_poll_ms, already due), so it changes no index key: a
// listing meets a leased record at once and its claim is refused while the
// lease lives; once the lease expired the same entry finds it for the
// reclaim.
func (r Record) WakeMS() (int64, bool) {
	if r.State.CanWake() {
		return r.NextPollMS, true
	}
	return 0, false
}

// NeedsAttention reports whether an operator must look at the record:
// it failed, or the CMS reported a terminal failure, and no operator
// acknowledged it yet.
func (r Record) NeedsAttention() bool {
	return r.AttentionWorthy() && r.AcknowledgedMS == 0
}

// AttentionWorthy reports whether the record is of the kind that needs
// attention until acknowledged: it failed, or the CMS reported a terminal
// failure.
func (r Record) AttentionWorthy() bool {
	return r.State == StateFailed || (r.State == StateTerminal && lifecycle.IsRemoteFailure(r.RemoteStatus))
}

// Binding is the binding hash of a registration (see doc.go). It refuses
// an identity that could not have been registered
// (lifecycle_monitor.binding_invalid).
func Binding(eventID, siteID, planID, websiteVersion string, sourceSequence int64, jobCount int, changeSHA256 string, maxFailures int) (string, error) {
	if !core.ValidToken(eventID) || !core.ValidToken(siteID) || !core.ValidToken(planID) ||
		!core.ValidToken(websiteVersion) || sourceSequence <= 0 || jobCount <= 0 ||
		!core.ValidSHA256(changeSHA256) || maxFailures < 1 || maxFailures > MaxFailures {
		return "", core.Fail(CodeBindingInvalid)
	}
	h, err := core.HashCanonical(struct {
		Schema                 string `json:"schema"`
		EventID                string `json:"event_id"`
		SiteID                 string `json:"site_id"`
		PlanID                 string `json:"plan_id"`
		WebsiteVersion         string `json:"website_version"`
		SourceSequence         int64  `json:"source_sequence"`
		JobCount               int    `json:"job_count"`
		ChangeSHA256           string `json:"change_sha256"`
		MaxConsecutiveFailures int    `json:"max_consecutive_failures"`
	}{BindingSchema, eventID, siteID, planID, websiteVersion, sourceSequence, jobCount, changeSHA256, maxFailures})
	if err != nil {
		return "", core.Wrap(CodeBindingInvalid, false, err)
	}
	return h, nil
}

// Claim is a held lease on one record: what the holder needs to poll the
// CMS and to finish the poll. Its token fences every finishing write.
type Claim struct {
	EventID                string
	SiteID                 string
	PlanID                 string
	WebsiteVersion         string
	SourceSequence         int64
	JobCount               int
	ChangeSHA256           string
	Attempt                int
	ConsecutiveFailures    int
	MaxConsecutiveFailures int
	LeaseOwner             string
	LeaseToken             string
	LeaseExpires           time.Time
	// Timeline is the claimed record's timeline; the finishing write
	// appends to it.
	Timeline []TimelineEntry
	// HintMS is the claimed record's hint_ms (0: never hinted).
	HintMS int64
	// RegularPollMS is the claimed record's regular_poll_ms (0: none).
	RegularPollMS int64
}

// Target is the identity the CMS answer must match.
func (c Claim) Target() lifecycle.Target {
	return lifecycle.Target{
		EventID: c.EventID, SiteID: c.SiteID, PlanID: c.PlanID,
		WebsiteVersion: c.WebsiteVersion, SourceSequence: c.SourceSequence, JobCount: c.JobCount,
	}
}

func (c Claim) validate() error {
	ok := core.ValidToken(c.EventID) && core.ValidToken(c.SiteID) && core.ValidToken(c.PlanID) &&
		core.ValidToken(c.WebsiteVersion) && core.ValidTokenN(c.LeaseOwner, core.MaxWorkerIDLength) &&
		core.ValidToken(c.LeaseToken) && c.SourceSequence > 0 && c.JobCount > 0 &&
		core.ValidSHA256(c.ChangeSHA256) && c.Attempt > 0 &&
		c.MaxConsecutiveFailures >= 1 && c.MaxConsecutiveFailures <= MaxFailures &&
		c.ConsecutiveFailures >= 0 && c.ConsecutiveFailures <= c.MaxConsecutiveFailures &&
		core.ValidMillis(core.Millis(c.LeaseExpires))
	if !ok {
		return core.Fail(CodeClaimInvalid)
	}
	return nil
}

func claimOf(r Record) Claim {
	return Claim{
		EventID: r.EventID, SiteID: r.SiteID, PlanID: r.PlanID, WebsiteVersion: r.WebsiteVersion,
		SourceSequence: r.SourceSequence, JobCount: r.JobCount, ChangeSHA256: r.ChangeSHA256,
		Attempt: r.PollAttempts, ConsecutiveFailures: r.ConsecutiveFailures,
		MaxConsecutiveFailures: r.MaxConsecutiveFailures, LeaseOwner: r.LeaseOwner,
		LeaseToken: r.LeaseToken, LeaseExpires: core.FromMillis(r.LeaseExpiresMS),
		Timeline: r.Timeline, HintMS: r.HintMS, RegularPollMS: r.RegularPollMS,
	}
}

// Status is the validated view of one record.
type Status struct {
	EventID                string
	SiteID                 string
	PlanID                 string
	WebsiteVersion         string
	SourceSequence         int64
	JobCount               int
	ChangeSHA256           string
	BindingSHA256          string
	State                  State
	PollAttempts           int
	ConsecutiveFailures    int
	MaxConsecutiveFailures int
	NextPoll               time.Time
	// LeaseExpires is zero unless State is leased.
	LeaseExpires    time.Time
	LeaseExpired    bool
	LastErrorCode   string
	RemoteStatus    string
	LifecycleSHA256 string
	RequiredLocales []string
	ApprovedLocales []string
	BlockedLocales  []lifecycle.BlockedLocale
	QueueCounts     map[string]int64
	Delivery        json.RawMessage
	Tombstone       json.RawMessage
	Created         time.Time
	Updated         time.Time
	// OutboxMS is the record's outbox key: non-zero while the change's
	// outcome is owed (see Announcement).
	OutboxMS int64
	// Timeline is the change's last transitions, oldest first.
	Timeline []TimelineEntry
}

// Announcement returns the outcome owed for a final change, ok=false when
// none is owed.
func (s Status) Announcement() (Announcement, bool) {
	if !s.State.Final() || s.OutboxMS == 0 {
		return Announcement{}, false
	}
	return newAnnouncement(s.EventID, s.SiteID, s.PlanID, s.State, s.RemoteStatus, s.LastErrorCode, s.LifecycleSHA256, s.OutboxMS), true
}

func statusOf(r Record, snap *lifecycle.Response, now int64) Status {
	s := Status{
		EventID: r.EventID, SiteID: r.SiteID, PlanID: r.PlanID, WebsiteVersion: r.WebsiteVersion,
		SourceSequence: r.SourceSequence, JobCount: r.JobCount, ChangeSHA256: r.ChangeSHA256,
		BindingSHA256: r.BindingSHA256, State: r.State, PollAttempts: r.PollAttempts,
		ConsecutiveFailures: r.ConsecutiveFailures, MaxConsecutiveFailures: r.MaxConsecutiveFailures,
		NextPoll: core.FromMillis(r.NextPollMS), LastErrorCode: r.LastErrorCode,
		RemoteStatus: r.RemoteStatus, LifecycleSHA256: r.LifecycleSHA256,
		RequiredLocales: []string{}, ApprovedLocales: []string{},
		BlockedLocales: []lifecycle.BlockedLocale{}, QueueCounts: map[string]int64{},
		Created: core.FromMillis(r.CreatedMS), Updated: core.FromMillis(r.UpdatedMS),
		OutboxMS: r.OutboxMS, Timeline: r.Timeline,
	}
	if r.State == StateLeased {
		s.LeaseExpires = core.FromMillis(r.LeaseExpiresMS)
		s.LeaseExpired = r.LeaseExpiresMS <= now
	}
	if snap != nil {
		s.RequiredLocales = snap.RequiredLocales
		s.ApprovedLocales = snap.ApprovedLocales
		s.BlockedLocales = snap.BlockedLocales
		s.QueueCounts = snap.QueueCounts
		s.Delivery = snap.Delivery
		s.Tombstone = snap.Tombstone
	}
	return s
}

// Outcome is the result of one poll attempt (or of a reclaim or a
// not-claimable visit). The poller schedules the next message from State
// and NextPoll: watching and retry_wait need a message at NextPoll;
// terminal and failed need none; leased means another worker holds it.
type Outcome struct {
	EventID             string
	State               State
	RemoteStatus        string
	Attempt             int
	ConsecutiveFailures int
	NextPoll            time.Time
	ErrorCode           string
	// Polled is true when this call held a lease and finished a poll.
	Polled bool
	// Reclaimed is true when this call, instead of a poll, reclaimed an
	// expired lease (Polled false): it wrote the new state and next_poll_ms,
	// so, like a poll, it owes the message for the next poll.
	Reclaimed bool
	// LeaseExpires is set when State is leased (held by someone else).
	LeaseExpires time.Time
	// FailureCode is the code of this poll's failure ("" when it got an
	// answer or did not poll): ErrorCode, or for a hinted poll that failed
	// before the regular poll time (the change stays watching, the failure
	// uncounted, ErrorCode empty) that failure's code.
	FailureCode string
	// Owed is the outcome still owed for a final change (nil when none is):
	// the caller publishes it and then calls Service.Announced.
	Owed *Announcement
}

func outcomeOf(s Status, polled bool) Outcome {
	out := Outcome{
		EventID: s.EventID, State: s.State, RemoteStatus: s.RemoteStatus, Attempt: s.PollAttempts,
		ConsecutiveFailures: s.ConsecutiveFailures, NextPoll: s.NextPoll, ErrorCode: s.LastErrorCode,
		Polled: polled, LeaseExpires: s.LeaseExpires, FailureCode: s.LastErrorCode,
	}
	if n := len(s.Timeline); polled && n > 0 && s.State == StateWatching && s.Timeline[n-1].AtMS == core.Millis(s.Updated) {
		// A hinted early failure: watching, its code only in the entry
		// this poll wrote.
		out.FailureCode = s.Timeline[n-1].Code
	}
	if a, ok := s.Announcement(); ok {
		out.Owed = &a
	}
	return out
}

// Health statuses.
const (
	HealthOK      = "ok"
	HealthBlocked = "blocked"
)

// Health is the monitor's health (docs/design.md "Health"): blocked when any
// lease expired, any record failed or any change ended in a remote
// failure.
//
// Its cost is proportional to the open records (those that can wake) and
// the records needing attention, never to finished ones: Counts[terminal]
// therefore counts only terminal records that need attention (remote
// failures); successful terminal records are not visited.
//
// The JSON form is the "monitor" object of the health contract
// (docs/design.md "Health"); Status and Invalid are for the caller.
type Health struct {
	Status         string        `json:"-"`
	Counts         map[State]int `json:"counts"`
	Due            int           `json:"due"`
	ExpiredLeases  int           `json:"expired_leases"`
	Failed         int           `json:"failed"`
	RemoteFailures int           `json:"remote_failures"`
	// Invalid counts records that failed validation during this check (they
	// were marked failed and are included in Failed).
	Invalid int `json:"-"`
}
