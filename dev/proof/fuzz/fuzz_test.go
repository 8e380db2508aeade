package fuzz

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/adapters/evidence"
	"github.com/localeflow/localeflow/adapters/opsdb"
	"github.com/localeflow/localeflow/adapters/releasedb"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/signing"
	"github.com/localeflow/localeflow/topology"
)

// FuzzReleaseItemDecode: any item of the release table (keys and JSON
// attributes) decodes without panicking; an item Decode accepts encodes
// back (releasedb.Item) to an item that decodes to the same keys; the
// health decoder never panics and marks what it cannot use corrupt.
func FuzzReleaseItemDecode(f *testing.F) {
	f.Add("event#evt-1", "delivery", `{"event_id":"evt-1","plan_id":"p","site_id":"s","delivery_id":"d","bundle_sha256":"x","signature":"c2ln","prepared_ms":1,"status":"pending","attempts":0,"max_attempts":5,"next_attempt_ms":1,"created_ms":1,"updated_ms":1,"v":1,"wake_shard":3,"wake_ms":1}`)
	f.Add("event#evt-1", "evidence#ev-1", `{"request_id":"ev-1","event_id":"evt-1","status":"leased","attempts":1,"max_attempts":5,"lease_token":"t","lease_owner":"w","lease_expires_ms":9}`)
	f.Add("event#evt-1", "plan", `{"event":{"event_id":"evt-1"},"plan_id":"p","jobs":[{"job_id":"j"}],"v":1}`)
	f.Add("event#evt-1", "result#job", `{"event_id":"evt-1","job_id":"job","result_json":"{}","v":"1"}`)
	f.Add("x", "approval#", `[]`)
	// Approvals of both layouts (docs/design.md "Compact approvals"); a
	// signature given as JSON is a string, not binary: refused.
	f.Add("event#evt-1", "approval#job-1", `{"event_id":"evt-1","job_id":"job-1","token":"v1.a.b","approved_ms":1,"expires_ms":2,"v":1}`)
	f.Add("event#evt-1", "approval#job-1", `{"event_id":"evt-1","job_id":"job-1","body":"{\"schema\":\"localeflow.approval.v1\",\"event_id\":\"evt-1\",\"job_id\":\"job-1\"}","sig":"AAAA","approved_ms":0,"expires_ms":0,"v":1}`)
	f.Fuzz(func(t *testing.T, pk, sk, attrs string) {
		var m map[string]any
		if json.Unmarshal([]byte(attrs), &m) != nil || m == nil {
			m = map[string]any{}
		}
		item, err := attributevalue.MarshalMap(m)
		if err != nil {
			return
		}
		item[topology.AttrPK] = &types.AttributeValueMemberS{Value: pk}
		item[topology.AttrSK] = &types.AttributeValueMemberS{Value: sk}
		h := opsdb.DecodeRelease(item)
		if !h.Corrupt && h.Evidence == nil && h.Delivery == nil && h.Job == nil && h.Approval == nil && h.Blocked == nil {
			t.Fatal("DecodeRelease: not corrupt but no record")
		}
		rec, err := releasedb.Decode(item)
		if err != nil {
			if !core.ValidErrorCode(core.CodeOf(err)) {
				t.Fatalf("error code %q", core.CodeOf(err))
			}
			return
		}
		eventID, key := rec.Key()
		if key != sk || releasedb.PK(eventID) != pk {
			t.Fatalf("decoded keys %q %q from %q %q", eventID, key, pk, sk)
		}
		again, err := releasedb.Item(rec)
		if err != nil {
			return // a record the store itself would refuse to write
		}
		rec2, err := releasedb.Decode(again)
		if err != nil {
			t.Fatalf("re-encoded item does not decode: %v", err)
		}
		if e2, k2 := rec2.Key(); e2 != eventID || k2 != key || rec2.RecordVersion() != rec.RecordVersion() {
			t.Fatalf("round trip changed keys: %q %q v%d", e2, k2, rec2.RecordVersion())
		}
	})
}

