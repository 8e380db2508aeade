package signing

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"strings"
)

// ReceiptContext is prepended to the encoded payload before signing, so a
// receipt signature can never be replayed as another kind of signature.
const ReceiptContext = "localeflow.receipt.v1."

var b64 = base64.RawURLEncoding

// strictB64 refuses non-zero unused trailing bits; padding and the
// standard alphabet are invalid characters of the raw URL alphabet.
var strictB64 = base64.RawURLEncoding.Strict()

// DecodeB64URL decodes the canonical unpadded base64url form only: no
// padding, no standard-alphabet characters, no non-zero trailing bits and
// no line breaks (the standard decoder skips '\r' and '\n', even in strict
// mode). Every byte string therefore has exactly one accepted encoding, so
// nothing derived from an encoded receipt or token can be varied by
// re-encoding it.
func DecodeB64URL(s string) ([]byte, error) {
	if strings.ContainsAny(s, "\r\n") {
		return nil, errNotCanonical
	}
	return strictB64.DecodeString(s)
}

var errNotCanonical = errors.New("signing: not canonical unpadded base64url")

// ErrReceiptMalformed is returned for a receipt that is not
// v1.<b64url>.<b64url> or whose signature does not verify. Callers map it to
// their own stable codes.
var ErrReceiptMalformed = errors.New("signing: receipt malformed or signature invalid")

// SignReceipt returns v1.<b64url(payload)>.<b64url(Ed25519(ctx+b64url(payload)))>.
func SignReceipt(key ed25519.PrivateKey, payload []byte) string {
	encoded := b64.EncodeToString(payload)
	sig := ed25519.Sign(key, []byte(ReceiptContext+encoded))
	return "v1." + encoded + "." + b64.EncodeToString(sig)
}

// OpenReceipt verifies receipt against pub and returns its payload bytes.
// It checks only the envelope and the signature; the caller validates the
// payload fields (kind, issuer, binding, expiry).
func OpenReceipt(pub ed25519.PublicKey, receipt string) ([]byte, error) {
	if len(pub) != ed25519.PublicKeySize {
		return nil, ErrReceiptMalformed
	}
	parts := strings.Split(receipt, ".")
	if len(parts) != 3 || parts[0] != "v1" || parts[1] == "" {
		return nil, ErrReceiptMalformed
	}
	payload, err := DecodeB64URL(parts[1])
	if err != nil {
		return nil, ErrReceiptMalformed
	}
	sig, err := DecodeB64URL(parts[2])
	if err != nil || len(sig) != ed25519.SignatureSize {
		return nil, ErrReceiptMalformed
	}
	if !ed25519.Verify(pub, []byte(ReceiptContext+parts[1]), sig) {
		return nil, ErrReceiptMalformed
	}
	return payload, nil
}

// PeekReceiptPayload decodes the payload of a v1 receipt without verifying
// it, so a verifier can find the issuer whose key to verify with. Never
// trust the result before OpenReceipt succeeds.
func PeekReceiptPayload(receipt string) ([]byte, error) {
	parts := strings.Split(receipt, ".")
	if len(parts) != 3 || parts[0] != "v1" {
		return nil, ErrReceiptMalformed
	}
	payload, err := DecodeB64URL(parts[1])
	if err != nil {
		return nil, ErrReceiptMalformed
	}
	return payload, nil
}
