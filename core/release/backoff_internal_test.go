package release

import "testing"

func TestBackoff(t *testing.T) {
	for attempts, want := range map[int]int64{0: 5_000, 1: 5_000, 2: 10_000, 3: 20_000, 10: 2_560_000, 11: 3_600_000, 12: 3_600_000, 20: 3_600_000} {
		if got := backoff(attempts); got != want {
			t.Errorf("backoff(%d) = %d, want %d", attempts, got, want)
		}
	}
}

func TestExternalCode(t *testing.T) {
	for in, want := range map[string]string{
		"http_503": "evidence.http_503", "evidence.x": "evidence.x", "": "evidence.failed", "Bad Code": "evidence.failed",
		"a" + string(make([]byte, 0)) + "abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghij": "evidence.failed",
	} {
		if got := externalCode(in, "evidence"); got != want {
			t.Errorf("externalCode(%q) = %q, want %q", in, got, want)
		}
	}
}