// FuzzSignatureHeaders: arbitrary signature header values never verify
// (unless they are the real signature) and never panic; the real
// signature always verifies, and changing any byte of the signed material
// breaks it.
func FuzzSignatureHeaders(f *testing.F) {
	key := []byte("fuzz-signature-key-0123456789abcdef")
	f.Add("GET", "/v1/sites/s/changes/e/lifecycle", "req-1", "1764460800", []byte(""), "v1=00")
	f.Add("POST", "/v1/evidence", "req-2", "0", []byte(`{"a":1}`), "v2=zz")
	f.Add("", "", "", "", []byte{0xff}, "")
	f.Fuzz(func(t *testing.T, method, path, rid, ts string, body []byte, header string) {
		good := signing.SignRequest(key, method, path, rid, ts, body)
		if !signing.VerifyRequest(key, method, path, rid, ts, body, good) {
			t.Fatal("own request signature does not verify")
		}
		if header != good && signing.VerifyRequest(key, method, path, rid, ts, body, header) {
			t.Fatalf("forged header %q verified", header)
		}
		if signing.VerifyRequest(key, method, path, rid, ts, append(append([]byte(nil), body...), 'x'), good) {
			t.Fatal("signature survived a body change")
		}
		resp := signing.SignResponse(key, rid, body)
		if !signing.VerifyResponse(key, rid, body, resp) || (header != resp && signing.VerifyResponse(key, rid, body, header)) {
			t.Fatal("response signature check wrong")
		}
		ev := signing.SignEvent(key, body)
		if !signing.VerifyEvent(key, body, ev) || (header != ev && signing.VerifyEvent(key, body, header)) {
			t.Fatal("event signature check wrong")
		}
		if !strings.HasPrefix(good, "v1=") {
			t.Fatalf("signature %q without v1=", good)
		}
	})
}

// FuzzEvidenceErrorAnswer: whatever status and body the provider answers,
// the client returns a valid stable error code (or the body for a 200),
// retryable exactly for 429/5xx or when a well-formed error body says so.
func FuzzEvidenceErrorAnswer(f *testing.F) {
	f.Add(503, `{"code":"busy","retryable":true}`)
	f.Add(422, `{"code":"policy_violation","retryable":false}`)
	f.Add(400, `{"code":"x","retryable":true,"extra":1}`)
	f.Add(409, `{"code":"Bad Code!","retryable":true}`)
	f.Add(404, `not json`)
	f.Add(200, `{}`)
	key := []byte("fuzz-evidence-key-0123456789abcdef")
	plan := releasetest.NewPlan("evt-fuzz", "de-DE")
	var res release.Result
	if err := json.Unmarshal(plan.ResultPayload("de-DE", releasetest.ResultOptions{}), &res); err != nil {
		f.Fatal(err)
	}
	h, err := release.ResultHash(res)
	if err != nil {
		f.Fatal(err)
	}
	job := release.PlanJob{JobID: plan.Jobs[0].JobID}
	req, err := release.BuildEvidenceRequest(plan.EventID, plan.PlanID, job, plan.Jobs[0].SourceText, &res, h, "rev-1")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, status int, body string) {
		if status < 200 || status > 599 {
			return
		}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(status)
			_, _ = w.Write([]byte(body))
		}))
		defer srv.Close()
		c, err := evidence.New(evidence.Config{BaseURL: srv.URL, Key: key, Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		out, err := c.Obtain(context.Background(), req)
		if status == http.StatusOK {
			if err != nil || string(out) != body {
				t.Fatalf("200: %v", err)
			}
			return
		}
		if err == nil {
			t.Fatalf("status %d accepted", status)
		}
		code := core.CodeOf(err)
		if !core.ValidErrorCode(code) || !strings.HasPrefix(code, "evidence.") {
			t.Fatalf("status %d: code %q", status, code)
		}
		if (status == 429 || status >= 500) && !core.IsRetryable(err) {
			t.Fatalf("status %d not retryable", status)
		}
	})
}
