package health

import (
	"strings"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/lifecycle"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/release"
)

// Census is what one health check read: the open and attention records of
// both tables.
type Census struct {
	// Monitor holds the records behind every key of the monitor table's
	// wake and attention indexes.
	Monitor []monitor.Record
	// MonitorItemCount is the monitor table's approximate item count
	// (DescribeTable), or -1 when it is unknown.
	MonitorItemCount int64
	// Release holds the evidence and delivery records behind every key of
	// the release table's wake and attention indexes.
	Release []ReleaseRecord
}

// ReleaseRecord is one evidence or delivery record as read from the
// release table. Exactly one of Evidence and Delivery is set unless
// Corrupt.
type ReleaseRecord struct {
	EventID  string
	SortKey  string
	Evidence *release.EvidenceRecord
	Delivery *release.DeliveryRecord
	// Job, Approval and Blocked are the release-level entries of the
	// indexes: a succeeded job never claimed or the approval that
	// completed the plan (wake), a release blocked for good (attention).
	Job      *release.JobRecord
	Approval *release.ApprovalRecord
	Blocked  *release.BlockedRecord
	// Corrupt is set by the reader when the item did not decode, is not an
	// evidence or delivery record, or its index keys disagree with it.
	Corrupt bool
}

// Evaluate applies the health rules (doc.go) to what was read at nowMS,
// with the default age limits.
func Evaluate(nowMS int64, c Census) Report { return EvaluateWith(nowMS, c, DefaultLimits()) }

// EvaluateWith applies the health rules with the age limits l.
func EvaluateWith(nowMS int64, c Census, l Limits) Report {
	r := Report{
		Schema: Schema, CheckedAtMS: nowMS,
		Monitor: newMonitorHealth(),
		Release: contract.ReleaseHealth{Evidence: newLeaseHealth(), Delivery: newLeaseHealth()},
		Items:   []Item{},
	}
	var reasons []string
	for _, rec := range c.Monitor {
		it, reason := r.addMonitor(rec, nowMS)
		r.Items = append(r.Items, it)
		if reason != "" {
			reasons = append(reasons, reason)
		}
	}
	m := &r.Monitor
	m.Failed = m.Counts[string(monitor.StateFailed)]
	if c.MonitorItemCount >= 0 {
		m.Counts[string(monitor.StateTerminal)] += max(0, int(c.MonitorItemCount)-len(c.Monitor))
		r.TerminalApproximate = true
	}
	for _, rec := range c.Release {
		it, reason := r.addRelease(rec, nowMS)
		r.Items = append(r.Items, it)
		if reason != "" {
			reasons = append(reasons, reason)
		}
	}
	for _, l := range []*contract.LeaseHealth{&r.Release.Evidence, &r.Release.Delivery} {
		l.Failed = l.Counts[string(release.StateFailed)]
		l.Open = l.Counts[string(release.StatePending)] + l.Counts[string(release.StateLeased)] + l.Counts[string(release.StateRetryWait)]
	}
	for _, rule := range []struct {
		n      int
		reason string
	}{
		{m.ExpiredLeases, ReasonMonitorExpiredLeases}, {m.Failed, ReasonMonitorFailed},
		{m.RemoteFailures, ReasonMonitorRemoteFailures},
		{r.Release.Evidence.ExpiredLeases, ReasonEvidenceExpiredLeases}, {r.Release.Evidence.Failed, ReasonEvidenceFailed},
		{r.Release.Delivery.ExpiredLeases, ReasonDeliveryExpiredLeases}, {r.Release.Delivery.Failed, ReasonDeliveryFailed},
	} {
		if rule.n > 0 {
			reasons = append(reasons, rule.reason)
		}
	}
	var ageReasons []string
	r.Ages, ageReasons = ages(nowMS, c, l)
	reasons = append(reasons, ageReasons...)
	r.Reasons = uniqueSorted(reasons)
	r.Status = StatusOK
	if len(r.Reasons) > 0 {
		r.Status = StatusBlocked
	}
	sortItems(r.Items)
	return r
}

// addMonitor counts one monitor record; it returns the item and, for an
// invalid record, its validation code.
func (r *Report) addMonitor(rec monitor.Record, nowMS int64) (Item, string) {
	m := &r.Monitor
	it := Item{Kind: KindMonitor, EventID: safeID(rec.EventID)}
	if _, err := monitor.Validate(rec); err != nil {
		code := core.CodeOf(err)
		m.Counts[string(monitor.StateFailed)]++
		it.State, it.ErrorCode, it.Invalid, it.Attention = string(monitor.StateFailed), code, true, true
		return it, code
	}
	m.Counts[string(rec.State)]++
	it.State, it.ErrorCode, it.RemoteStatus = string(rec.State), rec.LastErrorCode, rec.RemoteStatus
	it.Attempts, it.UpdatedMS, it.Timeline = rec.PollAttempts, rec.UpdatedMS, rec.Timeline
	if wake, ok := rec.WakeMS(); ok {
		it.NextDueMS = wake
	}
	if rec.State == monitor.StateLeased {
		// A claim leaves the wake key at next_poll_ms (already past): a
		// leased record needs a worker only once its lease expired.
		it.NextDueMS = rec.LeaseExpiresMS
	}
	switch {
	case rec.State.Claimable() && rec.NextPollMS <= nowMS:
		m.Due++
		it.Due = true
	case rec.State == monitor.StateLeased && rec.LeaseExpiresMS <= nowMS:
		m.ExpiredLeases++
		it.LeaseExpired, it.Attention = true, true
	}
	if lifecycle.IsRemoteFailure(rec.RemoteStatus) {
		m.RemoteFailures++
		it.Attention = true
	}
	if rec.State == monitor.StateFailed {
		it.Attention = true
	}
	return it, ""
}

