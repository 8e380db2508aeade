package health

import (
	"errors"
	"fmt"
	"time"

	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/release"
)

// Age reasons: work that waits on a peer for longer than the deployment
// expects (docs/design.md "Health", "Age signals").
const (
	// ReasonChangeOpenTooLong: a monitor record has been open (pending,
	// leased, watching or retry_wait) for longer than Limits.MaxChangeAge:
	// the CMS keeps the change non-terminal, or the release behind it
	// waits for a locale's job.completed that never comes.
	ReasonChangeOpenTooLong = "health.monitor.open_too_long"
	// ReasonReleaseOpenTooLong: an open release record (an evidence or
	// delivery lease not finished, a job awaiting its claim, an approval
	// awaiting its delivery) is older than Limits.MaxReleaseAge.
	ReasonReleaseOpenTooLong = "health.release.open_too_long"
	// ReasonExpiringUnfinished: a record that is still in an index (it
	// owes work or an event) carries a TTL expiry within
	// Limits.ExpiryWarning: DynamoDB would delete it unfinished.
	ReasonExpiringUnfinished = "health.expiring_unfinished"
)

// Defaults of the age limits (LOCALEFLOW_HEALTH_MAX_CHANGE_AGE,
// LOCALEFLOW_HEALTH_MAX_RELEASE_AGE, LOCALEFLOW_HEALTH_EXPIRY_WARNING).
const (
	DefaultMaxChangeAge  = 14 * 24 * time.Hour
	DefaultMaxReleaseAge = 7 * 24 * time.Hour
	DefaultExpiryWarning = 14 * 24 * time.Hour
	// MaxAgeLimit bounds every limit (a year): a larger one is a typo.
	MaxAgeLimit = 365 * 24 * time.Hour
)

// CodeLimitsInvalid: an age limit is not in (0, MaxAgeLimit] whole
// seconds.
const CodeLimitsInvalid = "health.limits_invalid"

// Limits are the age thresholds of a health check.
type Limits struct {
	MaxChangeAge  time.Duration
	MaxReleaseAge time.Duration
	ExpiryWarning time.Duration
}

// DefaultLimits are the deployed limits when no setting is given.
func DefaultLimits() Limits {
	return Limits{MaxChangeAge: DefaultMaxChangeAge, MaxReleaseAge: DefaultMaxReleaseAge, ExpiryWarning: DefaultExpiryWarning}
}

// Validate requires every limit in (0, MaxAgeLimit], whole seconds (the
// alarms compare whole seconds).
func (l Limits) Validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"max change age", l.MaxChangeAge}, {"max release age", l.MaxReleaseAge}, {"expiry warning", l.ExpiryWarning}} {
		if f.d <= 0 || f.d > MaxAgeLimit || f.d%time.Second != 0 {
			errs = append(errs, fmt.Errorf("%s: %s %s must be whole seconds in (0, %s]", CodeLimitsInvalid, f.name, f.d, MaxAgeLimit))
		}
	}
	return errors.Join(errs...)
}

// Ages are the age signals of one check (ms; 0 when nothing is open).
type Ages struct {
	// OldestOpenChangeMS is the age of the oldest open monitor record
	// (now − created_ms).
	OldestOpenChangeMS int64
	// OldestOpenReleaseMS is the age of the oldest open release record
	// the indexes list: evidence and delivery leases from created_ms,
	// jobs awaiting their claim from received_ms, approvals awaiting the
	// delivery from approved_ms.
	OldestOpenReleaseMS int64
	// ExpiringUnfinished counts the records read through an index whose
	// TTL expiry is within the warning.
	ExpiringUnfinished int
	// OldestOpenChange and OldestOpenRelease are the event ids of the
	// oldest open change and release ("" when none), for the log line.
	OldestOpenChange, OldestOpenRelease string
}

