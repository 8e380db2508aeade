package reference

import (
	"bytes"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/localeflow/localeflow/adapters/cms"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/signing"
)

// send sends a request signed with key at ts under request id rid.
func send(t *testing.T, key []byte, method, base, path, rid string, ts time.Time, body []byte) int {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	var req *http.Request
	var err error
	if rd != nil {
		req, err = http.NewRequest(method, base+path, rd)
	} else {
		req, err = http.NewRequest(method, base+path, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	stamp := strconv.FormatInt(ts.Unix(), 10)
	req.Header.Set(signing.HeaderRequestID, rid)
	req.Header.Set(signing.HeaderTimestamp, stamp)
	req.Header.Set(signing.HeaderSignature, signing.SignRequest(key, method, path, rid, stamp, body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestCMSRequestWindowAndReplay: the reference CMS makes the request
// checks docs/integrating.md recommends (a timestamp 5 minutes away is
// refused 401, a request id accepted before 409), on both APIs.
func TestCMSRequestWindowAndReplay(t *testing.T) {
	b := setup(t, Faults{}, Faults{})
	s := spec("evt-win", "de-DE")
	if err := b.cms.Put(s); err != nil {
		t.Fatal(err)
	}
	path := cms.LifecyclePath(s.SiteID, s.EventID)
	now := time.Now()
	if got := send(t, cmsKey, http.MethodGet, b.cmsURL, path, "req-stale-1", now.Add(-6*time.Minute), nil); got != http.StatusUnauthorized {
		t.Errorf("stale lifecycle request: %d, want 401", got)
	}
	if got := send(t, cmsKey, http.MethodGet, b.cmsURL, path, "req-ahead-1", now.Add(6*time.Minute), nil); got != http.StatusUnauthorized {
		t.Errorf("lifecycle request from the future: %d, want 401", got)
	}
	if got := send(t, cmsKey, http.MethodGet, b.cmsURL, path, "req-once-1", now, nil); got != http.StatusOK {
		t.Fatalf("fresh lifecycle request: %d", got)
	}
	if got := send(t, cmsKey, http.MethodGet, b.cmsURL, path, "req-once-1", now, nil); got != http.StatusConflict {
		t.Errorf("replayed lifecycle request: %d, want 409", got)
	}
	dpath := "/v1/sites/" + s.SiteID + "/changes/" + s.EventID + "/deliveries"
	if got := send(t, cmsKey, http.MethodPost, b.cmsURL, dpath, "req-stale-2", now.Add(-6*time.Minute), []byte(`{}`)); got != http.StatusUnauthorized {
		t.Errorf("stale delivery: %d, want 401", got)
	}
}

// TestCMSRefusesExpiredApprovalAndForeignApproval: the reference CMS
// makes every check of "Verifying a delivery", the approval's expiry and
// binding included (peer.VerifyDelivery).
func TestCMSRefusesExpiredApprovalAndForeignApproval(t *testing.T) {
	b := setup(t, Faults{}, Faults{})
	s := spec("evt-exp", "de-DE")
	if err := b.cms.Put(s); err != nil {
		t.Fatal(err)
	}
	approval, publication := b.fx.Authorities()
	build := func(expires int64, job string) []byte {
		a := contract.ApprovalPayload{Schema: contract.ApprovalSchema, EventID: s.EventID, SiteID: s.SiteID, PlanID: s.PlanID, JobID: job,
			TargetLocale: "de-DE", ResultSHA256: core.SHA256Hex([]byte("r")), EvidenceRequestID: "blun-l10n-evidence-x",
			QualityReceiptSHA256: core.SHA256Hex([]byte("q")), ApprovedAtMS: 1, ExpiresAtMS: expires}
		id, _ := core.HashCanonical(a)
		a.ApprovalID = "apv-" + id[:40]
		raw, _ := core.Canonical(a)
		token, _ := approval.Sign(raw)
		text := "Hallo"
		bun := contract.Bundle{Schema: contract.DeliveryBundleSchema, EventID: s.EventID, SiteID: s.SiteID, PlanID: s.PlanID, PreparedAtMS: 1,
			Locales: []contract.BundleLocale{{JobID: "job-de", SourceLocale: "en-US", TargetLocale: "de-DE", ContentType: "page",
				SourceSHA256: core.SHA256Hex([]byte("Hello")), TargetSHA256: core.SHA256Hex([]byte(text)), ResultSHA256: a.ResultSHA256,
				Text: text, ApprovalID: a.ApprovalID, Approval: token}}}
		h, _ := core.HashCanonical(map[string]any{"event_id": s.EventID, "plan_id": s.PlanID, "approvals": []string{a.ApprovalID}})
		bun.DeliveryID = "dlv-" + h[:40]
		raw, _ = core.Canonical(bun)
		bt, _ := publication.Sign(raw)
		body, _ := core.Canonical(contract.DeliveryRequest{Schema: contract.DeliveryRequestSchema, DeliveryID: bun.DeliveryID, EventID: s.EventID, SiteID: s.SiteID, Bundle: bt})
		return body
	}
	dpath := "/v1/sites/" + s.SiteID + "/changes/" + s.EventID + "/deliveries"
	now := time.Now()
	if got := send(t, cmsKey, http.MethodPost, b.cmsURL, dpath, "req-exp-1", now, build(core.Millis(now)-1000, "job-de")); got != http.StatusForbidden {
		t.Errorf("expired approval: %d, want 403", got)
	}
	if got := send(t, cmsKey, http.MethodPost, b.cmsURL, dpath, "req-exp-2", now, build(core.Millis(now)+3_600_000, "job-other")); got != http.StatusForbidden {
		t.Errorf("approval for another job: %d, want 403", got)
	}
	if got := send(t, cmsKey, http.MethodPost, b.cmsURL, dpath, "req-exp-3", now, build(core.Millis(now)+3_600_000, "job-de")); got != http.StatusCreated {
		t.Errorf("valid delivery: %d, want 201", got)
	}
	if st := b.cms.Stats(); st.Deliveries[s.EventID] != 1 || st.Rejected != 2 {
		t.Errorf("stats %+v", st)
	}
}

// TestEvidenceRefusesStaleAndUnboundRequests: the reference provider
// refuses a stale request (401) and one whose request_id is not derived
// from its body (400, peer.CheckEvidenceRequest).
func TestEvidenceRefusesStaleAndUnboundRequests(t *testing.T) {
	b := setup(t, Faults{}, Faults{})
	plan := evidenceBody(t, "blun-l10n-evidence-"+core.SHA256Hex([]byte("not the derivation")))
	now := time.Now()
	if got := send(t, evidenceKey, http.MethodPost, b.evURL, "/v1/evidence", "req-ev-1", now, plan); got != http.StatusBadRequest {
		t.Errorf("request_id not derived: %d, want 400", got)
	}
	good := evidenceBody(t, "")
	if got := send(t, evidenceKey, http.MethodPost, b.evURL, "/v1/evidence", "req-ev-2", now.Add(-6*time.Minute), good); got != http.StatusUnauthorized {
		t.Errorf("stale evidence request: %d, want 401", got)
	}
	if got := send(t, evidenceKey, http.MethodPost, b.evURL, "/v1/evidence", "req-ev-3", now, good); got != http.StatusOK {
		t.Errorf("valid evidence request: %d, want 200", got)
	}
}

// evidenceBody is a canonical evidence request; requestID "" derives it.
func evidenceBody(t *testing.T, requestID string) []byte {
	t.Helper()
	bind := contract.EvidenceBinding{Schema: contract.EvidenceRequestSchema, EvidenceRevision: "r1", EventID: "evt-ev", PlanID: "plan-ev", JobID: "job-ev",
		ResultSHA256: core.SHA256Hex([]byte("res")), SourceSHA256: core.SHA256Hex([]byte("Hello")), TargetSHA256: core.SHA256Hex([]byte("Hallo")),
		SourceLocale: "en-US", TargetLocale: "de-DE", ContentType: "page", GlossaryVersion: "g", PolicyVersion: "p",
		Provider: release.Provider{ID: "tr", ModelID: "m", ModelVersion: "1"}, SoftwareVersion: "s",
		ReviewConfidence: map[string]string{}, QualityProfile: map[string]string{}, CommercialReview: []byte("null")}
	if requestID == "" {
		h, err := core.HashCanonical(bind)
		if err != nil {
			t.Fatal(err)
		}
		requestID = contract.EvidenceRequestIDPrefix + h
	}
	body, err := release.EvidenceBody(&contract.EvidenceRequest{RequestID: requestID, EvidenceBinding: bind, SourceText: "Hello", TargetText: "Hallo"})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func TestBreaksValidate(t *testing.T) {
	if err := (Breaks{"skip:" + "bundle.text_mismatch", BreakWrongIssuer}).Validate(); err != nil {
		t.Fatal(err)
	}
	for _, b := range []Breaks{{"skip:request.nope"}, {"nope"}, {""}} {
		if err := b.Validate(); err == nil {
			t.Errorf("%v accepted", b)
		}
	}
	c := NewCommand("x", "x", "127.0.0.1:0", "X_KEY")
	if _, err := c.Parse([]string{"-break", "accept-everything"}, func(string) string { return "00112233445566778899aabbccddeeff" }); err == nil {
		t.Error("unknown -break accepted")
	}
	c = NewCommand("x", "x", "127.0.0.1:0", "X_KEY")
	if _, err := c.Parse([]string{"-break", "answer-unsigned,skip:request.stale"}, func(string) string { return "00112233445566778899aabbccddeeff" }); err != nil || len(c.Breaks) != 2 {
		t.Errorf("%v %v", err, c.Breaks)
	}
}
