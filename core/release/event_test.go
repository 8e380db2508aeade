package release_test

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/signing"
)

func TestSignedEventVector(t *testing.T) {
	raw, err := os.ReadFile("testdata/signatures.json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		SignedEvent struct {
			KeyHex    string `json:"key_hex"`
			Payload   string `json:"payload"`
			Signature string `json:"signature"`
		} `json:"signed_event"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	key, _ := hex.DecodeString(v.SignedEvent.KeyHex)
	detail, _ := json.Marshal(map[string]string{"payload": v.SignedEvent.Payload, "signature": v.SignedEvent.Signature})
	// The contract vector's signature verifies; its plan has no jobs, which
	// the payload validation then refuses.
	_, err = release.ParseSignedEvent(key, contract.DetailPlanAccepted, detail)
	wantCode(t, err, release.CodePlanJobsInvalid)
	bad, _ := json.Marshal(map[string]string{"payload": v.SignedEvent.Payload + " ", "signature": v.SignedEvent.Signature})
	_, err = release.ParseSignedEvent(key, contract.DetailPlanAccepted, bad)
	wantCode(t, err, release.CodeEventSignatureInvalid)
}

func TestParseSignedEvent(t *testing.T) {
	fx := releasetest.NewFixture()
	plan := releasetest.NewPlan("evt-1", "de-DE", "fr-FR")
	signed := func(payload string) []byte { return fx.Detail([]byte(payload)) }
	planJSON := string(plan.PlanPayload())
	resultJSON := string(plan.ResultPayload("de-DE", releasetest.ResultOptions{}))
	replace := func(s, old, new string) string {
		if !strings.Contains(s, old) {
			t.Fatalf("fixture lacks %q", old)
		}
		return strings.Replace(s, old, new, 1)
	}
	huge := strings.Repeat("x", release.MaxItemBytes+1)
	hugeResult := string(plan.ResultPayload("de-DE", releasetest.ResultOptions{Candidate: huge}))
	tests := []struct {
		name       string
		detailType string
		detail     []byte
		code       string
	}{
		{"valid plan", contract.DetailPlanAccepted, signed(planJSON), ""},
		{"valid result", contract.DetailJobCompleted, signed(resultJSON), ""},
		{"valid failure", contract.DetailJobCompleted, signed(string(plan.FailedPayload("fr-FR"))), ""},
		{"unknown detail type", "localeflow.other", signed(planJSON), release.CodeEventDetailType},
		{"forged signature", contract.DetailPlanAccepted, []byte(`{"payload":` + mustJSON(planJSON) + `,"signature":"v1=` + strings.Repeat("0", 64) + `"}`), release.CodeEventSignatureInvalid},
		{"signed with another key", contract.DetailPlanAccepted, []byte(`{"payload":` + mustJSON(planJSON) + `,"signature":"` + signing.SignEvent([]byte("other"), []byte(planJSON)) + `"}`), release.CodeEventSignatureInvalid},
		{"altered payload", contract.DetailPlanAccepted, []byte(strings.Replace(string(signed(planJSON)), "site-berlin", "site-munich", 1)), release.CodeEventSignatureInvalid},
		{"detail not object", contract.DetailPlanAccepted, []byte(`"x"`), release.CodeEventInvalid},
		{"detail extra key", contract.DetailPlanAccepted, []byte(`{"payload":"{}","signature":"v1=00","x":1}`), release.CodeEventInvalid},
		{"detail missing signature", contract.DetailPlanAccepted, []byte(`{"payload":"{}"}`), release.CodeEventInvalid},
		{"payload not string", contract.DetailPlanAccepted, []byte(`{"payload":{},"signature":"v1=00"}`), release.CodeEventInvalid},
		{"duplicate detail key", contract.DetailPlanAccepted, []byte(`{"payload":"{}","payload":"{}","signature":"v1=00"}`), release.CodeEventInvalid},
		{"plan extra key", contract.DetailPlanAccepted, signed(replace(planJSON, `"plan":{`, `"x":1,"plan":{`)), release.CodePlanInvalid},
		{"plan bad event id", contract.DetailPlanAccepted, signed(replace(planJSON, `"event_id":"evt-1"`, `"event_id":"evt 1"`)), release.CodeEventIDInvalid},
		{"plan bad sequence", contract.DetailPlanAccepted, signed(replace(planJSON, `"source_sequence":7`, `"source_sequence":0`)), release.CodePlanInvalid},
		{"plan duplicate locale", contract.DetailPlanAccepted, signed(replace(planJSON, `"locale":"fr-FR"`, `"locale":"de-DE"`)), release.CodePlanJobsInvalid},
		{"plan duplicate job", contract.DetailPlanAccepted, signed(replace(planJSON, `"job_id":"job-fr-FR"`, `"job_id":"job-de-DE"`)), release.CodePlanJobsInvalid},
		{"plan job extra key", contract.DetailPlanAccepted, signed(replace(planJSON, `"content_type":"page"`, `"content_type":"page","y":2`)), release.CodePlanJobsInvalid},
		{"plan empty source", contract.DetailPlanAccepted, signed(`{"event":{"event_id":"e","site_id":"s"},"plan":{"plan_id":"p","jobs":[{"job_id":"j","source":{"locale":"en","text":""},"target":{"locale":"de"},"content_type":"page"}]}}`), release.CodePlanJobsInvalid},
		{"plan source too large", contract.DetailPlanAccepted, signed(`{"event":{"event_id":"e","site_id":"s"},"plan":{"plan_id":"p","jobs":[{"job_id":"j","source":{"locale":"en","text":"` + huge + `"},"target":{"locale":"de"},"content_type":"page"}]}}`), release.CodePlanSourceTooLarge},
		{"plan jobs null", contract.DetailPlanAccepted, signed(`{"event":{"event_id":"e","site_id":"s"},"plan":{"plan_id":"p","jobs":null}}`), release.CodePlanJobsInvalid},
		{"job unknown status", contract.DetailJobCompleted, signed(replace(resultJSON, `"status":"succeeded"`, `"status":"running"`)), release.CodeJobInvalid},
		{"job missing id", contract.DetailJobCompleted, signed(`{"event_id":"e","plan_id":"p","status":"failed"}`), release.CodeJobInvalid},
		{"failure with result fields", contract.DetailJobCompleted, signed(replace(resultJSON, `"status":"succeeded"`, `"status":"failed"`)), release.CodeJobInvalid},
		{"success missing candidate", contract.DetailJobCompleted, signed(replace(resultJSON, `"candidate":`, `"candidatx":`)), release.CodeJobInvalid},
		{"target hash mismatch", contract.DetailJobCompleted, signed(replace(resultJSON, `"candidate":"SECRET`, `"candidate":"OTHER`)), release.CodeJobTargetMismatch},
		{"provider extra key", contract.DetailJobCompleted, signed(replace(resultJSON, `"model_id":"m-1"`, `"model_id":"m-1","x":"y"`)), release.CodeResultInvalid},
		{"confidence not token", contract.DetailJobCompleted, signed(replace(resultJSON, `"level":"high"`, `"level":"very high"`)), release.CodeResultInvalid},
		{"flag not bool", contract.DetailJobCompleted, signed(replace(resultJSON, `"human_review_required":false`, `"human_review_required":0`)), release.CodeResultInvalid},
		{"commercial review array", contract.DetailJobCompleted, signed(replace(resultJSON, `"commercial_review":null`, `"commercial_review":[]`)), release.CodeResultInvalid},
		{"result over item limit", contract.DetailJobCompleted, signed(hugeResult), release.CodeResultTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := release.ParseSignedEvent(fx.EventKey, tt.detailType, tt.detail)
			if tt.code == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				if ev.EventID() != "evt-1" {
					t.Fatalf("event id %q", ev.EventID())
				}
				return
			}
			wantCode(t, err, tt.code)
			if core.IsRetryable(err) {
				t.Fatal("parse errors must not be retryable")
			}
		})
	}
}

func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestIngestForgedStoresNothing(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-forged", "de-DE")
	detail := []byte(`{"payload":` + mustJSON(string(plan.PlanPayload())) + `,"signature":"v1=` + strings.Repeat("a", 64) + `"}`)
	_, _, err := b.c.Ingest(b.ctx, contract.DetailPlanAccepted, detail)
	wantCode(t, err, release.CodeEventSignatureInvalid)
	huge := plan.ResultPayload("de-DE", releasetest.ResultOptions{Candidate: strings.Repeat("z", release.MaxItemBytes)})
	_, _, err = b.c.Ingest(b.ctx, contract.DetailJobCompleted, b.fx.Detail(huge))
	wantCode(t, err, release.CodeResultTooLarge)
	if _, puts := b.store.Counts(); puts != 0 {
		t.Fatalf("%d records written for refused events", puts)
	}
}

func TestIngestIdempotentAndConflicts(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-i", "de-DE", "fr-FR")
	// A job may arrive before its plan.
	b.ingestResult(t, plan, "fr-FR", releasetest.ResultOptions{})
	b.ingestPlan(t, plan)
	_, puts := b.store.Counts()
	for i := 0; i < 2; i++ {
		_, changed, err := b.c.Ingest(b.ctx, contract.DetailPlanAccepted, b.fx.Detail(plan.PlanPayload()))
		if err != nil || changed {
			t.Fatalf("duplicate plan: changed=%v err=%v", changed, err)
		}
		_, changed, err = b.c.Ingest(b.ctx, contract.DetailJobCompleted, b.fx.Detail(plan.ResultPayload("fr-FR", releasetest.ResultOptions{})))
		if err != nil || changed {
			t.Fatalf("duplicate job: changed=%v err=%v", changed, err)
		}
	}
	if _, after := b.store.Counts(); after != puts {
		t.Fatalf("duplicates wrote %d records", after-puts)
	}
	other := plan
	other.PlanID = "plan-other"
	_, _, err := b.c.Ingest(b.ctx, contract.DetailPlanAccepted, b.fx.Detail(other.PlanPayload()))
	wantCode(t, err, release.CodePlanConflict)
	_, _, err = b.c.Ingest(b.ctx, contract.DetailJobCompleted, b.fx.Detail(plan.ResultPayload("fr-FR", releasetest.ResultOptions{Candidate: "different"})))
	wantCode(t, err, release.CodeJobConflict)
	_, _, err = b.c.Ingest(b.ctx, contract.DetailJobCompleted, b.fx.Detail(other.ResultPayload("de-DE", releasetest.ResultOptions{})))
	wantCode(t, err, "coordinator.job.plan_mismatch")
	// A failed job may later succeed.
	if _, _, err := b.c.Ingest(b.ctx, contract.DetailJobCompleted, b.fx.Detail(plan.FailedPayload("de-DE"))); err != nil {
		t.Fatal(err)
	}
	b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{})
	if s := b.snap(t, "evt-i"); s.Jobs["job-de-DE"].Status != release.JobSucceeded {
		t.Fatalf("job status %s", s.Jobs["job-de-DE"].Status)
	}
}
