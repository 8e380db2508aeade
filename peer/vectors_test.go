package peer_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/health"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/peer"
	"github.com/localeflow/localeflow/signing"
)

// The vectors in contract/testdata/vectors are generated here from the
// product's code, and every expected outcome (a value, or an error code)
// is asserted against that code while generating. The test then compares
// the generated files with the committed ones: a vector and the code
// cannot disagree. `go test ./peer -run TestVectors -update`
// rewrites the files after a deliberate change (review the diff).
var update = flag.Bool("update", false, "rewrite contract/testdata/vectors")

const vectorDir = "../contract/testdata/vectors"

// t0 is the vectors' "now": 2026-11-30T00:00:00Z.
var t0 = time.Unix(1764460800, 0).UTC()

func hexOf(b []byte) string { return hex.EncodeToString(b) }

func seed(label string) []byte {
	s := make([]byte, 32)
	copy(s, label)
	return s
}

type file struct {
	Description string `json:"description"`
	Vectors     []any  `json:"vectors"`
	// Keys and constants the vectors share.
	Common map[string]any `json:"common,omitempty"`
}

func TestVectors(t *testing.T) {
	files := map[string]file{
		"event_signature.json":     eventSignatureVectors(t),
		"payload_sha256.json":      payloadSHA256Vectors(t),
		"http_signature.json":      httpSignatureVectors(t),
		"evidence_request_id.json": evidenceRequestVectors(t),
		"receipts.json":            receiptVectors(t),
		"approval_tokens.json":     approvalVectors(t),
		"delivery_bundles.json":    bundleVectors(t),
		"output_events.json":       outputEventVectors(t),
	}
	for name, f := range files {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(f); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(vectorDir, name)
		if *update {
			if err := os.MkdirAll(vectorDir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		have, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v (run with -update to create it)", name, err)
		}
		if !bytes.Equal(have, buf.Bytes()) {
			t.Errorf("%s differs from what the code produces now (a contract change? run with -update and review the diff)", name)
		}
	}
	entries, _ := os.ReadDir(vectorDir)
	for _, e := range entries {
		if _, ok := files[e.Name()]; !ok && strings.HasSuffix(e.Name(), ".json") {
			t.Errorf("%s: a vector file no generator writes", e.Name())
		}
	}
}

// expectCode fails unless err carries code ("" = no error).
func expectCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	if got := core.CodeOf(err); (err == nil) != (code == "") || (err != nil && got != code) {
		t.Fatalf("%s: got %v (code %q), want %q", what, err, got, code)
	}
}

// ---- signed bus events ----

// vectorMaxAge is the verifier's LOCALEFLOW_EVENT_MAX_AGE in the event
// vectors (each vector states it as max_age_s).
const vectorMaxAge = 96 * time.Hour

