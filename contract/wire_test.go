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
	type section struct {
		N int `json:"n"`
	}
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
		{"blocked, check failed", contract.HealthBlocked[section, section]{Schema: "h", CheckedAtMS: 5, Reasons: []string{"r"}},
			`{"schema":"h","checked_at_ms":5,"reasons":["r"]}`},
		{"blocked", contract.HealthBlocked[section, section]{Schema: "h", CheckedAtMS: 5, Reasons: []string{"r"}, Monitor: &section{1}, Release: &section{2}},
			`{"schema":"h","checked_at_ms":5,"reasons":["r"],"monitor":{"n":1},"release":{"n":2}}`},
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
			if v.SetBy < contract.Stack || v.SetBy > contract.Retired {
				t.Errorf("%s: %s has no setter", fn, v.Name)
			}
		}
	}
}
