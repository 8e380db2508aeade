package releasedb

import (
	"testing"

	"github.com/localeflow/localeflow/core/release"
)

// The tally's sort key is outside every range the store reads by kind:
// above the state's ("result#" and up is left out of LoadState), no text
// key, no prefix of another kind.
func TestTallyKeyIsOutsideEveryKindRange(t *testing.T) {
	sk := release.SKTally
	if sk < release.SKResultPrefix || release.IsTextKey(sk) {
		t.Fatalf("tally key %q inside the state's range or a text key", sk)
	}
	for _, prefix := range []string{release.SKJobPrefix, release.SKSourcePrefix, release.SKResultPrefix, release.SKEvidencePrefix,
		release.SKApprovalPrefix, release.SKAckPrefix, release.SKPlan, release.SKDelivery, release.SKBlocked} {
		if len(sk) >= len(prefix) && sk[:len(prefix)] == prefix {
			t.Fatalf("tally key %q starts with %q", sk, prefix)
		}
	}
}
