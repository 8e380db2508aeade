package release

import (
	"crypto/ed25519"
	"encoding/base64"
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
// b64url(payload)))>, verifiable with PublicKey alone.
type Authority struct {
	context string
	key     ed25519.PrivateKey
	public  ed25519.PublicKey
}

// NewApprovalAuthority returns the approval authority for an Ed25519 seed
// (32 bytes) or private key (64 bytes).
func NewApprovalAuthority(key []byte) (*Authority, error) { return newAuthority(ApprovalContext, key) }

// NewPublicationAuthority returns the publication authority that signs
// delivery bundles.
func NewPublicationAuthority(key []byte) (*Authority, error) {
	return newAuthority(PublicationContext, key)
}

func newAuthority(context string, key []byte) (*Authority, error) {
	var priv ed25519.PrivateKey
	switch len(key) {
	case ed25519.SeedSize:
		priv = ed25519.NewKeyFromSeed(key)
	case ed25519.PrivateKeySize:
		priv = ed25519.PrivateKey(append([]byte(nil), key...))
	default:
		return nil, core.Fail("release.authority.key_invalid")
	}
	return &Authority{context: context, key: priv, public: priv.Public().(ed25519.PublicKey)}, nil
}

// PublicKey is the key a CMS verifies tokens with.
func (a *Authority) PublicKey() ed25519.PublicKey { return a.public }

// Sign returns the token for payload.
func (a *Authority) Sign(payload []byte) (string, error) {
	if a == nil || a.key == nil {
		return "", core.Retry(CodeApprovalSigningFailed)
	}
	enc := b64.EncodeToString(payload)
	return "v1." + enc + "." + b64.EncodeToString(ed25519.Sign(a.key, []byte(a.context+enc))), nil
}

// Open verifies token and returns its payload.
func (a *Authority) Open(token string) ([]byte, error) {
	return OpenToken(a.context, a.public, token)
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
