// Package peer is the executable form of what localeflow's peers must
// verify (docs/integrating.md): a CMS verifying a delivery request and its
// bundle, an evidence provider checking the request it was sent, and either
// one checking a signed HTTP request. The test vectors in
// contract/testdata/vectors are generated and checked with these functions
// and the product's own code; an integrator in another language implements
// the same checks and runs the same vectors.
//
// The codes returned here are the names of the peer-side checks (the
// vectors' "error" values). They are not codes localeflow emits: what a
// peer answers when a check fails is its own choice (docs/integrating.md
// suggests statuses).
package peer

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"strconv"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/signing"
)

// Peer-side check codes.
const (
	// Signed HTTP requests (CMS and evidence provider).
	CodeRequestSignature = "request.signature_invalid"
	CodeRequestStale     = "request.stale"
	CodeRequestReplayed  = "request.replayed"

	// Delivery request and bundle (CMS).
	CodeDeliveryRequestInvalid = "delivery.request_invalid"
	CodeBundleSignature        = "bundle.signature_invalid"
	CodeBundleInvalid          = "bundle.invalid"
	CodeBundleDeliveryID       = "bundle.delivery_id_mismatch"
	CodeBundleApproval         = "bundle.approval_invalid"
	CodeBundleApprovalMismatch = "bundle.approval_mismatch"
	CodeBundleApprovalExpired  = "bundle.approval_expired"
	CodeBundleText             = "bundle.text_mismatch"
	// CodeDeliveryConflict refuses another bundle under a delivery_id
	// the CMS accepted before (409).
	CodeDeliveryConflict = "delivery.conflict"

	// Approval tokens on their own.
	CodeApprovalToken = "approval.token_invalid"
	CodeApprovalID    = "approval.id_mismatch"

	// Evidence request (evidence provider).
	CodeEvidenceRequestInvalid = "evidence_request.invalid"
	CodeEvidenceRequestID      = "evidence_request.request_id_mismatch"
	CodeEvidenceRequestText    = "evidence_request.text_mismatch"
)

// RequestWindow is the timestamp window docs/integrating.md recommends for
// signed HTTP requests: |now - X-Localeflow-Timestamp| <= 5 minutes.
// localeflow's contract does not fix one; its client sends the current
// time on every attempt.
const RequestWindow = 5 * time.Minute

// Request is one received signed HTTP request.
type Request struct {
	Method, Path                    string
	RequestID, Timestamp, Signature string
	Body                            []byte // nil for GET
}

// VerifyRequest checks a signed request under any of keys at now: the
// signature, then the timestamp window, then the request id against seen
// (request ids already accepted within the window; nil skips the replay
// check). It records an accepted id in seen.
func VerifyRequest(keys [][]byte, r Request, now time.Time, seen map[string]bool) error {
	ok := core.ValidToken(r.RequestID)
	if ok {
		ok = false
		for _, k := range keys {
			if signing.VerifyRequest(k, r.Method, r.Path, r.RequestID, r.Timestamp, r.Body, r.Signature) {
				ok = true
				break
			}
		}
	}
	if !ok {
		return core.Fail(CodeRequestSignature)
	}
	ts, err := strconv.ParseInt(r.Timestamp, 10, 64)
	if err != nil || r.Timestamp != strconv.FormatInt(ts, 10) {
		return core.Fail(CodeRequestStale)
	}
	if d := now.Sub(time.Unix(ts, 0)); d > RequestWindow || d < -RequestWindow {
		return core.Fail(CodeRequestStale)
	}
	if seen != nil {
		if seen[r.RequestID] {
			return core.Fail(CodeRequestReplayed)
		}
		seen[r.RequestID] = true
	}
	return nil
}

// Keys are the public keys a CMS trusts: the publication authority's
// (bundles) and the approval authority's (approvals). During a rotation
// each holds the old and the new key.
type Keys struct {
	Publication []ed25519.PublicKey
	Approval    []ed25519.PublicKey
}

func openAny(context string, keys []ed25519.PublicKey, token string) ([]byte, bool) {
	for _, k := range keys {
		if p, err := release.OpenToken(context, k, token); err == nil {
			return p, true
		}
	}
	return nil, false
}

