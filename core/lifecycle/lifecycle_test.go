package lifecycle

import (
	"strings"
	"testing"

	"github.com/localeflow/localeflow/core"
)

// vectorBody is the lifecycle_response body of the contract test vectors.
const vectorBody = `{"schema":"localeflow.cms-lifecycle.v1","request_id":"req-7f3a9c","event_id":"evt-2026-0001","site_id":"site-berlin","plan_id":"plan-42","website_version":"v2026.11.29","source_sequence":7,"status":"processing","required_locales":["de-DE","fr-FR"],"approved_locales":[],"blocked_locales":[],"queue_counts":{"pending":2},"delivery":null,"tombstone":null}`

var vectorTarget = Target{
	EventID: "evt-2026-0001", SiteID: "site-berlin", PlanID: "plan-42",
	WebsiteVersion: "v2026.11.29", SourceSequence: 7, JobCount: 2,
}

func TestParseVector(t *testing.T) {
	r, err := Parse(vectorTarget, "req-7f3a9c", []byte(vectorBody))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if r.Status != "processing" || len(r.RequiredLocales) != 2 || r.QueueCounts["pending"] != 2 ||
		r.Delivery != nil || r.Tombstone != nil || r.SourceSequence != 7 {
		t.Fatalf("unexpected response %+v", r)
	}
	if r.SHA256 != core.SHA256Hex(r.Canonical) || !strings.HasPrefix(string(r.Canonical), `{"approved_locales":[]`) {
		t.Fatalf("snapshot not canonical: %s", r.Canonical)
	}
}

func TestParseRefuses(t *testing.T) {
	replace := func(old, new string) string {
		if !strings.Contains(vectorBody, old) {
			t.Fatalf("fixture lacks %q", old)
		}
		return strings.Replace(vectorBody, old, new, 1)
	}
	tests := []struct {
		name, body, requestID string
	}{
		{"request id mismatch", vectorBody, "req-other"},
		{"wrong schema", replace(`cms-lifecycle.v1`, `cms-lifecycle.v2`), "req-7f3a9c"},
		{"event mismatch", replace(`"evt-2026-0001"`, `"evt-2026-0002"`), "req-7f3a9c"},
		{"site mismatch", replace(`"site-berlin"`, `"site-paris"`), "req-7f3a9c"},
		{"plan mismatch", replace(`"plan-42"`, `"plan-43"`), "req-7f3a9c"},
		{"version mismatch", replace(`"v2026.11.29"`, `"v2026.11.30"`), "req-7f3a9c"},
		{"sequence mismatch", replace(`"source_sequence":7`, `"source_sequence":8`), "req-7f3a9c"},
		{"sequence as string", replace(`"source_sequence":7`, `"source_sequence":"7"`), "req-7f3a9c"},
		{"sequence as bool", replace(`"source_sequence":7`, `"source_sequence":true`), "req-7f3a9c"},
		{"unknown status", replace(`"processing"`, `"exploded"`), "req-7f3a9c"},
		{"superseded is no poll answer", replace(`"processing"`, `"superseded"`), "req-7f3a9c"},
		{"required count differs from jobs", replace(`["de-DE","fr-FR"]`, `["de-DE"]`), "req-7f3a9c"},
		{"duplicate required locale", replace(`["de-DE","fr-FR"]`, `["de-DE","de-DE"]`), "req-7f3a9c"},
		{"approved not subset", replace(`"approved_locales":[]`, `"approved_locales":["it-IT"]`), "req-7f3a9c"},
		{"blocked not subset", replace(`"blocked_locales":[]`, `"blocked_locales":[["it-IT","cms.blocked"]]`), "req-7f3a9c"},
		{"blocked bad reason", replace(`"blocked_locales":[]`, `"blocked_locales":[["de-DE","Not A Code"]]`), "req-7f3a9c"},
		{"blocked not pair", replace(`"blocked_locales":[]`, `"blocked_locales":[["de-DE"]]`), "req-7f3a9c"},
		{"negative count", replace(`{"pending":2}`, `{"pending":-1}`), "req-7f3a9c"},
		{"fractional count", replace(`{"pending":2}`, `{"pending":2.5}`), "req-7f3a9c"},
		{"delivery not object", replace(`"delivery":null`, `"delivery":[]`), "req-7f3a9c"},
		{"extra key", replace(`"tombstone":null`, `"tombstone":null,"extra":1`), "req-7f3a9c"},
		{"missing key", replace(`,"tombstone":null`, ``), "req-7f3a9c"},
		{"duplicate key", replace(`"tombstone":null`, `"tombstone":null,"tombstone":null`), "req-7f3a9c"},
		{"not an object", `[]`, "req-7f3a9c"},
		{"not json", `{`, "req-7f3a9c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Parse(vectorTarget, tt.requestID, []byte(tt.body)); !core.HasCode(err, CodeResponseInvalid) {
				t.Fatalf("error = %v, want %s", err, CodeResponseInvalid)
			}
		})
	}
}