// openChangeSince is when an open monitor record started (ok false for
// a finished or invalid one).
func openChangeSince(rec monitor.Record) (int64, bool) {
	switch rec.State {
	case monitor.StatePending, monitor.StateLeased, monitor.StateWatching, monitor.StateRetryWait:
		return rec.CreatedMS, rec.CreatedMS > 0
	}
	return 0, false
}

// openReleaseSince is when an open release record started.
func openReleaseSince(rec ReleaseRecord) (int64, bool) {
	open := func(l release.Lease) (int64, bool) {
		switch l.Status {
		case release.StatePending, release.StateLeased, release.StateRetryWait:
			return l.CreatedMS, l.CreatedMS > 0
		}
		return 0, false
	}
	switch {
	case rec.Corrupt:
		return 0, false
	case rec.Evidence != nil:
		return open(rec.Evidence.Lease)
	case rec.Delivery != nil:
		return open(rec.Delivery.Lease)
	case rec.Job != nil && rec.Job.Status == release.JobSucceeded:
		return rec.Job.ReceivedMS, rec.Job.ReceivedMS > 0
	case rec.Approval != nil:
		return rec.Approval.ApprovedMS, rec.Approval.ApprovedMS > 0
	}
	return 0, false
}

// ages computes the age signals and their reasons.
func ages(nowMS int64, c Census, l Limits) (Ages, []string) {
	var a Ages
	warnMS := l.ExpiryWarning.Milliseconds()
	for _, rec := range c.Monitor {
		if since, ok := openChangeSince(rec); ok && !rec.Corrupt && (a.OldestOpenChange == "" || nowMS-since > a.OldestOpenChangeMS) {
			a.OldestOpenChangeMS, a.OldestOpenChange = nowMS-since, safeID(rec.EventID)
		}
		// Every record health reads is in an index: it still owes work
		// or its outcome, so an expiry on it deletes it unfinished.
		if rec.ExpiresAt > 0 && rec.ExpiresAt*1000-nowMS <= warnMS {
			a.ExpiringUnfinished++
		}
	}
	for _, rec := range c.Release {
		if since, ok := openReleaseSince(rec); ok && (a.OldestOpenRelease == "" || nowMS-since > a.OldestOpenReleaseMS) {
			a.OldestOpenReleaseMS, a.OldestOpenRelease = nowMS-since, safeID(rec.EventID)
		}
	}
	var reasons []string
	if a.OldestOpenChangeMS > l.MaxChangeAge.Milliseconds() {
		reasons = append(reasons, ReasonChangeOpenTooLong)
	}
	if a.OldestOpenReleaseMS > l.MaxReleaseAge.Milliseconds() {
		reasons = append(reasons, ReasonReleaseOpenTooLong)
	}
	if a.ExpiringUnfinished > 0 {
		reasons = append(reasons, ReasonExpiringUnfinished)
	}
	return a, reasons
}

// Severities of the reasons (Severity).
const (
	// SeverityOperations: the on-call must act (an expired lease, a
	// failed record, an invalid record, a release blocked by localeflow's
	// own checks): pages.
	SeverityOperations = "operations"
	// SeverityBusiness: an outcome another team owns, decided on purpose
	// (the CMS failed or blocked the change's publication, a
	// localization job failed upstream): a ticket unless a team opts in
	// to paging.
	SeverityBusiness = "business"
	// SeverityAge: work waits on a peer for longer than expected: a
	// ticket.
	SeverityAge = "age"
)

// Severity is the class of a blocking reason: every reason not named
// here (expired leases, failures, validation codes) is operations.
func Severity(reason string) string {
	switch reason {
	case ReasonMonitorRemoteFailures, ReasonJobFailed:
		return SeverityBusiness
	case ReasonChangeOpenTooLong, ReasonReleaseOpenTooLong, ReasonExpiringUnfinished:
		return SeverityAge
	}
	return SeverityOperations
}

// Blocked says whether r is blocked by a reason of severity.
func (r Report) Blocked(severity string) bool {
	for _, reason := range r.Reasons {
		if Severity(reason) == severity {
			return true
		}
	}
	return false
}
