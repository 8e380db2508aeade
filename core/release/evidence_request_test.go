package release_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/localeflow/localeflow/core/release"
)

// TestEvidenceRequestIDStable pins the request id (sha256 of the canonical
// binding): stored evidence records are keyed by it, so a change to what
// the binding holds or how it is encoded must show up here.
func TestEvidenceRequestIDStable(t *testing.T) {
	tests := []struct {
		name    string
		profile string
		review  json.RawMessage
		human   bool
		want    string
	}{
		{"no commercial review", "", nil, false, "blun-l10n-evidence-a4353589552bcca3f4c48f078935e9aa881bd685f4ef4ac16fab137d2a78459b"},
		{"commercial review", "retail", json.RawMessage(`{"b":1.50,"a":[1e3,"z"]}`), true, "blun-l10n-evidence-585c97f6ab73389d2ed0972d0e46e1278ad36d5b3c848e5a13719de206ab3af9"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			job := release.PlanJob{JobID: "job-1", SourceLocale: "en-US", SourceSHA256: strings.Repeat("a", 64), TargetLocale: "de-DE", ContentType: "page", CommercialProfile: tc.profile}
			r := &release.Result{
				SourceSHA256: job.SourceSHA256, TargetSHA256: strings.Repeat("b", 64), SourceLocale: "en-US", TargetLocale: "de-DE",
				ContentType: "page", GlossaryVersion: "g", PolicyVersion: "p", Provider: release.Provider{ID: "mt", ModelID: "m", ModelVersion: "1"},
				SoftwareVersion: "s", ReviewConfidence: map[string]string{"a": "high"}, QualityProfile: map[string]string{"q": "1"}, Candidate: "x\u00e9",
				HumanReviewRequired: tc.human, IndependentReviewRequired: true, CommercialReview: tc.review,
			}
			req, err := release.BuildEvidenceRequest("evt-1", "plan-1", job, "src text", r, strings.Repeat("c", 64), "rev-1")
			if err != nil {
				t.Fatal(err)
			}
			if req.RequestID != tc.want {
				t.Fatalf("request id %s, want %s", req.RequestID, tc.want)
			}
			body, err := release.EvidenceBody(req)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(body, &m); err != nil || m["request_id"] != tc.want || m["source_text"] != "src text" || m["target_text"] != "x\u00e9" {
				t.Fatalf("body %s", body)
			}
			r.ReviewConfidence["a"] = "low"
			if req.ReviewConfidence["a"] != "high" {
				t.Fatal("the request shares the result's map")
			}
		})
	}
}
