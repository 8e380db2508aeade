package release_test

import (
	"encoding/json"
	"testing"

	"github.com/localeflow/localeflow/core/release"
)

// The stored status attribute holds exactly these strings (a contract with
// health, the CLI and stored records), in lifecycle order.
func TestStateStringsAreTheStoredStatuses(t *testing.T) {
	want := []string{"pending", "leased", "retry_wait", "succeeded", "failed"}
	got := release.States()
	if len(got) != len(want) {
		t.Fatalf("States() = %v, want %v", got, want)
	}
	for i, s := range got {
		if string(s) != want[i] || !s.Valid() {
			t.Errorf("States()[%d] = %q (valid %v), want %q", i, s, s.Valid(), want[i])
		}
		if s.Claimable() != (s == release.StatePending || s == release.StateRetryWait) {
			t.Errorf("%q: claimable %v", s, s.Claimable())
		}
		if s.Final() == s.Open() {
			t.Errorf("%q: final %v and open %v must differ", s, s.Final(), s.Open())
		}
	}
	for _, s := range []release.State{"", "terminal", "Failed", "watching"} {
		if s.Valid() {
			t.Errorf("%q is valid", s)
		}
	}
	raw, err := json.Marshal(release.Lease{Status: release.StateRetryWait})
	if err != nil {
		t.Fatal(err)
	}
	var back release.Lease
	if err := json.Unmarshal(raw, &back); err != nil || back.Status != release.StateRetryWait {
		t.Fatalf("round trip %s: %+v, %v", raw, back, err)
	}
}
