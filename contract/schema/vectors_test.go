package schema_test

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/localeflow/localeflow/contract/schema"
)

// TestValidVectorsValidate: every document a valid vector carries (event
// details and their payloads, request and answer bodies, the payloads
// inside receipts, approvals and bundles) validates against its schema, so
// the vectors and the schemas describe one contract.
func TestValidVectorsValidate(t *testing.T) {
	load := func(name string) (common map[string]any, vectors []map[string]any) {
		raw, err := os.ReadFile(filepath.Join("..", "testdata", "vectors", name))
		if err != nil {
			t.Fatal(err)
		}
		var f struct {
			Common  map[string]any   `json:"common"`
			Vectors []map[string]any `json:"vectors"`
		}
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatal(err)
		}
		return f.Common, f.Vectors
	}
	valid := func(v map[string]any) bool { ok, has := v["valid"].(bool); return !has || ok }
	str := func(v map[string]any, k string) string { s, _ := v[k].(string); return s }
	payloadOf := func(token string) []byte {
		parts := strings.Split(token, ".")
		if len(parts) != 3 {
			t.Fatalf("token %q", token)
		}
		raw, err := base64.RawURLEncoding.DecodeString(parts[1])
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	n := 0
	check := func(name string, doc []byte) {
		t.Helper()
		n++
		mustValidate(t, name, doc)
	}

	_, vs := load("event_signature.json")
	for _, v := range vs {
		if !valid(v) {
			continue
		}
		var d struct {
			Payload string `json:"payload"`
		}
		detail := []byte(str(v, "detail"))
		check(schema.SignedEvent, detail)
		_ = json.Unmarshal(detail, &d)
		check(schema.PayloadFor[str(v, "detail_type")], []byte(d.Payload))
	}
	_, vs = load("http_signature.json")
	for _, v := range vs {
		if str(v, "op") == "sign_response" {
			check(schema.CMSLifecycleResponse, []byte(str(v, "body")))
		}
	}
	_, vs = load("evidence_request_id.json")
	for _, v := range vs {
		if valid(v) {
			check(schema.EvidenceRequest, []byte(str(v, "body")))
		}
	}
	_, vs = load("receipts.json")
	for _, v := range vs {
		if valid(v) {
			check(schema.ReceiptPayload, payloadOf(str(v, "receipt")))
		}
	}
	_, vs = load("approval_tokens.json")
	for _, v := range vs {
		if str(v, "op") == "verify_approval" && valid(v) {
			check(schema.ApprovalPayload, payloadOf(str(v, "token")))
		}
	}
	_, vs = load("delivery_bundles.json")
	for _, v := range vs {
		if !valid(v) {
			continue
		}
		body := []byte(str(v, "body"))
		check(schema.DeliveryRequest, body)
		var req struct {
			Bundle string `json:"bundle"`
		}
		_ = json.Unmarshal(body, &req)
		bundle := payloadOf(req.Bundle)
		check(schema.DeliveryBundle, bundle)
		var b struct {
			Locales []struct {
				Approval string `json:"approval"`
			} `json:"locales"`
		}
		_ = json.Unmarshal(bundle, &b)
		for _, l := range b.Locales {
			check(schema.ApprovalPayload, payloadOf(l.Approval))
		}
	}
	if n < 30 {
		t.Fatalf("only %d documents checked", n)
	}
	t.Logf("%d documents from valid vectors validate", n)
}