// addRelease counts one evidence or delivery record, or lists one
// release-level entry.
func (r *Report) addRelease(rec ReleaseRecord, nowMS int64) (Item, string) {
	if rec.Job != nil || rec.Approval != nil || rec.Blocked != nil {
		return addReleaseEntry(rec, nowMS)
	}
	kind, part, code := KindEvidence, &r.Release.Evidence, CodeEvidenceInvalid
	if rec.Delivery != nil || (rec.Evidence == nil && rec.SortKey == release.SKDelivery) {
		kind, part, code = KindDelivery, &r.Release.Delivery, CodeDeliveryInvalid
	}
	it := Item{Kind: kind, EventID: safeID(rec.EventID), Key: safeKey(rec.SortKey)}
	l, valid := rec.Lease()
	// Only open and failed records belong in the indexes.
	if valid && l.Status == release.StateSucceeded {
		valid = false
	}
	if !valid {
		part.Counts[string(release.StateFailed)]++
		it.State, it.ErrorCode, it.Invalid, it.Attention = string(release.StateFailed), code, true, true
		return it, code
	}
	part.Counts[string(l.Status)]++
	it.State, it.ErrorCode, it.Attempts, it.UpdatedMS = string(l.Status), l.LastErrorCode, l.Attempts, l.UpdatedMS
	if wake, ok := l.WakeMS(); ok {
		it.NextDueMS = wake
	}
	switch {
	case l.Status.Claimable() && l.NextAttemptMS <= nowMS:
		part.Due++
		it.Due = true
	case l.Status == release.StateLeased && l.LeaseExpiresMS <= nowMS:
		part.ExpiredLeases++
		it.LeaseExpired, it.Attention = true, true
	case l.Status == release.StateFailed:
		it.Attention = true
	}
	return it, ""
}

// addReleaseEntry lists a release-level index entry. A blocked release
// needs an operator; a waking job or approval is work the sweep picks up.
// An entry whose record fails its check, or does not belong in the index
// it came from, is invalid.
func addReleaseEntry(rec ReleaseRecord, nowMS int64) (Item, string) {
	it := Item{Kind: KindRelease, EventID: safeID(rec.EventID), Key: safeKey(rec.SortKey)}
	var r release.Record
	valid := !rec.Corrupt
	switch {
	case rec.Blocked != nil && rec.Job == nil && rec.Approval == nil:
		r, valid = rec.Blocked, valid && release.ValidateBlockedRecord(rec.Blocked) == nil
	case rec.Job != nil && rec.Approval == nil && rec.Blocked == nil:
		r, it.State = rec.Job, StateAwaitingClaim
	case rec.Approval != nil && rec.Job == nil && rec.Blocked == nil:
		r, it.State = rec.Approval, StateAwaitingDelivery
	default:
		valid = false
	}
	wake, wakes := int64(0), false
	if r != nil {
		var attention bool
		wake, wakes, _, attention = release.Wake(r)
		valid = valid && (wakes || attention)
	}
	if !valid {
		it.State, it.ErrorCode, it.Invalid, it.Attention = string(release.StateFailed), release.CodeRecordInvalid, true, true
		return it, release.CodeRecordInvalid
	}
	if rec.Blocked != nil {
		it.State, it.ErrorCode, it.UpdatedMS, it.Attention = StateBlocked, rec.Blocked.Code, rec.Blocked.BlockedMS, true
		return it, ReasonReleaseBlocked
	}
	if rec.Job != nil && rec.Job.Status == release.JobFailed {
		it.State, it.ErrorCode, it.UpdatedMS, it.Attention = StateJobFailed, rec.Job.ErrorCode, rec.Job.ReceivedMS, true
		return it, ReasonJobFailed
	}
	it.NextDueMS, it.Due = wake, wake <= nowMS
	return it, ""
}

// safeID keeps output content-free even when a tampered record's id is not
// a token.
func safeID(id string) string {
	if core.ValidToken(id) {
		return id
	}
	return "(invalid)"
}

func safeKey(sk string) string {
	if sk == release.SKDelivery || sk == release.SKBlocked {
		return sk
	}
	if id, ok := strings.CutPrefix(sk, release.SKEvidencePrefix); ok && core.ValidToken(id) {
		return id
	}
	for _, prefix := range []string{release.SKJobPrefix, release.SKApprovalPrefix} {
		if id, ok := strings.CutPrefix(sk, prefix); ok && core.ValidToken(id) {
			return sk
		}
	}
	if sk == "" {
		return ""
	}
	return "(invalid)"
}
