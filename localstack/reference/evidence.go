package reference

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"

	"github.com/localeflow/localeflow/adapters/evidence/evidencetest"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

// EvidenceConfig configures a reference evidence provider.
type EvidenceConfig struct {
	// Key is the HMAC key shared with localeflow.
	Key []byte
	// Issuer names the receipt issuer; IssuerSeed is its Ed25519 seed.
	Issuer     string
	IssuerSeed []byte
	// Reviewer is the independent reviewer's provider id (default
	// review-beta).
	Reviewer string
	Faults   Faults
}

// Evidence is the reference evidence provider (an http.Handler).
type Evidence struct {
	backend   *evidencetest.Server
	responder *releasetest.Responder
	issuer    string
	public    ed25519.PublicKey
	faults    *faulty
}

// NewEvidence returns a reference evidence provider; Close releases its
// backend.
func NewEvidence(c EvidenceConfig) (*Evidence, error) {
	if len(c.Key) < 16 {
		return nil, errors.New("reference: the evidence key needs at least 16 bytes")
	}
	if !core.ValidToken(c.Issuer) || len(c.IssuerSeed) != ed25519.SeedSize {
		return nil, errors.New("reference: the evidence provider needs an issuer token and a 32-byte issuer seed")
	}
	if err := c.Faults.Validate(); err != nil {
		return nil, err
	}
	if c.Faults.Code == "" {
		c.Faults.Code = "evidence.unavailable"
	}
	priv := ed25519.NewKeyFromSeed(c.IssuerSeed)
	fx := releasetest.Fixture{Issuer: c.Issuer, IssuerKey: priv}
	r := &releasetest.Responder{Fixture: fx, Review: releasetest.ReviewAuto, Reviewer: c.Reviewer}
	e := &Evidence{backend: evidencetest.New(c.Key, r), responder: r, issuer: c.Issuer, public: priv.Public().(ed25519.PublicKey)}
	target, err := url.Parse(e.backend.URL)
	if err != nil {
		e.backend.Close()
		return nil, fmt.Errorf("reference: evidence backend: %w", err)
	}
	e.faults = newFaulty(c.Faults, httputil.NewSingleHostReverseProxy(target))
	return e, nil
}

// ServeHTTP implements http.Handler.
func (e *Evidence) ServeHTTP(w http.ResponseWriter, r *http.Request) { e.faults.ServeHTTP(w, r) }

// Close stops the backend.
func (e *Evidence) Close() { e.backend.Close() }

// Issuers is the LOCALEFLOW_RECEIPT_ISSUERS value that trusts this
// provider: "issuer=<hex public key>".
func (e *Evidence) Issuers() string { return e.issuer + "=" + hex.EncodeToString(e.public) }

// EvidenceStats is what the provider saw.
type EvidenceStats struct {
	Requests, Rejected, Answered, Injected int
}

// Stats returns what the provider saw so far.
func (e *Evidence) Stats() EvidenceStats {
	req, rej := e.backend.Counts()
	return EvidenceStats{Requests: req, Rejected: rej, Answered: e.responder.Calls(), Injected: e.faults.Injected()}
}
