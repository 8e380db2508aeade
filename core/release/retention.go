package release

import "time"

// DefaultRetention is how long a content-free release record is kept after
// its last write once it needs nothing more (docs/design.md "Release
// records expire (retention)"): 90 days, the monitor records' retention.
const DefaultRetention = 90 * 24 * time.Hour

// DefaultTextRetention is how long source and result texts are kept once
// their release has ended (delivered, blocked for good, or acknowledged by
// an operator: docs/design.md "Retention"); LOCALEFLOW_TEXT_RETENTION.
const DefaultTextRetention = 7 * 24 * time.Hour

// ExpiresAt is when a store lets DynamoDB delete rec (epoch seconds, the
// table's TTL attribute), written with the record: retention after the
// record's last write, for a content-free record that sits in no index —
// nothing due (wake; an owed approval event keeps its evidence record
// there), nothing needing attention (a
// failed or blocked record expires only once acknowledged, counted from
// the acknowledgement). Texts (source, result) have their own, shorter
// retention and get none here; a retention ≤ 0 sets none.
func ExpiresAt(rec Record, retention time.Duration) (int64, bool) {
	if retention <= 0 || rec == nil {
		return 0, false
	}
	if _, wakes, _, attention := Wake(rec); wakes || attention {
		return 0, false
	}
	var lastMS int64
	switch r := rec.(type) {
	case *PlanRecord:
		lastMS = r.ReceivedMS
	case *JobRecord:
		lastMS = max(r.ReceivedMS, r.AcknowledgedMS)
	case *ApprovalRecord:
		lastMS = r.ApprovedMS
	case *EvidenceRecord:
		lastMS = max(r.UpdatedMS, r.AcknowledgedMS)
	case *DeliveryRecord:
		lastMS = max(r.UpdatedMS, r.AcknowledgedMS)
	case *BlockedRecord:
		lastMS = r.AcknowledgedMS
	case *AckRecord:
		lastMS = r.AckMS
	case *TallyRecord:
		lastMS = r.UpdatedMS
	default:
		return 0, false
	}
	if lastMS <= 0 {
		return 0, false
	}
	return (lastMS + retention.Milliseconds()) / 1000, true
}
