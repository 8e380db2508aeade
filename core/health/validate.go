package health

import (
	"encoding/base64"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
)

// The release coordinator validates its evidence and delivery records with
// unexported functions (core/release lease.go valid, evidence_state.go
// validEvidenceRecord, delivery.go deliveryBody); these are the same rules
// (the reference's _status_from_row), kept here until core/release exports
// them.

// ValidEvidence reports whether rec is an evidence record the coordinator
// could have written.
func ValidEvidence(rec *release.EvidenceRecord) bool {
	return rec != nil && core.ValidToken(rec.RequestID) && core.ValidToken(rec.EventID) &&
		core.ValidToken(rec.PlanID) && core.ValidToken(rec.JobID) && core.ValidSHA256(rec.ResultSHA256) &&
		core.ValidToken(rec.EvidenceRevision) && rec.Version > 0 && validLease(rec.Lease)
}

// ValidDelivery reports whether rec is a delivery record the coordinator
// could have written (the stored bundle itself is checked against its hash
// and signature when it is sent).
func ValidDelivery(rec *release.DeliveryRecord) bool {
	if rec == nil {
		return false
	}
	sig, err := base64.RawURLEncoding.DecodeString(rec.Signature)
	return err == nil && len(sig) > 0 && core.ValidToken(rec.EventID) && core.ValidToken(rec.PlanID) &&
		core.ValidToken(rec.SiteID) && core.ValidToken(rec.DeliveryID) && core.ValidSHA256(rec.BundleSHA256) &&
		core.ValidMillis(rec.PreparedMS) && rec.Version > 0 && validLease(rec.Lease)
}

func validLease(l release.Lease) bool {
	switch l.Status {
	case release.StatePending, release.StateLeased, release.StateRetryWait, release.StateSucceeded, release.StateFailed:
	default:
		return false
	}
	if l.MaxAttempts < 1 || l.MaxAttempts > release.MaxAttempts || l.Attempts < 0 || l.Attempts > l.MaxAttempts {
		return false
	}
	if !core.ValidMillis(l.NextAttemptMS) || !core.ValidMillis(l.CreatedMS) || !core.ValidMillis(l.UpdatedMS) {
		return false
	}
	if l.Status == release.StateLeased {
		if !core.ValidToken(l.LeaseOwner) || !core.ValidToken(l.LeaseToken) ||
			!core.ValidMillis(l.LeaseExpiresMS) || l.LeaseExpiresMS <= l.NextAttemptMS {
			return false
		}
	} else if l.LeaseOwner != "" || l.LeaseToken != "" || l.LeaseExpiresMS != 0 {
		return false
	}
	if l.LastErrorCode != "" {
		if !core.ValidErrorCode(l.LastErrorCode) {
			return false
		}
		if l.Status == release.StatePending || l.Status == release.StateLeased || l.Status == release.StateSucceeded {
			return false
		}
	}
	return true
}
