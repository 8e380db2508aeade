package contract_test

import (
	"encoding/json"
	"testing"

	"github.com/localeflow/localeflow/contract"
)

// TestWireEncodings pins the JSON of every struct in the contract: a
// renamed key, a lost omitempty or a changed null breaks consumers.
func TestWireEncodings(t *testing.T) {
	s := func(v string) *string { return &v }
	for _, tt := range []struct {
		name string
		v    any
		want string
	}{
		{"signed v2", contract.SignedDetail{Payload: "{}", Timestamp: "1764460830", Signature: "v2=ab"},
			`{"payload":"{}","timestamp":"1764460830","signature":"v2=ab"}`},
		{"signed v1", contract.SignedDetail{Payload: "{}", Signature: "v1=ab"}, `{"payload":"{}","signature":"v1=ab"}`},
		{"hint", contract.ChangeHint{EventID: "evt-1", SiteID: "site-1"}, `{"event_id":"evt-1","site_id":"site-1"}`},
		{"terminal", contract.ChangeTerminal{Schema: contract.SchemaChangeTerminal, EventID: "evt-1", OutcomeID: "o", SiteID: s("site-1"), State: "failed", ErrorCode: s("c")},
			`{"schema":"localeflow.change-terminal.v1","event_id":"evt-1","outcome_id":"o","site_id":"site-1","plan_id":null,"state":"failed","remote_status":null,"error_code":"c","lifecycle_sha256":null}`},
		{"approved", contract.ReleaseApproved{Schema: contract.SchemaReleaseApproved, EventID: "e", PlanID: "p", JobID: "j", TargetLocale: "de-DE", ApprovalID: "a"},
			`{"schema":"localeflow.release-approved.v1","event_id":"e","plan_id":"p","job_id":"j","target_locale":"de-DE","approval_id":"a"}`},
		{"delivery", contract.Delivery{Schema: contract.SchemaDelivery, EventID: "e", PlanID: "p", DeliveryID: "d", Status: "delivered"},
			`{"schema":"localeflow.delivery.v1","event_id":"e","plan_id":"p","delivery_id":"d","status":"delivered"}`},
		{"blocked, check failed", contract.HealthBlocked{Schema: "h", CheckedAtMS: 5, Reasons: []string{"r"}},
			`{"schema":"h","checked_at_ms":5,"reasons":["r"]}`},
		{"blocked", contract.HealthBlocked{Schema: "h", CheckedAtMS: 5, Reasons: []string{"r"},
			Monitor: &contract.MonitorHealth{Counts: map[string]int{"polling": 1}, Due: 1, ExpiredLeases: 2, Failed: 3, RemoteFailures: 4},
			Release: &contract.ReleaseHealth{Evidence: contract.LeaseHealth{Counts: map[string]int{"leased": 1}, Open: 1, Due: 2, ExpiredLeases: 3, Failed: 4}}},
			`{"schema":"h","checked_at_ms":5,"reasons":["r"],` +
				`"monitor":{"counts":{"polling":1},"due":1,"expired_leases":2,"failed":3,"remote_failures":4},` +
				`"release":{"evidence":{"counts":{"leased":1},"open":1,"due":2,"expired_leases":3,"failed":4},` +
				`"delivery":{"counts":null,"open":0,"due":0,"expired_leases":0,"failed":0}}}`},
		{"approval payload", contract.ApprovalPayload{Schema: contract.ApprovalSchema, ApprovalID: "a", EventID: "e", SiteID: "s", PlanID: "p", JobID: "j",
			TargetLocale: "de-DE", ResultSHA256: "r", EvidenceRequestID: "q", QualityReceiptSHA256: "h", ApprovedAtMS: 1, ExpiresAtMS: 2},
			`{"schema":"localeflow.approval.v1","approval_id":"a","event_id":"e","site_id":"s","plan_id":"p","job_id":"j","target_locale":"de-DE",` +
				`"result_sha256":"r","evidence_request_id":"q","quality_receipt_sha256":"h","approved_at_ms":1,"expires_at_ms":2}`},
		{"delivery request", contract.DeliveryRequest{Schema: contract.DeliveryRequestSchema, DeliveryID: "d", EventID: "e", SiteID: "s", Bundle: "t"},
			`{"schema":"localeflow.delivery-request.v1","delivery_id":"d","event_id":"e","site_id":"s","bundle":"t"}`},
		{"bundle", contract.Bundle{Schema: contract.DeliveryBundleSchema, DeliveryID: "d", EventID: "e", SiteID: "s", PlanID: "p", PreparedAtMS: 1,
			Locales: []contract.BundleLocale{{JobID: "j", SourceLocale: "en", TargetLocale: "de-DE", ContentType: "text/plain", SourceSHA256: "a",
				TargetSHA256: "b", ResultSHA256: "c", Text: "Hallo", ApprovalID: "i", Approval: "t"}}},
			`{"schema":"localeflow.delivery-bundle.v1","delivery_id":"d","event_id":"e","site_id":"s","plan_id":"p","prepared_at_ms":1,"locales":[` +
				`{"job_id":"j","source_locale":"en","target_locale":"de-DE","content_type":"text/plain","source_sha256":"a","target_sha256":"b",` +
				`"result_sha256":"c","text":"Hallo","approval_id":"i","approval":"t"}]}`},
		{"evidence request", contract.EvidenceRequest{RequestID: contract.EvidenceRequestIDPrefix + "h", EvidenceBinding: contract.EvidenceBinding{
			Schema: contract.EvidenceRequestSchema, EvidenceRevision: "v", EventID: "e", PlanID: "p", JobID: "j", Provider: contract.Provider{ID: "m"}},
			SourceText: "Hello", TargetText: "Hallo"},
			`{"request_id":"blun-l10n-evidence-h","schema":"blun.localization-quality-evidence-request.v5","evidence_revision":"v","event_id":"e",` +
				`"plan_id":"p","job_id":"j","result_sha256":"","source_sha256":"","target_sha256":"","source_locale":"","target_locale":"",` +
				`"content_type":"","glossary_version":"","policy_version":"","provider":{"id":"m","model_id":"","model_version":""},` +
				`"software_version":"","review_confidence":null,"quality_profile":null,"commercial_profile":null,"commercial_review":null,` +
				`"human_review_required":false,"independent_review_required":false,"source_text":"Hello","target_text":"Hallo"}`},
		{"receipt payload", contract.ReceiptPayload{Kind: "quality", Issuer: "i", RequestID: "q", ResultSHA256: "r", IssuedAtMS: 1, ExpiresAtMS: 2},
			`{"kind":"quality","issuer":"i","request_id":"q","result_sha256":"r","issued_at_ms":1,"expires_at_ms":2}`},
		{"delayed", contract.DelayedMessage{Schema: contract.DelayedSchema, Kind: contract.KindPoll, EventID: "evt-1", NotBeforeMS: 1764460830000},
			`{"schema":"localeflow.delayed.v1","kind":"poll","event_id":"evt-1","not_before_ms":1764460830000}`},
		{"delayed with ref", contract.DelayedMessage{Schema: contract.DelayedSchema, Kind: contract.KindReleaseRun, EventID: "e", Ref: "r", NotBeforeMS: 1},
			`{"schema":"localeflow.delayed.v1","kind":"release.run","event_id":"e","ref":"r","not_before_ms":1}`},
	} {
		got, err := json.Marshal(tt.v)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if string(got) != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
}

// TestDetailTypesInputsAndOutputsDisjoint: every detail-type is listed
// once, as an input or as an output, under the localeflow prefix.
func TestDetailTypesInputsAndOutputsDisjoint(t *testing.T) {
	seen := map[string]bool{}
	for _, dt := range append(append([]string{}, contract.InputDetailTypes...), contract.OutputDetailTypes...) {
		if seen[dt] {
			t.Errorf("%s listed twice", dt)
		}
		seen[dt] = true
		if len(dt) <= len(contract.EventSource)+1 || dt[:len(contract.EventSource)+1] != contract.EventSource+"." {
			t.Errorf("%s does not start with %s.", dt, contract.EventSource)
		}
	}
	if len(seen) != 9 {
		t.Errorf("%d detail-types, want 9", len(seen))
	}
}

// TestFunctionEnvListsNamesOnce: a function's list names each variable once
// and says who sets it.
func TestFunctionEnvListsNamesOnce(t *testing.T) {
	for fn, vars := range contract.FunctionEnv {
		seen := map[string]bool{}
		for _, v := range vars {
			if seen[v.Name] {
				t.Errorf("%s: %s listed twice", fn, v.Name)
			}
			seen[v.Name] = true
			if v.SetBy < contract.Stack || v.SetBy > contract.Runtime {
				t.Errorf("%s: %s has no setter", fn, v.Name)
			}
		}
	}
}
