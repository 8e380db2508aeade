// Package healthtest builds valid monitor, evidence and delivery records
// in every state for health tests (unit tests and the local stack).
package healthtest

import (
	"fmt"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/monitor/monitortest"
	"github.com/localeflow/localeflow/core/release"
)

// Monitor variants: the monitor states plus a terminal remote failure.
const (
	Pending       = "pending"
	Leased        = "leased"
	Watching      = "watching"
	RetryWait     = "retry_wait"
	Terminal      = "terminal"
	Failed        = "failed"
	RemoteFailure = "remote_failure"
	// PublicationBlocked is a terminal record whose CMS status is
	// publication_blocked (a remote failure).
	PublicationBlocked = "publication_blocked"
)

// Times relative to the record's base time (ms).
const (
	PollInterval = 30_000
	RetryDelay   = 5_000
	LeaseMS      = 600_000
)

// MonitorRecord is a valid monitor record of variant, registered at baseMS
// and last changed at baseMS+1: pending is due at baseMS; watching at
// baseMS+1+PollInterval; retry_wait at baseMS+1+RetryDelay; a leased one
// expires at baseMS+1+LeaseMS.
func MonitorRecord(eventID, variant string, baseMS int64) monitor.Record {
	r := monitortest.NewRecord(eventID, baseMS)
	if variant == Pending {
		return r
	}
	at := baseMS + 1
	r.UpdatedMS, r.PollAttempts = at, 1
	snapshot := func(status string) {
		s := monitortest.Snapshot(r, status)
		r.RemoteStatus, r.LifecycleSHA256, r.Lifecycle = s.Status, s.SHA256, s.Canonical
	}
	switch variant {
	case Leased:
		r.State, r.LeaseOwner, r.LeaseToken, r.LeaseExpiresMS = monitor.StateLeased, "worker-1", "token-"+eventID, at+LeaseMS
	case Watching:
		r.State, r.NextPollMS = monitor.StateWatching, at+PollInterval
		snapshot("processing")
	case RetryWait:
		r.State, r.NextPollMS, r.ConsecutiveFailures, r.LastErrorCode = monitor.StateRetryWait, at+RetryDelay, 1, "cms.http_503"
	case Failed:
		r.State, r.NextPollMS, r.ConsecutiveFailures, r.LastErrorCode = monitor.StateFailed, at, 5, "cms.http_503"
		r.PollAttempts = 5
	case Terminal:
		r.State, r.NextPollMS = monitor.StateTerminal, at
		snapshot("published")
	case RemoteFailure:
		r.State, r.NextPollMS = monitor.StateTerminal, at
		snapshot("publication_failed")
	case PublicationBlocked:
		r.State, r.NextPollMS = monitor.StateTerminal, at
		snapshot("publication_blocked")
	default:
		panic(fmt.Sprintf("healthtest: unknown monitor variant %q", variant))
	}
	return r
}

func lease(status string, baseMS int64) release.Lease {
	at := baseMS + 1
	l := release.Lease{Status: release.State(status), MaxAttempts: 5, NextAttemptMS: baseMS, CreatedMS: baseMS, UpdatedMS: baseMS}
	switch l.Status {
	case release.StatePending:
	case release.StateLeased:
		l.Attempts, l.LeaseOwner, l.LeaseToken, l.LeaseExpiresMS, l.UpdatedMS = 1, "coordinator-1", "lease-token-1", at+LeaseMS, at
	case release.StateRetryWait:
		l.Attempts, l.NextAttemptMS, l.LastErrorCode, l.UpdatedMS = 1, at+RetryDelay, "evidence.http_503", at
	case release.StateFailed:
		l.Attempts, l.NextAttemptMS, l.LastErrorCode, l.UpdatedMS = 5, at, "evidence.http_503", at
	case release.StateSucceeded:
		l.Attempts, l.NextAttemptMS, l.UpdatedMS = 1, at, at
	default:
		panic(fmt.Sprintf("healthtest: unknown lease status %q", status))
	}
	return l
}

// Evidence is a valid evidence record of one request in status (a
// release lease state) at baseMS, with the timing of MonitorRecord.
func Evidence(eventID, requestID, status string, baseMS int64) *release.EvidenceRecord {
	return &release.EvidenceRecord{
		RequestID: requestID, EventID: eventID, PlanID: "plan-42", JobID: "job-" + requestID,
		ResultSHA256: core.SHA256Hex([]byte("result:" + requestID)), EvidenceRevision: "rev-1",
		Lease: lease(status, baseMS), Version: 1,
	}
}

// Delivery is a valid delivery record of eventID in status at baseMS.
func Delivery(eventID, status string, baseMS int64) *release.DeliveryRecord {
	l := lease(status, baseMS)
	if l.LastErrorCode != "" {
		l.LastErrorCode = "cms.http_503"
	}
	return &release.DeliveryRecord{
		EventID: eventID, PlanID: "plan-42", SiteID: "site-berlin", DeliveryID: "dlv-" + eventID,
		BundleSHA256: core.SHA256Hex([]byte("bundle:" + eventID)), Signature: "c2lnbmF0dXJlLWJ5dGVz",
		PreparedMS: baseMS, Lease: l, Version: 1,
	}
}
