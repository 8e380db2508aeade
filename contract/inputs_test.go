package contract_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/signing"
)

// The input payload structs are what the strict parsers accept: each one,
// encoded, parses to the values it carries.

func TestChangeDispatchedParses(t *testing.T) {
	change := json.RawMessage(`{"event_id":"evt-1","paths":["/"],"site_id":"site-1","source_sequence":1,"website_version":"v1"}`)
	sum, err := core.HashCanonical(change)
	if err != nil {
		t.Fatal(err)
	}
	in := contract.ChangeDispatched{Change: change, Dispatch: contract.Dispatch{
		EventID: "evt-1", PayloadSHA256: sum, Status: "succeeded", RemotePlanID: "plan-1", RemoteJobCount: 2,
		RemoteStatus: "enqueued", ResponseSHA256: core.SHA256Hex([]byte("response")),
	}}
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	d, err := monitor.ParseDispatched(raw)
	if err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	got := contract.Dispatch{EventID: d.Dispatch.EventID, PayloadSHA256: d.Dispatch.PayloadSHA256, Status: d.Dispatch.Status,
		RemotePlanID: d.Dispatch.RemotePlanID, RemoteJobCount: d.Dispatch.RemoteJobCount, RemoteStatus: d.Dispatch.RemoteStatus,
		ResponseSHA256: d.Dispatch.ResponseSHA256}
	if got != in.Dispatch || !bytes.Equal(d.Change, change) {
		t.Fatalf("parsed %+v, change %s", d, d.Change)
	}
}

var eventKey = []byte("contract-test-event-key-0123456789")

func parseSigned(t *testing.T, detailType string, payload any) release.SignedEvent {
	t.Helper()
	raw, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	detail, err := signing.EventDetailV2(eventKey, detailType, time.Now(), raw)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := release.ParseSignedEvent(eventKey, detailType, detail)
	if err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return ev
}

func TestPlanAcceptedParses(t *testing.T) {
	in := contract.PlanAccepted{
		Event: contract.PlanEvent{EventID: "evt-1", SiteID: "site-1", WebsiteVersion: "v1", SourceSequence: 7},
		Plan: contract.Plan{PlanID: "plan-1", Jobs: []contract.PlanJob{{
			JobID: "job-de", Source: contract.LocaleText{Locale: "en-US", Text: "Hello"}, Target: contract.Locale{Locale: "de-DE"},
			ContentType: "page",
		}}},
	}
	p := parseSigned(t, contract.DetailPlanAccepted, in).Plan
	if p == nil || p.Event.EventID != "evt-1" || p.Event.SiteID != "site-1" || p.Event.WebsiteVersion != "v1" || p.Event.SourceSequence != 7 ||
		p.PlanID != "plan-1" || len(p.Jobs) != 1 || p.Jobs[0].JobID != "job-de" || p.Jobs[0].SourceLocale != "en-US" ||
		p.Jobs[0].TargetLocale != "de-DE" || p.Jobs[0].ContentType != "page" || p.SourceTexts["job-de"] != "Hello" {
		t.Fatalf("parsed %+v", p)
	}
}

func TestJobCompletedParses(t *testing.T) {
	result := &contract.JobResult{
		SourceSHA256: core.SHA256Hex([]byte("Hello")), TargetSHA256: core.SHA256Hex([]byte("Hallo")),
		SourceLocale: "en-US", TargetLocale: "de-DE", ContentType: "page", GlossaryVersion: "gl-1", PolicyVersion: "pol-1",
		Provider: contract.Provider{ID: "mt", ModelID: "m", ModelVersion: "1"}, SoftwareVersion: "sw-1",
		ReviewConfidence: map[string]string{"level": "high"}, QualityProfile: map[string]string{"tier": "standard"},
		Candidate: "Hallo",
	}
	in := contract.JobCompleted{EventID: "evt-1", PlanID: "plan-1", JobID: "job-de", Status: contract.JobSucceeded, JobResult: result}
	j := parseSigned(t, contract.DetailJobCompleted, in).Job
	if j == nil || j.Status != release.JobSucceeded || j.JobID != "job-de" || j.Result == nil ||
		j.Result.TargetSHA256 != result.TargetSHA256 || j.Result.Provider.ModelID != "m" || j.Result.Candidate != "Hallo" {
		t.Fatalf("parsed %+v", j)
	}
	failed := contract.JobCompleted{EventID: "evt-1", PlanID: "plan-1", JobID: "job-fr", Status: contract.JobFailed, ErrorCode: "mt.timeout"}
	j = parseSigned(t, contract.DetailJobCompleted, failed).Job
	if j == nil || j.Status != release.JobFailed || j.ErrorCode != "mt.timeout" || j.Result != nil {
		t.Fatalf("parsed %+v", j)
	}
}