// strictDecode decodes exactly one JSON object into v, refusing unknown
// members and trailing data.
func strictDecode(raw []byte, v any) bool {
	if _, err := core.CanonicalizeJSON(raw); err != nil {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if dec.Decode(v) != nil {
		return false
	}
	_, err := dec.Token()
	return err != nil
}

// VerifyDelivery is what a CMS checks on a delivery request body it
// received for siteID and eventID (the path's), after VerifyRequest: the
// body, the bundle's publication signature, the bundle, and for every
// locale its approval token, the approval's binding and expiry at now and
// sha256(text) = target_sha256. It returns the verified bundle.
func VerifyDelivery(keys Keys, siteID, eventID string, body []byte, now time.Time) (contract.Bundle, error) {
	var req contract.DeliveryRequest
	if !strictDecode(body, &req) || req.Schema != contract.DeliveryRequestSchema || req.SiteID != siteID || req.EventID != eventID ||
		!core.ValidToken(req.DeliveryID) {
		return contract.Bundle{}, core.Fail(CodeDeliveryRequestInvalid)
	}
	payload, ok := openAny(release.PublicationContext, keys.Publication, req.Bundle)
	if !ok {
		return contract.Bundle{}, core.Fail(CodeBundleSignature)
	}
	var b contract.Bundle
	if !strictDecode(payload, &b) || b.Schema != contract.DeliveryBundleSchema || b.DeliveryID != req.DeliveryID ||
		b.EventID != eventID || b.SiteID != siteID || !core.ValidToken(b.PlanID) || len(b.Locales) == 0 {
		return contract.Bundle{}, core.Fail(CodeBundleInvalid)
	}
	ids := make([]string, 0, len(b.Locales))
	for _, l := range b.Locales {
		ids = append(ids, l.ApprovalID)
	}
	h, err := core.HashCanonical(map[string]any{"event_id": b.EventID, "plan_id": b.PlanID, "approvals": ids})
	if err != nil || b.DeliveryID != "dlv-"+h[:40] {
		return contract.Bundle{}, core.Fail(CodeBundleDeliveryID)
	}
	nowMS := core.Millis(now)
	for _, l := range b.Locales {
		a, err := VerifyApproval(keys.Approval, l.Approval)
		switch {
		case err != nil:
			return contract.Bundle{}, core.Fail(CodeBundleApproval)
		case a.ApprovalID != l.ApprovalID || a.EventID != b.EventID || a.SiteID != b.SiteID || a.PlanID != b.PlanID ||
			a.JobID != l.JobID || a.TargetLocale != l.TargetLocale || a.ResultSHA256 != l.ResultSHA256:
			return contract.Bundle{}, core.Fail(CodeBundleApprovalMismatch)
		case a.ExpiresAtMS <= nowMS:
			return contract.Bundle{}, core.Fail(CodeBundleApprovalExpired)
		case core.SHA256Hex([]byte(l.Text)) != l.TargetSHA256:
			return contract.Bundle{}, core.Fail(CodeBundleText)
		}
	}
	return b, nil
}

// VerifyApproval opens an approval token under any of keys and checks its
// payload and its approval_id derivation.
func VerifyApproval(keys []ed25519.PublicKey, token string) (contract.ApprovalPayload, error) {
	payload, ok := openAny(release.ApprovalContext, keys, token)
	var a contract.ApprovalPayload
	if !ok || !strictDecode(payload, &a) || a.Schema != contract.ApprovalSchema {
		return contract.ApprovalPayload{}, core.Fail(CodeApprovalToken)
	}
	if id, err := ApprovalID(a); err != nil || id != a.ApprovalID {
		return contract.ApprovalPayload{}, core.Fail(CodeApprovalID)
	}
	return a, nil
}

// ApprovalID derives an approval's id: "apv-" + the first 40 hex digits of
// SHA-256 of the JCS form of the payload with approval_id "".
func ApprovalID(a contract.ApprovalPayload) (string, error) {
	a.ApprovalID = ""
	h, err := core.HashCanonical(a)
	if err != nil {
		return "", err
	}
	return "apv-" + h[:40], nil
}

// CheckEvidenceRequest is what an evidence provider checks on a request
// body after VerifyRequest: the exact members, the request_id derivation
// and the text hashes.
func CheckEvidenceRequest(body []byte) (contract.EvidenceRequest, error) {
	var req contract.EvidenceRequest
	if !strictDecode(body, &req) || req.Schema != contract.EvidenceRequestSchema {
		return contract.EvidenceRequest{}, core.Fail(CodeEvidenceRequestInvalid)
	}
	h, err := core.HashCanonical(req.EvidenceBinding)
	if err != nil || req.RequestID != contract.EvidenceRequestIDPrefix+h {
		return contract.EvidenceRequest{}, core.Fail(CodeEvidenceRequestID)
	}
	if core.SHA256Hex([]byte(req.SourceText)) != req.SourceSHA256 || core.SHA256Hex([]byte(req.TargetText)) != req.TargetSHA256 {
		return contract.EvidenceRequest{}, core.Fail(CodeEvidenceRequestText)
	}
	return req, nil
}
