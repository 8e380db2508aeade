package main

import (
	"context"
	"fmt"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/dev/reference"
)

// StatusReader reads a change's monitor status (*monitor.Service).
type StatusReader interface {
	Status(ctx context.Context, eventID string) (monitor.Status, error)
}

// SnapshotLoader loads a change's release records (*releasedb.Store).
type SnapshotLoader interface {
	Load(ctx context.Context, eventID string) (release.Snapshot, error)
}

// view is what the demo knows about one change at one moment: only ids,
// states, counts and codes (no texts).
type view struct {
	Monitor string
	Release string
	// Final: nothing will change any more; OK: final and as expected.
	Final bool
	OK    bool
	// Outcome says in words how the change ended.
	Outcome string
}

type observer struct {
	mon StatusReader
	rel SnapshotLoader
	cms func() reference.CMSStats
}

func (o *observer) look(ctx context.Context, c change) view {
	var v view
	st, err := o.mon.Status(ctx, c.EventID)
	var failures int
	if o.cms != nil {
		failures = o.cms().LifecycleFailures[c.EventID]
	}
	monFinal := false
	switch {
	case core.HasCode(err, monitor.CodeEventMissing):
		v.Monitor = "not registered yet"
	case err != nil:
		v.Monitor = "unreadable (" + core.CodeOf(err) + ")"
	default:
		v.Monitor, monFinal = monitorText(st, failures)
	}
	snap, err := o.rel.Load(ctx, c.EventID)
	delivered := false
	if err != nil {
		v.Release = "unreadable (" + core.CodeOf(err) + ")"
	} else {
		v.Release, delivered = releaseText(snap, c)
	}
	remote := st.RemoteStatus
	switch c.Expect {
	case expectSuperseded:
		v.Final = monFinal
		v.OK = monFinal && st.State == monitor.StateTerminal && remote == "superseded" && snap.Plan == nil
		v.Outcome = "superseded before localization: nothing to release"
	case expectPublished, expectBlocked:
		v.Final = monFinal && (delivered || st.State == monitor.StateFailed || remote != c.Expect)
		v.OK = monFinal && st.State == monitor.StateTerminal && remote == c.Expect && delivered
		if c.Expect == expectPublished {
			v.Outcome = fmt.Sprintf("%d locales approved, delivered and published", len(c.Jobs))
		} else {
			v.Outcome = "delivered, then the CMS blocked publication (pt-BR legal_hold): monitor reports a remote failure"
		}
	}
	if v.Final && !v.OK {
		v.Outcome = fmt.Sprintf("UNEXPECTED: monitor %s/%s, delivered=%v (expected %s)", st.State, remote, delivered, c.Expect)
	}
	return v
}

// monitorText renders the monitor side; final is true once the change is
// terminal or failed.
func monitorText(st monitor.Status, cmsFailures int) (string, bool) {
	retried := ""
	if cmsFailures > 0 {
		retried = fmt.Sprintf(", %d CMS 503s retried", cmsFailures)
	}
	switch st.State {
	case monitor.StatePending:
		return "registered, first poll queued", false
	case monitor.StateLeased:
		return "polling the CMS" + retried, false
	case monitor.StateWatching:
		return fmt.Sprintf("watching: CMS says %s (poll %d%s)", st.RemoteStatus, st.PollAttempts, retried), false
	case monitor.StateRetryWait:
		return fmt.Sprintf("retry %d/%d after %s", st.ConsecutiveFailures, st.MaxConsecutiveFailures, st.LastErrorCode), false
	case monitor.StateTerminal:
		return "done: CMS says " + st.RemoteStatus + retried, true
	case monitor.StateFailed:
		return "FAILED: " + st.LastErrorCode, true
	}
	return string(st.State), false
}

// releaseText renders the release side; delivered is true once the CMS
// accepted the signed delivery.
func releaseText(s release.Snapshot, c change) (string, bool) {
	if s.Plan == nil {
		if c.Expect == expectSuperseded {
			return "no release (superseded)", false
		}
		return "waiting for the plan", false
	}
	total := len(s.Plan.Jobs)
	done := 0
	for _, j := range s.Jobs {
		if j.Status == release.JobSucceeded {
			done++
		}
	}
	approved := len(s.Approvals)
	retrying := ""
	for _, e := range s.Evidence {
		if e.Status == release.StateRetryWait || e.Status == release.StateFailed {
			retrying = ", evidence " + string(e.Status) + " (" + e.LastErrorCode + ")"
		}
	}
	switch {
	case s.Delivery != nil && s.Delivery.Status == release.StateSucceeded:
		return fmt.Sprintf("delivered (%d/%d locales, signed bundle)", approved, total), true
	case s.Delivery != nil:
		d := s.Delivery
		extra := ""
		if d.LastErrorCode != "" {
			extra = ", last " + d.LastErrorCode
		}
		return fmt.Sprintf("delivering: %s, attempt %d/%d%s", d.Status, d.Attempts, d.MaxAttempts, extra), false
	case done < total:
		return fmt.Sprintf("translated %d/%d, approved %d/%d%s", done, total, approved, total, retrying), false
	default:
		return fmt.Sprintf("evidence + approval %d/%d%s", approved, total, retrying), false
	}
}