func TestStatusSets(t *testing.T) {
	for _, s := range []string{"cancelled", "deleted", "published", "superseded"} {
		if !IsTerminal(s) || !IsTerminalSuccess(s) || IsRemoteFailure(s) {
			t.Errorf("%s must be terminal success", s)
		}
	}
	for _, s := range []string{"deletion_failed", "localization_failed", "publication_blocked", "publication_failed"} {
		if !IsTerminal(s) || !IsRemoteFailure(s) || !IsPollStatus(s) {
			t.Errorf("%s must be terminal failure", s)
		}
	}
	for _, s := range []string{"awaiting_approval", "deleting", "processing", "publishing", "queue_recovery", "ready"} {
		if IsTerminal(s) || !IsPollStatus(s) {
			t.Errorf("%s must be non-terminal", s)
		}
	}
	if IsPollStatus("superseded") || IsRemoteStatus("unknown") {
		t.Error("superseded is not a poll answer; unknown is no status")
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(vectorBody), "req-7f3a9c")
	f.Add([]byte(`{"schema":1}`), "")
	f.Fuzz(func(t *testing.T, body []byte, requestID string) {
		r, err := Parse(vectorTarget, requestID, body)
		if err != nil {
			if !core.HasCode(err, CodeResponseInvalid) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if r.EventID != vectorTarget.EventID || len(r.RequiredLocales) != vectorTarget.JobCount || !IsPollStatus(r.Status) {
			t.Fatalf("accepted a response that breaks the contract: %+v", r)
		}
		if _, err := Parse(vectorTarget, "", r.Canonical); err != nil {
			t.Fatalf("canonical snapshot does not re-validate: %v", err)
		}
	})
}

// An answer whose snapshot would not fit the store is refused here, before
// anything is written: the cap sits well below DynamoDB's 400 KB item.
func TestParseRefusesSnapshotAboveTheCap(t *testing.T) {
	withDelivery := func(n int) string {
		// The canonical form adds the delivery object's bytes to the body.
		pad := strings.Repeat("x", n)
		return strings.Replace(vectorBody, `"delivery":null`, `"delivery":{"note":"`+pad+`"}`, 1)
	}
	// The cap applies to the answer's canonical form; the stored snapshot
	// (delivery and tombstone reduced to digests) is never larger.
	base, err := core.CanonicalizeJSON([]byte(withDelivery(0)))
	if err != nil {
		t.Fatal(err)
	}
	fits := MaxSnapshotBytes - len(base)
	if answer, err := core.CanonicalizeJSON([]byte(withDelivery(fits))); err != nil || len(answer) != MaxSnapshotBytes {
		t.Fatalf("test answer is %d bytes, %v; want exactly the cap", len(answer), err)
	}
	if r, err := Parse(vectorTarget, "req-7f3a9c", []byte(withDelivery(fits))); err != nil || len(r.Canonical) > MaxSnapshotBytes {
		t.Fatalf("answer of exactly the cap: stored %d bytes, %v", len(r.Canonical), err)
	}
	_, err = Parse(vectorTarget, "req-7f3a9c", []byte(withDelivery(fits+1)))
	if core.CodeOf(err) != CodeResponseInvalid {
		t.Fatalf("answer one byte above the cap: %v", err)
	}
	if MaxSnapshotBytes*3 > 400_000 {
		t.Fatalf("cap %d leaves too little room under the 400 KB item limit", MaxSnapshotBytes)
	}
}

// A JSON null is not an integer: a queue count of null is refused.
func TestParseRefusesNullQueueCount(t *testing.T) {
	body := strings.Replace(vectorBody, `"queue_counts":{"pending":2}`, `"queue_counts":{"pending":null}`, 1)
	if _, err := Parse(vectorTarget, "req-7f3a9c", []byte(body)); core.CodeOf(err) != CodeResponseInvalid {
		t.Fatalf("null queue count: %v", err)
	}
}