func eventSignatureVectors(t *testing.T) file {
	key := []byte("localeflow-event-test-key-000001")
	other := []byte("localeflow-event-test-key-000002")
	change := map[string]any{"event_id": "evt-2026-0001", "site_id": "site-berlin", "website_version": "v2026.11.29", "source_sequence": 7, "title": "Welcome"}
	sum, _ := core.HashCanonical(change)
	dispatch, _ := core.Canonical(map[string]any{"change": change, "dispatch": map[string]any{
		"event_id": "evt-2026-0001", "payload_sha256": sum, "status": "succeeded", "remote_plan_id": "plan-42",
		"remote_job_count": 2, "remote_status": "enqueued", "response_sha256": strings.Repeat("0", 64)}})
	plan := releasetest.NewPlan("evt-2026-0001", "de-DE", "fr-FR")
	plan.PlanID = "plan-42"
	planPayload := plan.PlanPayload()
	jobPayload := plan.ResultPayload("de-DE", releasetest.ResultOptions{})
	ts := signing.EventTimestamp(t0)
	var vs []any
	// Signing: what a producer computes.
	for _, c := range []struct {
		dt      string
		payload []byte
	}{{contract.DetailChangeDispatched, dispatch}, {contract.DetailPlanAccepted, planPayload}, {contract.DetailJobCompleted, jobPayload}} {
		detail, err := signing.EventDetailV2(key, c.dt, t0, c.payload)
		if err != nil {
			t.Fatal(err)
		}
		res, _, err := peer.OpenInputEvent(peer.EventCheck{Keys: [][]byte{key}, Now: t0}, c.dt, detail)
		if err != nil || res.Version != 2 {
			t.Fatalf("%s: %v", c.dt, err)
		}
		vs = append(vs, map[string]any{
			"name": "sign v2 " + c.dt, "op": "sign_v2",
			"key_hex": hexOf(key), "detail_type": c.dt, "timestamp": ts, "payload": string(c.payload),
			"canonical": string(signing.EventV2Canonical(c.dt, ts, c.payload)),
			"signature": signing.SignEventV2(key, c.dt, ts, c.payload), "detail": string(detail),
		})
	}
	// Verifying: what the functions accept and refuse, with their codes.
	v2 := func(k []byte, dt string, at time.Time, p []byte) string {
		d, _ := signing.EventDetailV2(k, dt, at, p)
		return string(d)
	}
	v1 := func(p []byte) string {
		d, _ := json.Marshal(contract.SignedDetail{Payload: string(p), Signature: signing.SignEvent(key, p)})
		return string(d)
	}
	good := v2(key, contract.DetailChangeDispatched, t0, dispatch)
	type verify struct {
		name, dt, detail string
		refuseV1         bool
		keys             [][]byte
		code             string
	}
	cases := []verify{
		{"dispatch v2", contract.DetailChangeDispatched, good, false, nil, ""},
		{"plan v2", contract.DetailPlanAccepted, v2(key, contract.DetailPlanAccepted, t0, planPayload), false, nil, ""},
		{"job v2", contract.DetailJobCompleted, v2(key, contract.DetailJobCompleted, t0, jobPayload), false, nil, ""},
		{"dispatch v1 during the migration", contract.DetailChangeDispatched, v1(dispatch), false, nil, ""},
		{"dispatch v1 once v1 is refused", contract.DetailChangeDispatched, v1(dispatch), true, nil, "poller.dispatch.signature_invalid"},
		{"plan v1 once v1 is refused", contract.DetailPlanAccepted, v1(planPayload), true, nil, release.CodeEventSignatureInvalid},
		{"rotation: signed with the previous key", contract.DetailChangeDispatched, v2(other, contract.DetailChangeDispatched, t0, dispatch), false, [][]byte{key, other}, ""},
		{"another key", contract.DetailChangeDispatched, v2(other, contract.DetailChangeDispatched, t0, dispatch), false, nil, "poller.dispatch.signature_invalid"},
		{"plan signature replayed as a job", contract.DetailJobCompleted, v2(key, contract.DetailPlanAccepted, t0, planPayload), false, nil, release.CodeEventSignatureInvalid},
		{"job signature replayed as a dispatch", contract.DetailChangeDispatched, v2(key, contract.DetailJobCompleted, t0, dispatch), false, nil, "poller.dispatch.signature_invalid"},
		{"older than 96 h", contract.DetailChangeDispatched, v2(key, contract.DetailChangeDispatched, t0.Add(-96*time.Hour-time.Second), dispatch), false, nil, "poller.dispatch.stale"},
		{"exactly 96 h old", contract.DetailChangeDispatched, v2(key, contract.DetailChangeDispatched, t0.Add(-96*time.Hour), dispatch), false, nil, ""},
		{"more than 5 min ahead", contract.DetailPlanAccepted, v2(key, contract.DetailPlanAccepted, t0.Add(5*time.Minute+time.Second), planPayload), false, nil, release.CodeEventStale},
		{"5 min ahead", contract.DetailPlanAccepted, v2(key, contract.DetailPlanAccepted, t0.Add(5*time.Minute), planPayload), false, nil, ""},
		{"unsigned payload", contract.DetailChangeDispatched, string(dispatch), false, nil, "poller.dispatch.envelope_invalid"},
		{"extra member", contract.DetailChangeDispatched, strings.Replace(good, `{"payload"`, `{"x":1,"payload"`, 1), false, nil, "poller.dispatch.envelope_invalid"},
		{"duplicate member", contract.DetailChangeDispatched, strings.Replace(good, `{"payload"`, `{"signature":"v2=00","payload"`, 1), false, nil, "poller.dispatch.envelope_invalid"},
		{"data after the object", contract.DetailChangeDispatched, good + "{}", false, nil, "poller.dispatch.envelope_invalid"},
		{"timestamp with a leading zero", contract.DetailChangeDispatched, strings.Replace(good, `"timestamp":"`, `"timestamp":"0`, 1), false, nil, "poller.dispatch.envelope_invalid"},
		{"timestamp a number", contract.DetailChangeDispatched, strings.Replace(good, `"timestamp":"`+ts+`"`, `"timestamp":`+ts, 1), false, nil, "poller.dispatch.envelope_invalid"},
		{"payload tampered", contract.DetailChangeDispatched, strings.Replace(good, `plan-42`, `plan-43`, 1), false, nil, "poller.dispatch.signature_invalid"},
		{"signed dispatch whose hash does not match", contract.DetailChangeDispatched, v2(key, contract.DetailChangeDispatched, t0, bytes.Replace(dispatch, []byte(`"Welcome"`), []byte(`"Hello"`), 1)), false, nil, monitor.CodeDispatchInvalid},
		{"signed job whose candidate does not match target_sha256", contract.DetailJobCompleted, v2(key, contract.DetailJobCompleted, t0, bytes.Replace(jobPayload, []byte("SECRET-TARGET"), []byte("OTHER-TARGET"), 1)), false, nil, "coordinator.job.target_sha256_mismatch"},
	}
	for _, c := range cases {
		keys := c.keys
		if keys == nil {
			keys = [][]byte{key}
		}
		// The window is the vectors' parameter (max_age_s), not the
		// functions' default, which a deployment sets
		// (LOCALEFLOW_EVENT_MAX_AGE).
		_, _, err := peer.OpenInputEvent(peer.EventCheck{Keys: keys, Now: t0, RefuseV1: c.refuseV1, MaxAge: vectorMaxAge}, c.dt, []byte(c.detail))
		expectCode(t, c.name, err, c.code)
		hexKeys := []string{}
		for _, k := range keys {
			hexKeys = append(hexKeys, hexOf(k))
		}
		v := map[string]any{"name": c.name, "op": "verify", "keys_hex": hexKeys, "now": ts, "max_age_s": int64(vectorMaxAge / time.Second), "refuse_v1": c.refuseV1,
			"detail_type": c.dt, "detail": c.detail}
		if c.code == "" {
			v["valid"] = true
		} else {
			v["valid"], v["error"] = false, c.code
		}
		vs = append(vs, v)
	}
	return file{
		Description: "Signed input events (docs/design.md \"Signed bus events\", docs/integrating.md \"Producing events\"). op sign_v2: from key_hex, detail_type, timestamp and payload compute canonical, signature and the detail to put on the bus (the detail's member order is free; the payload string is signed byte for byte). op verify: the detail, put with detail_type and checked at now (Unix seconds) under keys_hex with the window max_age_s (the deployment's LOCALEFLOW_EVENT_MAX_AGE; 5 minutes ahead at most) and refuse_v1 (true: LOCALEFLOW_EVENT_V1=refuse, the default; false: LOCALEFLOW_EVENT_V1=accept), is accepted (valid) or refused with error, the consuming function's code. A signed payload is also checked (lifecycle_monitor.*, coordinator.*).",
		Vectors:     vs,
	}
}

// ---- canonical JSON hashes ----

