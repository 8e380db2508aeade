package lifecycle

import (
	"strings"
	"testing"

	"github.com/localeflow/localeflow/core"
)

// TestSnapshotIsContentFree: the delivery and tombstone objects of a CMS
// answer were stored verbatim in the monitor table (an e-mail address in
// a tombstone ended up there); the snapshot now keeps only their SHA-256
// digests, re-validating it is idempotent, and SHA256 hashes the snapshot.
func TestSnapshotIsContentFree(t *testing.T) {
	body := strings.Replace(vectorBody, `"delivery":null,"tombstone":null`,
		`"delivery":{"published_by":"editor@example.com","url":"https://example.com/de/preise"},"tombstone":{"deleted_by":"ops@example.com","reason":"gdpr"}`, 1)
	r, err := Parse(vectorTarget, "req-7f3a9c", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"@example.com", "preise", "gdpr", "published_by"} {
		if strings.Contains(string(r.Canonical), secret) || strings.Contains(string(r.Delivery)+string(r.Tombstone), secret) {
			t.Fatalf("snapshot keeps %q: %s", secret, r.Canonical)
		}
	}
	delivery, _ := core.CanonicalizeJSON([]byte(`{"url":"https://example.com/de/preise","published_by":"editor@example.com"}`))
	if want := `"delivery":{"sha256":"` + core.SHA256Hex(delivery) + `"}`; !strings.Contains(string(r.Canonical), want) {
		t.Fatalf("snapshot %s lacks %s", r.Canonical, want)
	}
	if r.SHA256 != core.SHA256Hex(r.Canonical) {
		t.Fatal("SHA256 is not the snapshot's hash")
	}
	again, err := Parse(vectorTarget, "", r.Canonical)
	if err != nil || string(again.Canonical) != string(r.Canonical) || again.SHA256 != r.SHA256 {
		t.Fatalf("re-validation changed the snapshot: %v\n%s\n%s", err, r.Canonical, again.Canonical)
	}
	// A different delivery gives a different digest.
	other, _ := Parse(vectorTarget, "req-7f3a9c", []byte(strings.Replace(body, "editor@", "chief@", 1)))
	if other.SHA256 == r.SHA256 {
		t.Fatal("digest does not bind the delivery object")
	}
}
