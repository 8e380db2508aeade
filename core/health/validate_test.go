package health_test

import (
	"testing"

	"github.com/localeflow/localeflow/core/health"
	"github.com/localeflow/localeflow/core/health/healthtest"
	"github.com/localeflow/localeflow/core/release"
)

func TestValidEvidence(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(*release.EvidenceRecord)
		valid bool
	}{
		{"pending", func(*release.EvidenceRecord) {}, true},
		{"request id not a token", func(r *release.EvidenceRecord) { r.RequestID = "req 1" }, false},
		{"result hash", func(r *release.EvidenceRecord) { r.ResultSHA256 = "ABC" }, false},
		{"revision", func(r *release.EvidenceRecord) { r.EvidenceRevision = "" }, false},
		{"version 0", func(r *release.EvidenceRecord) { r.Version = 0 }, false},
		{"unknown status", func(r *release.EvidenceRecord) { r.Status = "done" }, false},
		{"attempts above max", func(r *release.EvidenceRecord) { r.Attempts = 6 }, false},
		{"max attempts above 20", func(r *release.EvidenceRecord) { r.MaxAttempts = 21 }, false},
		{"lease fields while pending", func(r *release.EvidenceRecord) { r.LeaseToken = "t" }, false},
		{"error code while pending", func(r *release.EvidenceRecord) { r.LastErrorCode = "evidence.http_503" }, false},
		{"bad error code", func(r *release.EvidenceRecord) { r.Status, r.LastErrorCode = "failed", "Bad Code" }, false},
		{"negative time", func(r *release.EvidenceRecord) { r.UpdatedMS = -1 }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := healthtest.Evidence("evt-1", "req-1", "pending", base)
			tc.edit(r)
			if got := health.ValidEvidence(r); got != tc.valid {
				t.Fatalf("valid = %v, want %v", got, tc.valid)
			}
		})
	}
	for _, st := range []string{"pending", "leased", "retry_wait", "failed", "succeeded"} {
		if !health.ValidEvidence(healthtest.Evidence("evt-1", "req-1", st, base)) {
			t.Fatalf("fixture %s invalid", st)
		}
	}
	leased := healthtest.Evidence("evt-1", "req-1", "leased", base)
	leased.LeaseExpiresMS = leased.NextAttemptMS
	if health.ValidEvidence(leased) {
		t.Fatal("a lease ending at its start is valid")
	}
	if health.ValidEvidence(nil) || health.ValidDelivery(nil) {
		t.Fatal("nil is valid")
	}
}

func TestValidDelivery(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(*release.DeliveryRecord)
		valid bool
	}{
		{"pending", func(*release.DeliveryRecord) {}, true},
		{"signature not base64url", func(r *release.DeliveryRecord) { r.Signature = "a+b/" }, false},
		{"empty signature", func(r *release.DeliveryRecord) { r.Signature = "" }, false},
		{"delivery id", func(r *release.DeliveryRecord) { r.DeliveryID = "" }, false},
		{"bundle hash", func(r *release.DeliveryRecord) { r.BundleSHA256 = "x" }, false},
		{"site", func(r *release.DeliveryRecord) { r.SiteID = "site berlin" }, false},
		{"prepared time", func(r *release.DeliveryRecord) { r.PreparedMS = -5 }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := healthtest.Delivery("evt-1", "pending", base)
			tc.edit(r)
			if got := health.ValidDelivery(r); got != tc.valid {
				t.Fatalf("valid = %v, want %v", got, tc.valid)
			}
		})
	}
}
