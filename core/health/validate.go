package health

import "github.com/localeflow/localeflow/core/release"

// ValidEvidence reports whether rec is an evidence record the coordinator
// could have written (release.ValidateEvidenceRecord).
func ValidEvidence(rec *release.EvidenceRecord) bool {
	return release.ValidateEvidenceRecord(rec) == nil
}

// ValidDelivery reports whether rec is a delivery record the coordinator
// could have written (release.ValidateDeliveryRecord; the stored bundle
// itself is checked against its hash and signature when it is sent).
func ValidDelivery(rec *release.DeliveryRecord) bool {
	return release.ValidateDeliveryRecord(rec) == nil
}

// Lease returns the record's lease and whether the record is valid: not
// Corrupt, exactly one of Evidence and Delivery set, and that record
// passing release's validation. The lease is the set record's even when it
// is invalid (zero when neither or both are set).
func (r ReleaseRecord) Lease() (release.Lease, bool) {
	switch {
	case r.Evidence != nil && r.Delivery == nil:
		return r.Evidence.Lease, !r.Corrupt && release.ValidateEvidenceRecord(r.Evidence) == nil
	case r.Delivery != nil && r.Evidence == nil:
		return r.Delivery.Lease, !r.Corrupt && release.ValidateDeliveryRecord(r.Delivery) == nil
	}
	return release.Lease{}, false
}
