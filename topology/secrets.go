package topology

import "github.com/localeflow/localeflow/contract"

// Key kinds of the secrets.
const (
	KeyHMAC    = "hmac"    // a shared key set: handed over by reference
	KeyEd25519 = "ed25519" // a signing seed: only its public key leaves
)

// Secret is one Secrets Manager secret of a deployment, holding key
// material the functions read (its variable stem is contract.Key*).
type Secret struct {
	// Logical is the CDK construct id; Stem names the secret
	// <prefix>/<Stem>.
	Logical string
	Stem    string
	// Key is the contract variable stem (LOCALEFLOW_<K>_KEY).
	Key string
	// Kind is KeyHMAC or KeyEd25519.
	Kind string
	// Holder says who else needs it: the party that shares the HMAC key,
	// or that verifies with the Ed25519 public key.
	Holder string
	// PublicLogical and PublicStem name, for an Ed25519 seed set, the
	// secret <prefix>/<PublicStem> that holds its public keys (hex, the
	// signing key first, comma separated; no key material): the
	// coordinator writes it at cold start, `localeflow keys` reads it, so
	// an operator never needs the seeds.
	PublicLogical, PublicStem string
}

// Who receives each key (`localeflow keys`).
const (
	HolderCMS      = "cms"
	HolderProducer = "producer"
	HolderEvidence = "evidence"
)

// Secrets are the five key secrets every deployment has.
var Secrets = []Secret{
	{Logical: "CMSKeySecret", Stem: "cms-hmac-key", Key: contract.KeyCMS, Kind: KeyHMAC, Holder: HolderCMS},
	{Logical: "EventKeySecret", Stem: "event-hmac-key", Key: contract.KeyEvent, Kind: KeyHMAC, Holder: HolderProducer},
	{Logical: "EvidenceKeySecret", Stem: "evidence-hmac-key", Key: contract.KeyEvidence, Kind: KeyHMAC, Holder: HolderEvidence},
	{Logical: "ApprovalKeySecret", Stem: "approval-ed25519-key", Key: contract.KeyApproval, Kind: KeyEd25519, Holder: HolderCMS,
		PublicLogical: "ApprovalPublicKeySecret", PublicStem: "approval-ed25519-public-key"},
	{Logical: "PublicationKeySecret", Stem: "publication-ed25519-key", Key: contract.KeyPublication, Kind: KeyEd25519, Holder: HolderCMS,
		PublicLogical: "PublicationPublicKeySecret", PublicStem: "publication-ed25519-public-key"},
}

// SecretName is the name of a deployment's secret.
func (t Topology) SecretName(s Secret) string { return t.Prefix + "/" + s.Stem }

// PublicKeySecretName is the name of the secret holding the public keys of
// an Ed25519 secret s ("" for an HMAC secret).
func (t Topology) PublicKeySecretName(s Secret) string {
	if s.PublicStem == "" {
		return ""
	}
	return t.Prefix + "/" + s.PublicStem
}

// PublicKeysUnpublished is the value the stack creates a public-key secret
// with, until the coordinator writes the public keys.
const PublicKeysUnpublished = "unpublished"