func payloadSHA256Vectors(t *testing.T) file {
	var vs []any
	for _, c := range []struct{ name, change string }{
		{"members sorted by UTF-16 code units", `{"site_id":"site-berlin","event_id":"evt-1","website_version":"v1","source_sequence":7,"é":1,"z":2,"a":3,"€":4,"😀":5}`},
		{"numbers in ECMAScript form", `{"event_id":"evt-2","site_id":"s","website_version":"v1","source_sequence":1,"n":[1.0,1e3,0.1,-0,1e21,1e-7,100]}`},
		{"strings escaped minimally", `{"event_id":"evt-3","site_id":"s","website_version":"v1","source_sequence":2,"t":"line\nbreak \"q\" \u00e9 \u2028 /slash\\ \u0001"}`},
		{"nested objects and white space", "{ \"event_id\" : \"evt-4\",\n \"site_id\":\"s\", \"website_version\":\"v1\", \"source_sequence\":3, \"meta\": {\"b\": [true, false, null], \"a\": {}} }"},
	} {
		jcs, err := core.CanonicalizeJSON([]byte(c.change))
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, map[string]any{"name": c.name, "op": "payload_sha256", "change": c.change, "jcs": string(jcs), "sha256": core.SHA256Hex(jcs)})
	}
	for _, c := range []struct{ name, change string }{
		{"duplicate member", `{"event_id":"evt-1","event_id":"evt-2","site_id":"s","website_version":"v1","source_sequence":1}`},
		{"lone surrogate", `{"event_id":"evt-1","site_id":"s","website_version":"v1","source_sequence":1,"t":"\ud800"}`},
	} {
		if _, err := core.CanonicalizeJSON([]byte(c.change)); err == nil {
			t.Fatalf("%s canonicalized", c.name)
		}
		payload := []byte(`{"change":` + c.change + `,"dispatch":{}}`)
		_, err := monitor.ParseDispatched(payload)
		expectCode(t, c.name, err, monitor.CodeChangeInvalid)
		vs = append(vs, map[string]any{"name": c.name, "op": "payload_sha256", "change": c.change, "valid": false, "error": monitor.CodeChangeInvalid})
	}
	// result_sha256: the JCS hash of a job result's 15 fields.
	plan := releasetest.NewPlan("evt-2026-0001", "de-DE")
	payload := plan.ResultPayload("de-DE", releasetest.ResultOptions{})
	var all map[string]json.RawMessage
	_ = json.Unmarshal(payload, &all)
	for _, k := range []string{"event_id", "plan_id", "job_id", "status"} {
		delete(all, k)
	}
	result, _ := json.Marshal(all)
	jcs, _ := core.CanonicalizeJSON(result)
	ev, err := release.ParseSignedEventWith(signing.EventCheck{Keys: [][]byte{seed("k")}, Now: t0}, contract.DetailJobCompleted,
		mustJSON(t, contract.SignedDetail{Payload: string(payload), Signature: signing.SignEvent(seed("k"), payload)}))
	if err != nil || core.SHA256Hex(ev.Job.ResultJSON) != core.SHA256Hex(jcs) {
		t.Fatalf("result_sha256: %v %+v", err, ev.Job)
	}
	vs = append(vs, map[string]any{"name": "result_sha256 of a job result", "op": "result_sha256", "job_completed_payload": string(payload), "result_jcs": string(jcs), "result_sha256": core.SHA256Hex(jcs)})
	return file{
		Description: "RFC 8785 (JCS) hashes. op payload_sha256: dispatch.payload_sha256 = SHA-256 hex of the JCS form of change (all members); a change that is not I-JSON is refused with error. op result_sha256: the hash of a job.completed payload's 15 result fields (every member but event_id, plan_id, job_id, status).",
		Vectors:     vs,
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ---- signed HTTP ----

func httpSignatureVectors(t *testing.T) file {
	key := []byte("localeflow-cms-test-key-00000001")
	rotated := []byte("localeflow-cms-test-key-00000002")
	ts := signing.EventTimestamp(t0)
	var vs []any
	get := peer.Request{Method: "GET", Path: "/cms/v1/sites/site-berlin/changes/evt-2026-0001/lifecycle", RequestID: "req-0123456789abcdef0123456789abcdef", Timestamp: ts}
	body := []byte(`{"bundle":"v1.e30.AA","delivery_id":"dlv-0000000000000000000000000000000000000000","event_id":"evt-2026-0001","schema":"localeflow.delivery-request.v1","site_id":"site-berlin"}`)
	post := peer.Request{Method: "POST", Path: "/cms/v1/sites/site-berlin/changes/evt-2026-0001/deliveries", RequestID: "req-fedcba9876543210fedcba9876543210", Timestamp: ts, Body: body}
	sign := func(k []byte, r peer.Request) peer.Request {
		r.Signature = signing.SignRequest(k, r.Method, r.Path, r.RequestID, r.Timestamp, r.Body)
		return r
	}
	for _, r := range []peer.Request{get, post} {
		r = sign(key, r)
		canonical := signing.RequestCanonical(r.Method, r.Path, r.RequestID, r.Timestamp)
		if r.Body != nil {
			canonical = signing.BodyRequestCanonical(r.Method, r.Path, r.RequestID, r.Timestamp, r.Body)
		}
		vs = append(vs, map[string]any{"name": "sign " + r.Method, "op": "sign_request", "key_hex": hexOf(key), "method": r.Method, "path": r.Path,
			"request_id": r.RequestID, "timestamp": r.Timestamp, "body": nullable(r.Body), "canonical": canonical, "signature": r.Signature})
	}
	type vc struct {
		name string
		r    peer.Request
		now  time.Time
		seen []string
		code string
	}
	signed := sign(key, post)
	tamper := func(f func(*peer.Request)) peer.Request { r := signed; f(&r); return r }
	cases := []vc{
		{"valid", signed, t0, nil, ""},
		{"signed with the previous key during a rotation", sign(rotated, post), t0, nil, ""},
		{"body changed", tamper(func(r *peer.Request) { r.Body = append([]byte(" "), r.Body...) }), t0, nil, peer.CodeRequestSignature},
		{"path changed", tamper(func(r *peer.Request) { r.Path = strings.Replace(r.Path, "/cms", "", 1) }), t0, nil, peer.CodeRequestSignature},
		{"method changed", tamper(func(r *peer.Request) { r.Method = "PUT" }), t0, nil, peer.CodeRequestSignature},
		{"request id changed", tamper(func(r *peer.Request) { r.RequestID += "0" }), t0, nil, peer.CodeRequestSignature},
		{"timestamp changed", tamper(func(r *peer.Request) { r.Timestamp = signing.EventTimestamp(t0.Add(time.Second)) }), t0, nil, peer.CodeRequestSignature},
		{"v2 prefix", tamper(func(r *peer.Request) { r.Signature = "v2=" + r.Signature[3:] }), t0, nil, peer.CodeRequestSignature},
		{"6 minutes old (recommended window 5 min)", signed, t0.Add(6 * time.Minute), nil, peer.CodeRequestStale},
		{"4 minutes old", signed, t0.Add(4 * time.Minute), nil, ""},
		{"request id seen before", signed, t0, []string{signed.RequestID}, peer.CodeRequestReplayed},
	}
	for _, c := range cases {
		seen := map[string]bool{}
		for _, s := range c.seen {
			seen[s] = true
		}
		err := peer.VerifyRequest([][]byte{key, rotated}, c.r, c.now, seen)
		expectCode(t, c.name, err, c.code)
		v := map[string]any{"name": c.name, "op": "verify_request", "keys_hex": []string{hexOf(key), hexOf(rotated)}, "now": signing.EventTimestamp(c.now),
			"seen_request_ids": c.seen, "method": c.r.Method, "path": c.r.Path, "request_id": c.r.RequestID, "timestamp": c.r.Timestamp,
			"body": nullable(c.r.Body), "signature": c.r.Signature}
		setOutcome(v, c.code)
		vs = append(vs, v)
	}
	// Responses (CMS lifecycle only): the CMS signs, localeflow verifies.
	answer := []byte(`{"schema":"localeflow.cms-lifecycle.v1","request_id":"req-0123456789abcdef0123456789abcdef","event_id":"evt-2026-0001","site_id":"site-berlin","plan_id":"plan-42","website_version":"v2026.11.29","source_sequence":7,"status":"processing","required_locales":["de-DE","fr-FR"],"approved_locales":[],"blocked_locales":[],"queue_counts":{"pending":2},"delivery":null,"tombstone":null}`)
	sig := signing.SignResponse(key, get.RequestID, answer)
	vs = append(vs, map[string]any{"name": "sign a lifecycle answer", "op": "sign_response", "key_hex": hexOf(key), "request_id": get.RequestID,
		"body": string(answer), "canonical": signing.ResponseCanonical(get.RequestID, answer), "signature": sig})
	for _, c := range []struct {
		name, rid, body, sig string
		ok                   bool
	}{
		{"answer valid", get.RequestID, string(answer), sig, true},
		{"answer to another request", "req-other", string(answer), sig, false},
		{"answer body changed", get.RequestID, string(answer) + "\n", sig, false},
		{"answer signed with v1= upper-case hex", get.RequestID, string(answer), "v1=" + strings.ToUpper(sig[3:]), true},
	} {
		if signing.VerifyResponse(key, c.rid, []byte(c.body), c.sig) != c.ok {
			t.Fatalf("%s: verify != %v", c.name, c.ok)
		}
		v := map[string]any{"name": c.name, "op": "verify_response", "keys_hex": []string{hexOf(key)}, "request_id": c.rid, "body": c.body, "signature": c.sig}
		code := ""
		if !c.ok {
			code = "lifecycle_monitor.response_invalid"
		}
		setOutcome(v, code)
		vs = append(vs, v)
	}
	return file{
		Description: "Signed HTTP requests and lifecycle answers (docs/design.md \"Signed HTTP requests\"). op sign_request: canonical = METHOD\\npath\\nrequest_id\\ntimestamp (+ \\nhex sha256(body) when there is a body, null here for none); signature = v1= + hex HMAC-SHA256(key, canonical). op verify_request: what a CMS or evidence provider checks (peer-side check names; the 5-minute window and the replay check are docs/integrating.md's recommendation, not a localeflow code). op sign_response / verify_response: X-Localeflow-Signature on a lifecycle answer = v1= + hex HMAC-SHA256(key, request_id\\nhex sha256(body)); localeflow refuses a bad one with lifecycle_monitor.response_invalid. Hex digits are compared case-insensitively by localeflow; sign with lower case.",
		Vectors:     vs,
	}
}

func nullable(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

func setOutcome(v map[string]any, code string) {
	if code == "" {
		v["valid"] = true
		return
	}
	v["valid"], v["error"] = false, code
}

// ---- evidence request ----

func sampleEvidenceRequest(t *testing.T) *contract.EvidenceRequest {
	src, cand := "Welcome to our shop", "Willkommen in unserem Shop"
	r := &release.Result{
		SourceSHA256: core.SHA256Hex([]byte(src)), TargetSHA256: core.SHA256Hex([]byte(cand)),
		SourceLocale: "en-US", TargetLocale: "de-DE", ContentType: "page", GlossaryVersion: "gl-3", PolicyVersion: "pol-2",
		Provider: release.Provider{ID: "mt-alpha", ModelID: "m-1", ModelVersion: "2026-10"}, SoftwareVersion: "sw-1.4.0",
		ReviewConfidence: map[string]string{"level": "high"}, QualityProfile: map[string]string{"tier": "standard"},
		CommercialReview: json.RawMessage(`null`), Candidate: cand,
	}
	req, err := release.BuildEvidenceRequest("evt-2026-0001", "plan-42", release.PlanJob{JobID: "job-de-DE", SourceLocale: "en-US", TargetLocale: "de-DE", ContentType: "page", CommercialProfile: "retail"},
		src, r, strings.Repeat("ab", 32), "rev-1")
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func evidenceRequestVectors(t *testing.T) file {
	req := sampleEvidenceRequest(t)
	body, err := release.EvidenceBody(req)
	if err != nil {
		t.Fatal(err)
	}
	binding, _ := core.Canonical(req.EvidenceBinding)
	if _, err := peer.CheckEvidenceRequest(body); err != nil {
		t.Fatal(err)
	}
	vs := []any{map[string]any{"name": "derive request_id", "op": "request_id", "binding_jcs": string(binding), "request_id": req.RequestID, "body": string(body)}}
	mut := func(name string, f func(m map[string]any), code string) {
		var m map[string]any
		_ = json.Unmarshal(body, &m)
		f(m)
		b, _ := core.Canonical(m)
		_, err := peer.CheckEvidenceRequest(b)
		expectCode(t, name, err, code)
		v := map[string]any{"name": name, "op": "check_request", "body": string(b)}
		setOutcome(v, code)
		vs = append(vs, v)
	}
	mut("as sent", func(map[string]any) {}, "")
	mut("a bound member changed", func(m map[string]any) { m["policy_version"] = "pol-3" }, peer.CodeEvidenceRequestID)
	mut("the revision changed", func(m map[string]any) { m["evidence_revision"] = "rev-2" }, peer.CodeEvidenceRequestID)
	mut("target text changed", func(m map[string]any) { m["target_text"] = "Hallo" }, peer.CodeEvidenceRequestText)
	mut("unknown member", func(m map[string]any) { m["extra"] = 1 }, peer.CodeEvidenceRequestInvalid)
	mut("schema v4", func(m map[string]any) { m["schema"] = "blun.localization-quality-evidence-request.v4" }, peer.CodeEvidenceRequestInvalid)
	return file{
		Description: "Evidence requests (docs/design.md \"Evidence provider API\"). op request_id: request_id = \"blun-l10n-evidence-\" + SHA-256 hex of binding_jcs, the JCS form of the request without request_id, source_text and target_text; body is the request as sent (JCS). op check_request: what a provider checks (peer-side check names): the derivation, and source_sha256/target_sha256 = SHA-256 of the texts.",
		Vectors:     vs,
	}
}

// ---- receipts ----

func receiptVectors(t *testing.T) file {
	keys := map[string]ed25519.PrivateKey{}
	issuers := map[string]string{release.KindQuality: "evidence-quality", release.KindHumanReview: "review-desk", release.KindIndependentModelReview: "review-beta-issuer"}
	trusted := release.TrustedIssuers{}
	pubHex := map[string]map[string]string{}
	for kind, issuer := range issuers {
		keys[kind] = ed25519.NewKeyFromSeed(seed("receipt-" + kind))
		pub := keys[kind].Public().(ed25519.PublicKey)
		set := map[string]ed25519.PublicKey{issuer: pub}
		switch kind {
		case release.KindQuality:
			trusted.Quality = set
		case release.KindHumanReview:
			trusted.HumanReview = set
		default:
			trusted.IndependentReview = set
		}
		pubHex[kind] = map[string]string{issuer: hexOf(pub)}
	}
	v := trusted.Verifiers()
	byKind := map[string]release.Verifier{release.KindQuality: v.Quality, release.KindHumanReview: v.HumanReview, release.KindIndependentModelReview: v.IndependentReview}
	requestID, resultSHA := "blun-l10n-evidence-"+strings.Repeat("1f", 32), strings.Repeat("ab", 32)
	nowMS := core.Millis(t0)
	payload := func(kind string, edit func(p map[string]any)) []byte {
		p := map[string]any{"kind": kind, "issuer": issuers[kind], "request_id": requestID, "result_sha256": resultSHA,
			"issued_at_ms": nowMS - 60000, "expires_at_ms": nowMS + 3600000}
		if kind == release.KindIndependentModelReview {
			p["reviewer_id"] = "review-beta"
		}
		if edit != nil {
			edit(p)
		}
		b, _ := json.Marshal(p)
		return b
	}
	b64 := base64.RawURLEncoding
	var vs []any
	add := func(name, expectKind, receipt, code string) {
		_, err := byKind[expectKind].Verify(receipt, requestID, resultSHA, t0)
		expectCode(t, name, err, code)
		vec := map[string]any{"name": name, "expected_kind": expectKind, "receipt": receipt}
		setOutcome(vec, code)
		vs = append(vs, vec)
	}
	for _, kind := range []string{release.KindQuality, release.KindHumanReview, release.KindIndependentModelReview} {
		add(kind+" receipt", kind, signing.SignReceipt(keys[kind], payload(kind, nil)), "")
	}
	q := release.KindQuality
	good := signing.SignReceipt(keys[q], payload(q, nil))
	parts := strings.Split(good, ".")
	add("padded payload segment", q, parts[0]+"."+parts[1]+"=."+parts[2], release.CodeReceiptMalformed)
	if std := base64.RawStdEncoding.EncodeToString(ed25519.Sign(keys[q], []byte("localeflow.receipt.v1."+parts[1]))); std != parts[2] {
		add("standard base64 alphabet in the signature", q, parts[0]+"."+parts[1]+"."+std, release.CodeReceiptSignature)
	} else {
		t.Fatal("pick a receipt whose signature has + or / in standard base64")
	}
	add("v2 prefix", q, "v2."+parts[1]+"."+parts[2], release.CodeReceiptMalformed)
	add("extra member", q, signing.SignReceipt(keys[q], payload(q, func(p map[string]any) { p["score"] = 1 })), release.CodeReceiptMalformed)
	add("reviewer_id in a quality receipt", q, signing.SignReceipt(keys[q], payload(q, func(p map[string]any) { p["reviewer_id"] = "x" })), release.CodeReceiptMalformed)
	add("expires before issued", q, signing.SignReceipt(keys[q], payload(q, func(p map[string]any) { p["expires_at_ms"] = nowMS - 120000 })), release.CodeReceiptMalformed)
	add("unknown issuer", q, signing.SignReceipt(keys[q], payload(q, func(p map[string]any) { p["issuer"] = "someone" })), release.CodeReceiptIssuerUnknown)
	add("quality issuer minting a human review receipt", release.KindHumanReview, signing.SignReceipt(keys[q], payload(release.KindHumanReview, func(p map[string]any) { p["issuer"] = issuers[q] })), release.CodeReceiptIssuerUntrusted)
	add("signed with another key", q, signing.SignReceipt(keys[release.KindHumanReview], payload(q, nil)), release.CodeReceiptSignature)
	add("signature segment tampered", q, parts[0]+"."+parts[1]+"."+b64.EncodeToString(make([]byte, 64)), release.CodeReceiptSignature)
	add("human review receipt where quality is expected", release.KindHumanReview, signing.SignReceipt(keys[release.KindHumanReview], payload(release.KindHumanReview, func(p map[string]any) { p["kind"] = q })), release.CodeReceiptKindMismatch)
	add("another request", q, signing.SignReceipt(keys[q], payload(q, func(p map[string]any) { p["request_id"] = "blun-l10n-evidence-other" })), release.CodeReceiptBindingMismatch)
	add("another result", q, signing.SignReceipt(keys[q], payload(q, func(p map[string]any) { p["result_sha256"] = strings.Repeat("cd", 32) })), release.CodeReceiptBindingMismatch)
	add("expired", q, signing.SignReceipt(keys[q], payload(q, func(p map[string]any) { p["issued_at_ms"], p["expires_at_ms"] = nowMS-7200000, nowMS })), release.CodeReceiptExpired)
	add("issued more than 5 min ahead", q, signing.SignReceipt(keys[q], payload(q, func(p map[string]any) { p["issued_at_ms"] = nowMS + 300001 })), release.CodeReceiptNotYetValid)
	add("issued 5 min ahead", q, signing.SignReceipt(keys[q], payload(q, func(p map[string]any) { p["issued_at_ms"] = nowMS + 300000 })), "")
	seeds := map[string]string{}
	for kind := range keys {
		seeds[kind] = hexOf(seed("receipt-" + kind))
	}
	return file{
		Description: "Receipts (docs/design.md \"Receipts\"): v1.<b64url(payload)>.<b64url(Ed25519 over \"localeflow.receipt.v1.\" + b64url(payload))>. Each vector is verified for expected_kind with the trusted issuers of that kind (common.trusted_issuers: kind -> issuer -> public key hex), the evidence request common.request_id, the result common.result_sha256, at common.now_ms; error is localeflow's code (the approval step reports it as release.<code>). Issuer seeds are given so an issuer implementation can reproduce the signatures (Ed25519 is deterministic).",
		Common:      map[string]any{"trusted_issuers": pubHex, "issuer_seeds_hex": seeds, "request_id": requestID, "result_sha256": resultSHA, "now_ms": nowMS},
		Vectors:     vs,
	}
}

// ---- approvals and bundles (from a real coordinator run) ----

type releaseRun struct {
	approvalPub, publicationPub ed25519.PublicKey
	delivery                    []byte
	bundle                      contract.Bundle
	now                         time.Time
}

func runRelease(t *testing.T) releaseRun {
	t.Helper()
	fx := releasetest.NewFixture()
	now := t0
	clk := core.ClockFunc(func() time.Time { return now })
	cms := &releasetest.CMS{}
	approval, publication := fx.Authorities()
	c, err := release.NewCoordinator(release.Dependencies{
		Store: releasetest.NewMemStore(), EventKey: fx.EventKey, Evidence: releasetest.Provider{Responder: &releasetest.Responder{Fixture: fx, Clock: clk}},
		CMS: cms, Verifiers: fx.Verifiers(), Approval: approval, Publication: publication,
	}, clk, slog.New(slog.NewJSONHandler(io.Discard, nil)), release.DefaultConfig("rev-1", "worker-1"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	plan := releasetest.NewPlan("evt-2026-0001", "de-DE", "fr-FR")
	plan.PlanID = "plan-42"
	if _, _, err := c.Ingest(ctx, contract.DetailPlanAccepted, fx.Detail(plan.PlanPayload())); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"de-DE", "fr-FR"} {
		if _, _, err := c.Ingest(ctx, contract.DetailJobCompleted, fx.Detail(plan.ResultPayload(l, releasetest.ResultOptions{HumanReviewRequired: l == "fr-FR"}))); err != nil {
			t.Fatal(err)
		}
		if _, err := releasetest.Step(ctx, c, plan.EventID); err != nil {
			t.Fatal(err)
		}
	}
	d, err := c.Deliver(ctx, plan.EventID)
	if err != nil || d.Status != release.OutcomeDelivered {
		t.Fatalf("deliver: %+v %v", d, err)
	}
	r := releaseRun{approvalPub: approval.PublicKey(), publicationPub: publication.PublicKey(), delivery: cms.Deliveries[d.DeliveryID], now: now}
	b, err := peer.VerifyDelivery(peer.Keys{Publication: []ed25519.PublicKey{r.publicationPub}, Approval: []ed25519.PublicKey{r.approvalPub}}, plan.SiteID, plan.EventID, r.delivery, now)
	if err != nil {
		t.Fatalf("the coordinator's own delivery does not verify: %v", err)
	}
	r.bundle = b
	return r
}

// signToken signs payload as an authority of context would.
func signToken(priv ed25519.PrivateKey, context string, payload []byte) string {
	enc := base64.RawURLEncoding.EncodeToString(payload)
	return "v1." + enc + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(priv, []byte(context+enc)))
}

func approvalVectors(t *testing.T) file {
	r := runRelease(t)
	keys := []ed25519.PublicKey{r.approvalPub}
	token := r.bundle.Locales[0].Approval
	payload, err := release.OpenToken(release.ApprovalContext, r.approvalPub, token)
	if err != nil {
		t.Fatal(err)
	}
	var a contract.ApprovalPayload
	_ = json.Unmarshal(payload, &a)
	idInput := a
	idInput.ApprovalID = ""
	idJCS, _ := core.Canonical(idInput)
	vs := []any{map[string]any{"name": "approval_id derivation", "op": "approval_id", "payload": string(payload), "id_input_jcs": string(idJCS), "approval_id": a.ApprovalID}}
	other := ed25519.NewKeyFromSeed(seed("not-the-approval-authority"))
	parts := strings.Split(token, ".")
	add := func(name, tok, code string) {
		_, err := peer.VerifyApproval(keys, tok)
		expectCode(t, name, err, code)
		v := map[string]any{"name": name, "op": "verify_approval", "token": tok}
		setOutcome(v, code)
		vs = append(vs, v)
	}
	add("approval from the coordinator", token, "")
	add("second approval (human review)", r.bundle.Locales[1].Approval, "")
	add("signed by another key", signToken(other, release.ApprovalContext, payload), peer.CodeApprovalToken)
	approvalPriv := ed25519.NewKeyFromSeed(releasetest.NewFixture().ApprovalSeed)
	if signToken(approvalPriv, release.ApprovalContext, payload) != token {
		t.Fatal("the approval seed does not reproduce the token")
	}
	add("signed by the approval key in the delivery context", signToken(approvalPriv, release.PublicationContext, payload), peer.CodeApprovalToken)
	add("padded payload", parts[0]+"."+parts[1]+"=."+parts[2], peer.CodeApprovalToken)
	add("tampered payload", parts[0]+"."+base64.RawURLEncoding.EncodeToString(bytes.Replace(payload, []byte(a.TargetLocale), []byte("xx-XX"), 1))+"."+parts[2], peer.CodeApprovalToken)
	return file{
		Description: "Approval tokens (docs/design.md \"Approval tokens\"): v1.<b64url(payload)>.<b64url(Ed25519 over \"localeflow.approval.v1.\" + b64url(payload))>, payload in JCS form, verified with common.approval_public_hex. op approval_id: approval_id = \"apv-\" + the first 40 hex digits of SHA-256 of id_input_jcs (the payload with approval_id \"\"). op verify_approval: peer-side check names.",
		Common:      map[string]any{"approval_public_hex": hexOf(r.approvalPub)},
		Vectors:     vs,
	}
}

func bundleVectors(t *testing.T) file {
	r := runRelease(t)
	keys := peer.Keys{Publication: []ed25519.PublicKey{r.publicationPub}, Approval: []ed25519.PublicKey{r.approvalPub}}
	fx := releasetest.NewFixture()
	approvalPriv, pubPriv := ed25519.NewKeyFromSeed(fx.ApprovalSeed), ed25519.NewKeyFromSeed(fx.PublicationKey)
	if !approvalPriv.Public().(ed25519.PublicKey).Equal(r.approvalPub) || !pubPriv.Public().(ed25519.PublicKey).Equal(r.publicationPub) {
		t.Fatal("fixture seeds do not match the authorities")
	}
	const site, event = "site-berlin", "evt-2026-0001"
	var vs []any
	add := func(name string, body []byte, now time.Time, code string) {
		_, err := peer.VerifyDelivery(keys, site, event, body, now)
		expectCode(t, name, err, code)
		v := map[string]any{"name": name, "site_id": site, "event_id": event, "now_ms": core.Millis(now), "body": string(body)}
		setOutcome(v, code)
		vs = append(vs, v)
	}
	add("delivery from the coordinator", r.delivery, r.now, "")
	// Variants: re-sign an edited bundle with the publication key (the
	// check under test is then the only one that fails).
	var req contract.DeliveryRequest
	_ = json.Unmarshal(r.delivery, &req)
	variant := func(editReq func(*contract.DeliveryRequest), edit func(*contract.Bundle)) []byte {
		b := r.bundle
		b.Locales = append([]contract.BundleLocale(nil), r.bundle.Locales...)
		if edit != nil {
			edit(&b)
		}
		raw, _ := core.Canonical(b)
		q := req
		q.Bundle = signToken(pubPriv, release.PublicationContext, raw)
		q.DeliveryID = b.DeliveryID
		if editReq != nil {
			editReq(&q)
		}
		out, _ := core.Canonical(q)
		return out
	}
	add("re-signed unchanged", variant(nil, nil), r.now, "")
	add("another site in the request", variant(func(q *contract.DeliveryRequest) { q.SiteID = "site-paris" }, nil), r.now, peer.CodeDeliveryRequestInvalid)
	add("unknown request member", bytes.Replace(r.delivery, []byte(`{"bundle"`), []byte(`{"x":1,"bundle"`), 1), r.now, peer.CodeDeliveryRequestInvalid)
	add("bundle signed by another key", variant(func(q *contract.DeliveryRequest) {
		payload, _ := release.OpenToken(release.PublicationContext, r.publicationPub, q.Bundle)
		q.Bundle = signToken(approvalPriv, release.PublicationContext, payload)
	}, nil), r.now, peer.CodeBundleSignature)
	add("approval token as the bundle", variant(func(q *contract.DeliveryRequest) { q.Bundle = r.bundle.Locales[0].Approval }, nil), r.now, peer.CodeBundleSignature)
	add("bundle delivery_id differs from the request's", variant(func(q *contract.DeliveryRequest) { q.DeliveryID = "dlv-" + strings.Repeat("0", 40) }, nil), r.now, peer.CodeBundleInvalid)
	add("delivery_id not derived from the approvals", variant(nil, func(b *contract.Bundle) { b.DeliveryID = "dlv-" + strings.Repeat("0", 40) }), r.now, peer.CodeBundleDeliveryID)
	add("locales swapped (order is part of the id)", variant(nil, func(b *contract.Bundle) { b.Locales[0], b.Locales[1] = b.Locales[1], b.Locales[0] }), r.now, peer.CodeBundleDeliveryID)
	add("approval signed by another key", variant(nil, func(b *contract.Bundle) {
		p, _ := release.OpenToken(release.ApprovalContext, r.approvalPub, b.Locales[0].Approval)
		b.Locales[0].Approval = signToken(pubPriv, release.ApprovalContext, p)
	}), r.now, peer.CodeBundleApproval)
	add("approval of another locale", variant(nil, func(b *contract.Bundle) { b.Locales[0].Approval = b.Locales[1].Approval }), r.now, peer.CodeBundleApprovalMismatch)
	add("result_sha256 not the approved one", variant(nil, func(b *contract.Bundle) { b.Locales[0].ResultSHA256 = strings.Repeat("0", 64) }), r.now, peer.CodeBundleApprovalMismatch)
	a, _ := peer.VerifyApproval(keys.Approval, r.bundle.Locales[0].Approval)
	add("approval expired at now", r.delivery, core.FromMillis(a.ExpiresAtMS), peer.CodeBundleApprovalExpired)
	add("text changed", variant(nil, func(b *contract.Bundle) { b.Locales[0].Text += "!" }), r.now, peer.CodeBundleText)
	// Every locale is verified, not only the first: each locale broken in
	// turn, the others valid.
	reapprove := func(b *contract.Bundle, i int, edit func(*contract.ApprovalPayload), derive bool) {
		a, err := peer.VerifyApproval(keys.Approval, b.Locales[i].Approval)
		if err != nil {
			t.Fatal(err)
		}
		edit(&a)
		if derive {
			a.ApprovalID, _ = peer.ApprovalID(a)
		}
		raw, _ := core.Canonical(a)
		b.Locales[i].Approval = signToken(approvalPriv, release.ApprovalContext, raw)
		b.Locales[i].ApprovalID = a.ApprovalID
		ids := make([]string, 0, len(b.Locales))
		for _, l := range b.Locales {
			ids = append(ids, l.ApprovalID)
		}
		h, _ := core.HashCanonical(map[string]any{"event_id": b.EventID, "plan_id": b.PlanID, "approvals": ids})
		b.DeliveryID = "dlv-" + h[:40]
	}
	n := len(r.bundle.Locales)
	if n < 2 {
		t.Fatalf("the release run has %d locales, want 2 or more", n)
	}
	for i := 1; i < n; i++ {
		i := i
		at := fmt.Sprintf(" (locale %d of %d only)", i+1, n)
		add("approval signed by another key"+at, variant(nil, func(b *contract.Bundle) {
			p, _ := release.OpenToken(release.ApprovalContext, r.approvalPub, b.Locales[i].Approval)
			b.Locales[i].Approval = signToken(pubPriv, release.ApprovalContext, p)
		}), r.now, peer.CodeBundleApproval)
		add("approval of another locale"+at, variant(nil, func(b *contract.Bundle) { b.Locales[i].Approval = b.Locales[(i+1)%n].Approval }), r.now, peer.CodeBundleApprovalMismatch)
		add("result_sha256 not the approved one"+at, variant(nil, func(b *contract.Bundle) { b.Locales[i].ResultSHA256 = strings.Repeat("0", 64) }), r.now, peer.CodeBundleApprovalMismatch)
		add("approval expired"+at, variant(nil, func(b *contract.Bundle) {
			reapprove(b, i, func(a *contract.ApprovalPayload) { a.ExpiresAtMS = core.Millis(r.now) }, true)
		}), r.now, peer.CodeBundleApprovalExpired)
		add("approval_id not derived"+at, variant(nil, func(b *contract.Bundle) {
			reapprove(b, i, func(a *contract.ApprovalPayload) { a.ApprovalID = "apv-" + strings.Repeat("0", 40) }, false)
		}), r.now, peer.CodeBundleApproval)
		add("text changed"+at, variant(nil, func(b *contract.Bundle) { b.Locales[i].Text += "!" }), r.now, peer.CodeBundleText)
	}
	// Encodings a lenient reader accepts and a strict one refuses.
	resigned := func(raw []byte) []byte {
		q := req
		q.Bundle = signToken(pubPriv, release.PublicationContext, raw)
		out, _ := core.Canonical(q)
		return out
	}
	canon, _ := core.Canonical(r.bundle)
	add("bundle with a duplicate member name", resigned(append([]byte(`{"event_id":"evt-other",`), canon[1:]...)), r.now, peer.CodeBundleInvalid)
	unknownSchema := r.bundle
	unknownSchema.Schema = "localeflow.delivery-bundle.v0"
	raw, _ := core.Canonical(unknownSchema)
	add("bundle of an unknown schema", resigned(raw), r.now, peer.CodeBundleInvalid)
	otherEvent := r.bundle
	otherEvent.EventID = "evt-other"
	raw, _ = core.Canonical(otherEvent)
	add("bundle for another change than the path's", resigned(raw), r.now, peer.CodeBundleInvalid)
	add("bundle token with non-zero unused base64url bits", func() []byte {
		payload := canon
		if len(payload)%3 == 0 {
			payload = append([]byte("{ "), payload[1:]...)
		}
		enc := base64.RawURLEncoding.EncodeToString(payload)
		const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
		enc = enc[:len(enc)-1] + string(alphabet[strings.IndexByte(alphabet, enc[len(enc)-1])|1])
		q := req
		q.Bundle = "v1." + enc + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(pubPriv, []byte(release.PublicationContext+enc)))
		out, _ := core.Canonical(q)
		return out
	}(), r.now, peer.CodeBundleSignature)
	return file{
		Description: "Delivery requests and bundles (docs/design.md \"CMS delivery API\", \"Delivery bundle tokens\"; docs/integrating.md \"Verifying a delivery\"). Each body is POSTed for site_id and event_id and verified at now_ms with common.publication_public_hex (bundle: Ed25519 over \"localeflow.delivery.v1.\" + b64url(payload)) and common.approval_public_hex (each approval). error is the peer-side check that fails first, in the order of docs/design.md \"Peer rules\"; every locale is verified (the \"locale N of M only\" vectors break one locale, the others valid). The seeds let a test re-sign variants.",
		Common: map[string]any{"publication_public_hex": hexOf(r.publicationPub), "approval_public_hex": hexOf(r.approvalPub),
			"publication_seed_hex": hexOf(fx.PublicationKey), "approval_seed_hex": hexOf(fx.ApprovalSeed)},
		Vectors: vs,
	}
}

// ---- output event details ----

// outputEventVectors: one detail per output detail-type as the functions
// build it (the contract structs, ids from a real coordinator run and
// monitor.OutcomeID), each with the schema version it carries. A consumer
// checks it reads them; the schema tests validate them.
func outputEventVectors(t *testing.T) file {
	r := runRelease(t)
	b := r.bundle
	str := func(s string) *string { return &s }
	vector := func(name, detailType, schemaVersion string, detail any) any {
		raw := mustJSON(t, detail)
		var probe struct {
			Schema string `json:"schema"`
		}
		if err := json.Unmarshal(raw, &probe); err != nil || probe.Schema != schemaVersion {
			t.Fatalf("%s: schema %q, want %q", detailType, probe.Schema, schemaVersion)
		}
		return map[string]any{"name": name, "detail_type": detailType, "schema": schemaVersion, "detail": string(raw)}
	}
	l := b.Locales[0]
	return file{
		Description: "Output event details (consumer side): each carries its schema version in \"schema\"; consumers ignore members they do not know (docs/design.md \"Versions of the output details\").",
		Vectors: []any{
			vector("change terminal", contract.DetailChangeTerminal, contract.SchemaChangeTerminal, contract.ChangeTerminal{
				Schema: contract.SchemaChangeTerminal, EventID: b.EventID, OutcomeID: monitor.OutcomeID(b.EventID, monitor.StateTerminal, core.Millis(t0)),
				SiteID: str(b.SiteID), PlanID: str(b.PlanID), State: string(monitor.StateTerminal), RemoteStatus: str("published"),
				LifecycleSHA256: str(strings.Repeat("ab", 32))}),
			vector("change failed, invalid record", contract.DetailChangeTerminal, contract.SchemaChangeTerminal, contract.ChangeTerminal{
				Schema: contract.SchemaChangeTerminal, EventID: "evt-2026-0002", OutcomeID: monitor.OutcomeID("evt-2026-0002", monitor.StateFailed, core.Millis(t0)),
				State: string(monitor.StateFailed), ErrorCode: str(monitor.CodeStateInvalid)}),
			vector("release approved", contract.DetailReleaseApproved, contract.SchemaReleaseApproved, contract.ReleaseApproved{
				Schema: contract.SchemaReleaseApproved, EventID: b.EventID, PlanID: b.PlanID, JobID: l.JobID, TargetLocale: l.TargetLocale, ApprovalID: l.ApprovalID}),
			vector("delivery ready", contract.DetailDeliveryReady, contract.SchemaDelivery, contract.Delivery{
				Schema: contract.SchemaDelivery, EventID: b.EventID, PlanID: b.PlanID, DeliveryID: b.DeliveryID, Status: release.OutcomeDeliveryReady}),
			vector("delivery delivered", contract.DetailDeliveryDelivered, contract.SchemaDelivery, contract.Delivery{
				Schema: contract.SchemaDelivery, EventID: b.EventID, PlanID: b.PlanID, DeliveryID: b.DeliveryID, Status: release.OutcomeDelivered}),
			vector("health blocked, check failed", contract.DetailHealthBlocked, contract.SchemaHealthBlocked, contract.HealthBlocked{
				Schema: health.Schema, CheckedAtMS: core.Millis(t0), Reasons: []string{"health.unavailable"}}),
		},
	}
}
