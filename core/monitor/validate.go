package monitor

import (
	"bytes"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/lifecycle"
)

// Validate checks that r is a record the monitor could have written
// (docs/design.md "Monitor record"): identities are tokens, hashes are
// hashes, the binding hash matches, counters and times are consistent, lease
// fields exist exactly when leased, an error code exists exactly in
// retry_wait and failed, and a stored snapshot is a valid lifecycle answer
// for this change whose status and hash match the record, and an outbox key
// exists only on a final record (at its finishing write's time). It returns
// the parsed snapshot (nil when there is none) or
// lifecycle_monitor.state_invalid, or lifecycle_monitor.schema_altered for a
// record whose schema_version is not SchemaVersion (another version, or
// none): such a record is never this code's to judge or change.
func Validate(r Record) (*lifecycle.Response, error) {
	if r.SchemaVersion != SchemaVersion {
		return nil, core.Fail(CodeSchemaAltered)
	}
	snap, ok := validRecord(r)
	if !ok {
		return nil, core.Fail(CodeStateInvalid)
	}
	return snap, nil
}

func validRecord(r Record) (*lifecycle.Response, bool) {
	if r.Corrupt || r.SchemaVersion != SchemaVersion {
		return nil, false
	}
	if !core.ValidToken(r.EventID) || !core.ValidToken(r.SiteID) || !core.ValidToken(r.PlanID) ||
		!core.ValidToken(r.WebsiteVersion) || !r.State.Valid() ||
		!core.ValidMillis(r.CreatedMS) || !core.ValidMillis(r.UpdatedMS) || !core.ValidMillis(r.NextPollMS) ||
		r.SourceSequence <= 0 || r.JobCount <= 0 ||
		!core.ValidSHA256(r.ChangeSHA256) || !core.ValidSHA256(r.BindingSHA256) ||
		r.PollAttempts < 0 || r.ConsecutiveFailures < 0 ||
		r.MaxConsecutiveFailures < 1 || r.MaxConsecutiveFailures > MaxFailures ||
		r.ConsecutiveFailures > r.MaxConsecutiveFailures ||
		r.NextPollMS < r.CreatedMS || r.UpdatedMS < r.CreatedMS ||
		(r.HintMS != 0 && (!core.ValidMillis(r.HintMS) || r.HintMS < r.CreatedMS || r.HintMS > r.UpdatedMS)) ||
		(r.RegularPollMS != 0 && (!core.ValidMillis(r.RegularPollMS) || r.RegularPollMS < r.CreatedMS)) ||
		(r.WaitUntilMS != 0 && (!core.ValidMillis(r.WaitUntilMS) || r.WaitUntilMS < r.CreatedMS)) ||
		(r.OutboxMS != 0 && (!r.State.Final() || r.OutboxMS != r.UpdatedMS)) ||
		(r.ExpiresAt != 0 && (!r.State.Final() || r.AttentionWorthy() || r.ExpiresAt < r.UpdatedMS/1000)) ||
		(r.AcknowledgedMS != 0 && (!r.AttentionWorthy() || !core.ValidMillis(r.AcknowledgedMS) || r.AcknowledgedMS < r.UpdatedMS)) {
		return nil, false
	}
	if len(r.Timeline) > TimelineMax {
		return nil, false
	}
	for i, e := range r.Timeline {
		if !e.Valid() || e.AtMS > r.UpdatedMS || (i > 0 && e.AtMS < r.Timeline[i-1].AtMS) {
			return nil, false
		}
	}
	binding, err := Binding(r.EventID, r.SiteID, r.PlanID, r.WebsiteVersion, r.SourceSequence, r.JobCount, r.ChangeSHA256, r.MaxConsecutiveFailures)
	if err != nil || binding != r.BindingSHA256 {
		return nil, false
	}
	if !validLease(r) {
		return nil, false
	}
	hasError := r.LastErrorCode != ""
	if hasError && !core.ValidErrorCode(r.LastErrorCode) {
		return nil, false
	}
	if (r.State == StateRetryWait || r.State == StateFailed) != hasError {
		return nil, false
	}
	if r.RemoteStatus != "" && !lifecycle.IsRemoteStatus(r.RemoteStatus) {
		return nil, false
	}
	snap, ok := validSnapshot(r)
	if !ok {
		return nil, false
	}
	return snap, validStateShape(r, snap != nil)
}

func validLease(r Record) bool {
	if r.State != StateLeased {
		return r.LeaseOwner == "" && r.LeaseToken == "" && r.LeaseExpiresMS == 0
	}
	return core.ValidTokenN(r.LeaseOwner, core.MaxWorkerIDLength) && core.ValidToken(r.LeaseToken) &&
		core.ValidMillis(r.LeaseExpiresMS) && r.LeaseExpiresMS > r.UpdatedMS
}

// validSnapshot re-validates the stored lifecycle answer with the same
// rules the CMS client applied, against this record's identity.
func validSnapshot(r Record) (*lifecycle.Response, bool) {
	if len(r.Lifecycle) == 0 {
		return nil, r.Lifecycle == nil && r.LifecycleSHA256 == ""
	}
	if !core.ValidSHA256(r.LifecycleSHA256) || core.SHA256Hex(r.Lifecycle) != r.LifecycleSHA256 {
		return nil, false
	}
	resp, err := lifecycle.Parse(r.Target(), "", r.Lifecycle)
	if err != nil || !bytes.Equal(resp.Canonical, r.Lifecycle) || resp.Status != r.RemoteStatus {
		return nil, false
	}
	return &resp, true
}

func immediateTerminal(r Record, hasSnapshot bool) bool {
	return r.State == StateTerminal && (r.RemoteStatus == "cancelled" || r.RemoteStatus == "superseded") && !hasSnapshot
}

func validStateShape(r Record, hasSnapshot bool) bool {
	terminalRemote := lifecycle.IsTerminal(r.RemoteStatus)
	immediate := immediateTerminal(r, hasSnapshot)
	switch {
	case !hasSnapshot && r.RemoteStatus != "" && !immediate:
		return false
	case hasSnapshot && terminalRemote && r.State != StateTerminal:
		return false
	case r.State == StateWatching && (!hasSnapshot || terminalRemote):
		return false
	case r.State == StateTerminal && !(immediate || (hasSnapshot && terminalRemote)):
		return false
	case r.State == StatePending && (r.RemoteStatus != "" || r.PollAttempts != 0):
		return false
	}
	return true
}
