package sim

import "testing"

// TestBlockedCodeClasses: the codes an injected transient fault may leave
// on a failed evidence or delivery record are the documented retryable and
// lease-race codes (docs/design.md "Release error codes"), never a
// stored-state code, and the stored-state codes are the documented ones.
func TestBlockedCodeClasses(t *testing.T) {
	for code, want := range map[string]bool{
		"evidence.attempts_exhausted": true, "evidence.unavailable": true, "evidence.timeout": true,
		"evidence.http_503": true, "evidence.http_429": true, "cms.http_500": true, "cms.delivery.failed": true,
		"cms.unavailable": true, "evidence.http_404": false, "cms.http_5": false, "cms.http_5000": false,
		"cms.delivery.bundle_mismatch": false, "approval.result_mismatch": false, "result.missing": false,
		"evidence.state.invalid": false, "release.receipt.issuer_untrusted": false, "": false,
		"release.store.write_failed": true, "evidence.lease_expired": true, "lease_expired": true,
		"release.operation_guard": true, "release.coordinator.store.read_failed": true, "release.receipt.expired": false, "cms.delivery.finish_lost": true,
	} {
		if got := transientCode(code); got != want {
			t.Errorf("transientCode(%q) = %v, want %v", code, got, want)
		}
		if want && storedStateCode(code) {
			t.Errorf("storedStateCode(%q) = true for a transient code", code)
		}
	}
	for code, want := range map[string]bool{
		"cms.delivery.bundle_mismatch": true, "approval.result_mismatch": true, "result.missing": true,
		"evidence.state.attempt_policy_changed": true, "cms.approval.expired": true, "coordinator.plan.seal_invalid": true,
		"evidence.attempts_exhausted": false, "cms.delivery.failed": false, "release.receipt.issuer_untrusted": false,
		// Retryable (the event key set could not be re-read just now): never blocks.
		"coordinator.plan.seal_unverified": false,
	} {
		if got := storedStateCode(code); got != want {
			t.Errorf("storedStateCode(%q) = %v, want %v", code, got, want)
		}
	}
}
