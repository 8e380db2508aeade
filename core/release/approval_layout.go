package release

import (
	"crypto/ed25519"
	"encoding/json"
	"reflect"
	"unicode/utf8"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
)

// CodeStoredApprovalInvalid refuses a stored approval record whose layout
// is broken (docs/design.md "Compact approvals"): no body or signature, a
// token or a payload field stored beside them, no key id, a body that is
// not an approval payload or disagrees with the record's key and
// top-level fields, a signature that is not 64 bytes. A store read that meets one fails with
// it; a well-formed record whose signature does not verify is read and
// refused at lookup (approval.invalid), as a tampered token is.
const CodeStoredApprovalInvalid = "release.store.approval_invalid"

// compactApproval is what a store writes for an approval: the exact signed payload (Body) and its Ed25519 signature (Sig)
// in place of the token and of the attributes the payload repeats
// (plan_id, target_locale, result_sha256, request_id, approval_id).
// event_id and job_id stay (the health census checks an item's keys with
// them and never reads the body), and so does every attribute something
// reads without opening the payload: key_id (which key verifies),
// approved_ms and expires_ms (wake, retention, health), awaiting_delivery,
// v. Field names and attribute names are ApprovalRecord's, so the record
// decodes into ApprovalRecord.
type compactApproval struct {
	EventID          string `dynamodbav:"event_id"`
	JobID            string `dynamodbav:"job_id"`
	Body             string `dynamodbav:"body"`
	Sig              []byte `dynamodbav:"sig"`
	KeyID            string `dynamodbav:"key_id"`
	ApprovedMS       int64  `dynamodbav:"approved_ms"`
	ExpiresMS        int64  `dynamodbav:"expires_ms"`
	AwaitingDelivery bool   `dynamodbav:"awaiting_delivery,omitempty"`
	Version          int64  `dynamodbav:"v"`
}

// BuildToken is the token of a signed payload and its signature:
// v1.<b64url(payload)>.<b64url(sig)>, byte for byte what Authority.Sign
// returned for payload (the encoding is canonical: unpadded base64url).
func BuildToken(payload, sig []byte) string {
	return "v1." + b64.EncodeToString(payload) + "." + b64.EncodeToString(sig)
}

// SetSigned sets r's signed payload: body is the exact payload signed
// (the canonical JSON of ApprovalPayload) and sig its signature; Token is
// rebuilt from them. The other fields are not touched: a store checks
// them against the body when it writes r (StoredForm).
func (r *ApprovalRecord) SetSigned(body, sig []byte) {
	r.Body = string(body)
	r.Sig = append([]byte(nil), sig...)
	r.Token = BuildToken(body, sig)
}

// StoredForm is what a store marshals for rec (as DynamoDB attributes or
// JSON): rec itself, except an approval, which is written as body and
// signature plus the attributes read without opening the payload. An
// approval whose fields disagree with its body (they would be lost by the
// write) is refused with CodeStoredApprovalInvalid.
func StoredForm(rec Record) (any, error) {
	a, ok := rec.(*ApprovalRecord)
	if !ok {
		return rec, nil
	}
	want := *a
	want.Token, want.PlanID, want.TargetLocale, want.ResultSHA256, want.RequestID, want.ApprovalID = "", "", "", "", "", ""
	if err := openCompact(&want, a.EventID); err != nil {
		return nil, err
	}
	// Every field, those a later change may add included: a field the
	// stored form does not hold would be lost by the write.
	if !reflect.DeepEqual(&want, a) {
		return nil, core.Fail(CodeStoredApprovalInvalid)
	}
	return &compactApproval{
		EventID: a.EventID, JobID: a.JobID, Body: a.Body, Sig: a.Sig, KeyID: a.KeyID,
		ApprovedMS: a.ApprovedMS, ExpiresMS: a.ExpiresMS,
		AwaitingDelivery: a.AwaitingDelivery, Version: a.Version,
	}, nil
}

// OpenStored completes a record a store read from the partition of
// eventID. An approval must hold a body, a signature and a key id and
// nothing its payload holds; it gets its token and the fields its payload
// holds filled in (the token rebuilt from the stored bytes, never from a
// re-encoded payload), after its body is checked against the record's key
// and top-level fields. Other kinds are left as they are. Errors:
// CodeStoredApprovalInvalid.
func OpenStored(rec Record, eventID string) error {
	a, ok := rec.(*ApprovalRecord)
	if !ok {
		return nil
	}
	if a.Token != "" || a.PlanID != "" || a.TargetLocale != "" || a.ResultSHA256 != "" || a.RequestID != "" || a.ApprovalID != "" {
		return core.Fail(CodeStoredApprovalInvalid)
	}
	return openCompact(a, eventID)
}

// openCompact checks a compact approval's body and signature and fills the
// fields the payload holds.
func openCompact(a *ApprovalRecord, eventID string) error {
	if len(a.Sig) != ed25519.SignatureSize || a.Body == "" || !utf8.ValidString(a.Body) || !ValidKeyID(a.KeyID) {
		return core.Fail(CodeStoredApprovalInvalid)
	}
	// Read as lookupApproval reads a token's payload.
	var p contract.ApprovalPayload
	if err := json.Unmarshal([]byte(a.Body), &p); err != nil {
		return core.Fail(CodeStoredApprovalInvalid)
	}
	if p.Schema != contract.ApprovalSchema || p.EventID != eventID || p.EventID != a.EventID || p.JobID != a.JobID ||
		p.ApprovedAtMS != a.ApprovedMS || p.ExpiresAtMS != a.ExpiresMS ||
		!core.ValidToken(p.PlanID) || !core.ValidToken(p.TargetLocale) || !core.ValidSHA256(p.ResultSHA256) ||
		!core.ValidToken(p.EvidenceRequestID) || !core.ValidToken(p.ApprovalID) {
		return core.Fail(CodeStoredApprovalInvalid)
	}
	a.PlanID, a.TargetLocale, a.ResultSHA256 = p.PlanID, p.TargetLocale, p.ResultSHA256
	a.RequestID, a.ApprovalID = p.EvidenceRequestID, p.ApprovalID
	a.Token = BuildToken([]byte(a.Body), a.Sig)
	return nil
}
