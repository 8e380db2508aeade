package release

import (
	"crypto/ed25519"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/signing"
)

// Receipt kinds (docs/design.md "Receipts and signatures").
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
	CodeReceiptIssuerUntrusted = "receipt.issuer_untrusted"
	CodeReceiptSignature       = "receipt.signature_invalid"
	CodeReceiptKindMismatch    = "receipt.kind_mismatch"
	CodeReceiptBindingMismatch = "receipt.binding_mismatch"
	CodeReceiptExpired         = "receipt.expired"
	CodeReceiptNotYetValid     = "receipt.not_yet_valid"
)

// receiptSkew tolerates issuer clocks slightly ahead of ours.
const receiptSkew = 5 * time.Minute

// Verifier checks one receipt against the request and result it must be
// bound to.
type Verifier interface {
	Verify(receipt, requestID, resultSHA256 string, now time.Time) (contract.ReceiptPayload, error)
}

// ReceiptVerifier verifies receipts of one kind with the Ed25519 public
// keys of the issuers trusted for that kind.
type ReceiptVerifier struct {
	Kind    string
	Issuers map[string]ed25519.PublicKey
	// OtherKinds names issuers trusted for other kinds only. A receipt
	// from one of them is receipt.issuer_untrusted (a known issuer minting
	// a kind it may not) rather than receipt.issuer_unknown. Optional.
	OtherKinds map[string]bool
	// Previous holds further keys of issuers in Issuers while an issuer
	// rotates its key: a receipt verifies under the issuer's key or any of
	// these (docs/security.md "Receipt issuer keys"). Optional.
	Previous map[string][]ed25519.PublicKey
}

var _ Verifier = ReceiptVerifier{}

// Verify opens the receipt with its issuer's key and checks kind, binding
// and validity window.
func (v ReceiptVerifier) Verify(receipt, requestID, resultSHA256 string, now time.Time) (contract.ReceiptPayload, error) {
	raw, err := signing.PeekReceiptPayload(receipt)
	if err != nil {
		return contract.ReceiptPayload{}, core.Wrap(CodeReceiptMalformed, false, err)
	}
	p, err := parseReceiptPayload(raw)
	if err != nil {
		return contract.ReceiptPayload{}, err
	}
	key, ok := v.Issuers[p.Issuer]
	if !ok {
		if v.OtherKinds[p.Issuer] {
			return contract.ReceiptPayload{}, core.Fail(CodeReceiptIssuerUntrusted)
		}
		return contract.ReceiptPayload{}, core.Fail(CodeReceiptIssuerUnknown)
	}
	if _, err := signing.OpenReceipt(key, receipt); err != nil {
		opened := false
		for _, prev := range v.Previous[p.Issuer] {
			if _, perr := signing.OpenReceipt(prev, receipt); perr == nil {
				opened = true
				break
			}
		}
		if !opened {
			return contract.ReceiptPayload{}, core.Wrap(CodeReceiptSignature, false, err)
		}
	}
	if p.Kind != v.Kind {
		return contract.ReceiptPayload{}, core.Fail(CodeReceiptKindMismatch)
	}
	if p.RequestID != requestID || p.ResultSHA256 != resultSHA256 {
		return contract.ReceiptPayload{}, core.Fail(CodeReceiptBindingMismatch)
	}
	nowMS := core.Millis(now)
	if p.ExpiresAtMS <= nowMS {
		return contract.ReceiptPayload{}, core.Fail(CodeReceiptExpired)
	}
	if p.IssuedAtMS > nowMS+receiptSkew.Milliseconds() {
		return contract.ReceiptPayload{}, core.Fail(CodeReceiptNotYetValid)
	}
	return p, nil
}

func parseReceiptPayload(raw []byte) (contract.ReceiptPayload, error) {
	const code = CodeReceiptMalformed
	f, err := object(raw, code, []string{"kind", "issuer", "request_id", "result_sha256", "issued_at_ms", "expires_at_ms"}, "reviewer_id")
	if err != nil {
		return contract.ReceiptPayload{}, err
	}
	var p contract.ReceiptPayload
	if p.Kind, err = f.str("kind", code); err != nil {
		return contract.ReceiptPayload{}, err
	}
	switch {
	case p.Kind == KindIndependentModelReview:
		if p.ReviewerID, err = f.token("reviewer_id", code); err != nil {
			return contract.ReceiptPayload{}, err
		}
	case f.has("reviewer_id"):
		return contract.ReceiptPayload{}, core.Fail(code)
	}
	if p.Issuer, err = f.token("issuer", code); err != nil {
		return contract.ReceiptPayload{}, err
	}
	if p.RequestID, err = f.token("request_id", code); err != nil {
		return contract.ReceiptPayload{}, err
	}
	if p.ResultSHA256, err = f.sha("result_sha256", code); err != nil {
		return contract.ReceiptPayload{}, err
	}
	if p.IssuedAtMS, err = f.integer("issued_at_ms", code, 0, 253402300799999); err != nil {
		return contract.ReceiptPayload{}, err
	}
	if p.ExpiresAtMS, err = f.integer("expires_at_ms", code, 0, 253402300799999); err != nil {
		return contract.ReceiptPayload{}, err
	}
	if p.ExpiresAtMS <= p.IssuedAtMS {
		return contract.ReceiptPayload{}, core.Fail(code)
	}
	return p, nil
}

