package release

import (
	"crypto/ed25519"
	"time"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/signing"
)

// Receipt kinds (DESIGN.md "Receipts and signatures").
const (
	KindQuality                = "quality"
	KindHumanReview            = "human_review"
	KindIndependentModelReview = "independent_model_review"
)

// Receipt verification codes; the approval step reports them under
// "release." (e.g. "release.receipt.expired").
const (
	CodeReceiptMalformed       = "receipt.malformed"
	CodeReceiptIssuerUnknown   = "receipt.issuer_unknown"
	CodeReceiptSignature       = "receipt.signature_invalid"
	CodeReceiptKindMismatch    = "receipt.kind_mismatch"
	CodeReceiptBindingMismatch = "receipt.binding_mismatch"
	CodeReceiptExpired         = "receipt.expired"
	CodeReceiptNotYetValid     = "receipt.not_yet_valid"
)

// receiptSkew tolerates issuer clocks slightly ahead of ours.
const receiptSkew = 5 * time.Minute

// ReceiptPayload is the signed content of a receipt.
type ReceiptPayload struct {
	Kind         string `json:"kind"`
	Issuer       string `json:"issuer"`
	RequestID    string `json:"request_id"`
	ResultSHA256 string `json:"result_sha256"`
	IssuedAtMS   int64  `json:"issued_at_ms"`
	ExpiresAtMS  int64  `json:"expires_at_ms"`
}

// Verifier checks one receipt against the request and result it must be
// bound to.
type Verifier interface {
	Verify(receipt, requestID, resultSHA256 string, now time.Time) (ReceiptPayload, error)
}

// ReceiptVerifier verifies receipts of one kind with the issuers' Ed25519
// public keys.
type ReceiptVerifier struct {
	Kind    string
	Issuers map[string]ed25519.PublicKey
}

var _ Verifier = ReceiptVerifier{}

// Verify opens the receipt with its issuer's key and checks kind, binding
// and validity window.
func (v ReceiptVerifier) Verify(receipt, requestID, resultSHA256 string, now time.Time) (ReceiptPayload, error) {
	raw, err := signing.PeekReceiptPayload(receipt)
	if err != nil {
		return ReceiptPayload{}, core.Wrap(CodeReceiptMalformed, false, err)
	}
	p, err := parseReceiptPayload(raw)
	if err != nil {
		return ReceiptPayload{}, err
	}
	key, ok := v.Issuers[p.Issuer]
	if !ok {
		return ReceiptPayload{}, core.Fail(CodeReceiptIssuerUnknown)
	}
	if _, err := signing.OpenReceipt(key, receipt); err != nil {
		return ReceiptPayload{}, core.Wrap(CodeReceiptSignature, false, err)
	}
	if p.Kind != v.Kind {
		return ReceiptPayload{}, core.Fail(CodeReceiptKindMismatch)
	}
	if p.RequestID != requestID || p.ResultSHA256 != resultSHA256 {
		return ReceiptPayload{}, core.Fail(CodeReceiptBindingMismatch)
	}
	nowMS := core.Millis(now)
	if p.ExpiresAtMS <= nowMS {
		return ReceiptPayload{}, core.Fail(CodeReceiptExpired)
	}
	if p.IssuedAtMS > nowMS+receiptSkew.Milliseconds() {
		return ReceiptPayload{}, core.Fail(CodeReceiptNotYetValid)
	}
	return p, nil
}

func parseReceiptPayload(raw []byte) (ReceiptPayload, error) {
	const code = CodeReceiptMalformed
	f, err := object(raw, code, []string{"kind", "issuer", "request_id", "result_sha256", "issued_at_ms", "expires_at_ms"})
	if err != nil {
		return ReceiptPayload{}, err
	}
	var p ReceiptPayload
	if p.Kind, err = f.str("kind", code); err != nil {
		return ReceiptPayload{}, err
	}
	if p.Issuer, err = f.token("issuer", code); err != nil {
		return ReceiptPayload{}, err
	}
	if p.RequestID, err = f.token("request_id", code); err != nil {
		return ReceiptPayload{}, err
	}
	if p.ResultSHA256, err = f.sha("result_sha256", code); err != nil {
		return ReceiptPayload{}, err
	}
	if p.IssuedAtMS, err = f.integer("issued_at_ms", code, 0, 253402300799999); err != nil {
		return ReceiptPayload{}, err
	}
	if p.ExpiresAtMS, err = f.integer("expires_at_ms", code, 0, 253402300799999); err != nil {
		return ReceiptPayload{}, err
	}
	if p.ExpiresAtMS <= p.IssuedAtMS {
		return ReceiptPayload{}, core.Fail(code)
	}
	return p, nil
}
