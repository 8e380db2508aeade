package release

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/signing"
)

// Signature contexts: an approval can never be replayed as a delivery
// bundle or a receipt, since each signs a different prefix.
const (
	ApprovalContext    = "localeflow.approval.v1."
	PublicationContext = "localeflow.delivery.v1."
)

// Codes of the authorities.
const (
	CodeApprovalSigningFailed = "release.approval.signing.failed"
	codeTokenInvalid          = "token.invalid"
)

var b64 = base64.RawURLEncoding

// Authority is one of localeflow's signing identities (approval or
// publication): tokens are v1.<b64url(payload)>.<b64url(Ed25519(context +
// b64url(payload)))>, verifiable with PublicKey alone. During a rotation
// it holds a key set: the first key signs, every key verifies, and the
// records that keep a token name the key that signed it (KeyID).
type Authority struct {
	context string
	key     ed25519.PrivateKey
	public  ed25519.PublicKey
	id      string
	// verify holds every key of the set by key id, the signing key
	// included; order keeps the set's order (PublicKeys).
	verify map[string]ed25519.PublicKey
	order  []ed25519.PublicKey
}

// NewApprovalAuthority returns the approval authority for an Ed25519 seed
// (32 bytes) or private key (64 bytes); previous keys (a rotation in
// progress) verify tokens but never sign.
func NewApprovalAuthority(key []byte, previous ...[]byte) (*Authority, error) {
	return newAuthority(ApprovalContext, key, previous)
}

// NewPublicationAuthority returns the publication authority that signs
// delivery bundles (previous keys as in NewApprovalAuthority).
func NewPublicationAuthority(key []byte, previous ...[]byte) (*Authority, error) {
	return newAuthority(PublicationContext, key, previous)
}

// CodeAuthorityKeyInvalid refuses key material that is not an Ed25519
// seed or private key, or a set naming one key twice.
const CodeAuthorityKeyInvalid = "release.authority.key_invalid"

func newAuthority(context string, key []byte, previous [][]byte) (*Authority, error) {
	a := &Authority{context: context, verify: map[string]ed25519.PublicKey{}}
	for i, k := range append([][]byte{key}, previous...) {
		var priv ed25519.PrivateKey
		switch len(k) {
		case ed25519.SeedSize:
			priv = ed25519.NewKeyFromSeed(k)
		case ed25519.PrivateKeySize:
			priv = ed25519.PrivateKey(append([]byte(nil), k...))
		default:
			return nil, core.Fail(CodeAuthorityKeyInvalid)
		}
		pub := priv.Public().(ed25519.PublicKey)
		id := KeyID(pub)
		if _, dup := a.verify[id]; dup {
			return nil, core.Fail(CodeAuthorityKeyInvalid)
		}
		a.verify[id] = pub
		a.order = append(a.order, pub)
		if i == 0 {
			a.key, a.public, a.id = priv, pub, id
		}
	}
	return a, nil
}

// KeyID names an Ed25519 public key in stored records: the first 8 bytes
// of SHA-256 over the 32-byte public key, as 16 lowercase hex digits
// (docs/design.md "Key ids"). It reveals nothing of the private key.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// ValidKeyID says whether s has the form of a KeyID.
func ValidKeyID(s string) bool {
	if len(s) != 16 {
		return false
	}
	for _, r := range s {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return false
		}
	}
	return true
}

// PublicKey is the key a CMS verifies new tokens with (the signing key's).
func (a *Authority) PublicKey() ed25519.PublicKey { return a.public }

// KeyID is the id of the signing key (KeyID of PublicKey).
func (a *Authority) KeyID() string { return a.id }

// PublicKeys are the public keys of the whole set, the signing key's first.
func (a *Authority) PublicKeys() []ed25519.PublicKey {
	return append([]ed25519.PublicKey(nil), a.order...)
}

// Sign returns the token for payload.
func (a *Authority) Sign(payload []byte) (string, error) {
	sig, err := a.signature(payload)
	if err != nil {
		return "", err
	}
	return BuildToken(payload, sig), nil
}

// signature is the Ed25519 signature of payload's token: over the context
// and b64url(payload).
func (a *Authority) signature(payload []byte) ([]byte, error) {
	if a == nil || a.key == nil {
		return nil, core.Retry(CodeApprovalSigningFailed)
	}
	return ed25519.Sign(a.key, []byte(a.context+b64.EncodeToString(payload))), nil
}

// Open verifies token with the signing key and returns its payload.
func (a *Authority) Open(token string) ([]byte, error) {
	return OpenToken(a.context, a.public, token)
}

// OpenKey verifies a stored token with the key keyID names, when that key
// is in the set (token.invalid otherwise: the key was dropped, or the id
// was altered, or the record names none).
func (a *Authority) OpenKey(keyID, token string) ([]byte, error) {
	if a == nil {
		return nil, core.Fail(codeTokenInvalid)
	}
	pub, ok := a.verify[keyID]
	if !ok || keyID == "" {
		return nil, core.Fail(codeTokenInvalid)
	}
	return OpenToken(a.context, pub, token)
}

// OpenToken verifies a token of context with pub; CMS-side verifiers (and
// the delivery test server) use it with the published key.
func OpenToken(context string, pub ed25519.PublicKey, token string) ([]byte, error) {
	parts := strings.Split(token, ".")
	if len(pub) != ed25519.PublicKeySize || len(parts) != 3 || parts[0] != "v1" || parts[1] == "" {
		return nil, core.Fail(codeTokenInvalid)
	}
	payload, err := signing.DecodeB64URL(parts[1])
	if err != nil {
		return nil, core.Fail(codeTokenInvalid)
	}
	sig, err := signing.DecodeB64URL(parts[2])
	if err != nil || len(sig) != ed25519.SignatureSize || !ed25519.Verify(pub, []byte(context+parts[1]), sig) {
		return nil, core.Fail(codeTokenInvalid)
	}
	return payload, nil
}