// TrustedIssuers are the receipt issuers' Ed25519 public keys, one set per
// receipt kind: a key trusted for quality receipts must not be able to
// mint a human-review receipt.
type TrustedIssuers struct {
	Quality           map[string]ed25519.PublicKey
	HumanReview       map[string]ed25519.PublicKey
	IndependentReview map[string]ed25519.PublicKey
	// Previous holds an issuer's further keys during its key rotation
	// (at most MaxIssuerKeys-1 per issuer), for issuers named in exactly
	// one of the kinds above; they verify that issuer's receipts of that
	// kind only.
	Previous map[string][]ed25519.PublicKey
}

// MaxIssuerKeys bounds the keys trusted for one issuer at once.
const MaxIssuerKeys = 4

// Receipt issuer configuration codes.
const (
	CodeIssuersMissing    = "release.receipt_issuers.missing"
	CodeIssuersKeyInvalid = "release.receipt_issuers.key_invalid"
	CodeIssuersKeyShared  = "release.receipt_issuers.key_shared"
	// CodeIssuersPreviousInvalid: a previous key for an issuer no kind
	// names, more than MaxIssuerKeys keys for one issuer, or a key
	// repeated.
	CodeIssuersPreviousInvalid = "release.receipt_issuers.previous_invalid"
)

// Validate refuses a kind without issuers, a malformed key, and one key
// trusted for two kinds (the key's holder could then mint either kind).
func (t TrustedIssuers) Validate() error {
	owner := map[string]string{}
	for _, set := range t.byKind() {
		if len(set.issuers) == 0 {
			return core.Fail(CodeIssuersMissing)
		}
		for _, key := range set.issuers {
			if len(key) != ed25519.PublicKeySize {
				return core.Fail(CodeIssuersKeyInvalid)
			}
			if kind, ok := owner[string(key)]; ok && kind != set.kind {
				return core.Fail(CodeIssuersKeyShared)
			}
			owner[string(key)] = set.kind
		}
	}
	for issuer, prev := range t.Previous {
		kind, n := "", 0
		var current ed25519.PublicKey
		for _, set := range t.byKind() {
			if key, ok := set.issuers[issuer]; ok {
				kind, current, n = set.kind, key, n+1
			}
		}
		if n != 1 || len(prev) == 0 || len(prev)+1 > MaxIssuerKeys {
			return core.Fail(CodeIssuersPreviousInvalid)
		}
		seen := map[string]bool{string(current): true}
		for _, key := range prev {
			if len(key) != ed25519.PublicKeySize {
				return core.Fail(CodeIssuersKeyInvalid)
			}
			if seen[string(key)] {
				return core.Fail(CodeIssuersPreviousInvalid)
			}
			seen[string(key)] = true
			if k, ok := owner[string(key)]; ok && k != kind {
				return core.Fail(CodeIssuersKeyShared)
			}
			owner[string(key)] = kind
		}
	}
	return nil
}

type kindIssuers struct {
	kind    string
	issuers map[string]ed25519.PublicKey
}

func (t TrustedIssuers) byKind() []kindIssuers {
	return []kindIssuers{
		{KindQuality, t.Quality}, {KindHumanReview, t.HumanReview}, {KindIndependentModelReview, t.IndependentReview},
	}
}

// Verifiers returns one verifier per kind, each trusting only its own
// kind's issuers and naming the others' so that their receipts are
// refused as receipt.issuer_untrusted.
func (t TrustedIssuers) Verifiers() Verifiers {
	all := t.byKind()
	v := make([]ReceiptVerifier, len(all))
	for i, set := range all {
		others := map[string]bool{}
		for j, other := range all {
			for name := range other.issuers {
				if j != i {
					others[name] = true
				}
			}
		}
		var prev map[string][]ed25519.PublicKey
		for name := range set.issuers {
			if keys := t.Previous[name]; len(keys) > 0 {
				if prev == nil {
					prev = map[string][]ed25519.PublicKey{}
				}
				prev[name] = keys
			}
		}
		v[i] = ReceiptVerifier{Kind: set.kind, Issuers: set.issuers, OtherKinds: others, Previous: prev}
	}
	return Verifiers{Quality: v[0], HumanReview: v[1], IndependentReview: v[2]}
}
