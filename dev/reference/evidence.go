package reference

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"github.com/localeflow/localeflow/adapters/signedhttp"
	"github.com/localeflow/localeflow/peer"
	"github.com/localeflow/localeflow/signing"

	"github.com/localeflow/localeflow/adapters/evidence/evidencetest"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

// EvidenceConfig configures a reference evidence provider.
type EvidenceConfig struct {
	// Key is the HMAC key shared with localeflow.
	Key []byte
	// Issuer names the quality receipt issuer; IssuerSeed is its Ed25519
	// seed.
	Issuer     string
	IssuerSeed []byte
	// HumanIssuer and HumanIssuerSeed sign human-review receipts, and
	// ReviewIssuer and ReviewIssuerSeed independent-model-review receipts.
	// The three seeds must differ: the coordinator trusts each key for its
	// own receipt kind only.
	HumanIssuer      string
	HumanIssuerSeed  []byte
	ReviewIssuer     string
	ReviewIssuerSeed []byte
	// Reviewer is the independent reviewer's provider id (default
	// review-beta); it is signed into the independent review receipt.
	Reviewer string
	Faults   Faults
	// RequestWindow and Breaks as in CMSConfig.
	RequestWindow time.Duration
	Breaks        Breaks
}

// ReceiptIssuers are the coordinator's per-kind trusted issuer values,
// each "issuer=<hex Ed25519 public key>".
type ReceiptIssuers struct {
	Quality, HumanReview, IndependentReview string
}

// Env returns the coordinator variables that trust this provider.
func (r ReceiptIssuers) Env() []string {
	return []string{
		contract.EnvReceiptIssuersQuality + "=" + r.Quality,
		contract.EnvReceiptIssuersHumanReview + "=" + r.HumanReview,
		contract.EnvReceiptIssuersIndependentReview + "=" + r.IndependentReview,
	}
}

// Evidence is the reference evidence provider (an http.Handler).
type Evidence struct {
	backend   *evidencetest.Server
	responder *releasetest.Responder
	issuers   ReceiptIssuers
	faults    *faulty
	proxy     http.Handler
	guard     *guard
	key       []byte
	breaks    Breaks

	mu     sync.Mutex
	served int // requests seen (DefectEvidenceBusyBadRetry)
}

// NewEvidence returns a reference evidence provider; Close releases its
// backend.
func NewEvidence(c EvidenceConfig) (*Evidence, error) {
	if len(c.Key) < 16 {
		return nil, errors.New("reference: the evidence key needs at least 16 bytes")
	}
	seeds := [][]byte{c.IssuerSeed, c.HumanIssuerSeed, c.ReviewIssuerSeed}
	for i, name := range []string{c.Issuer, c.HumanIssuer, c.ReviewIssuer} {
		if !core.ValidToken(name) || len(seeds[i]) != ed25519.SeedSize {
			return nil, errors.New("reference: the evidence provider needs an issuer token and a 32-byte seed for each receipt kind (quality, human review, independent review)")
		}
	}
	if bytes.Equal(c.IssuerSeed, c.HumanIssuerSeed) || bytes.Equal(c.IssuerSeed, c.ReviewIssuerSeed) || bytes.Equal(c.HumanIssuerSeed, c.ReviewIssuerSeed) {
		return nil, errors.New("reference: each receipt kind needs its own issuer seed")
	}
	if err := c.Faults.Validate(); err != nil {
		return nil, err
	}
	if err := c.Breaks.Validate(); err != nil {
		return nil, err
	}
	if c.Faults.Code == "" {
		c.Faults.Code = "evidence.unavailable"
	}
	window := c.RequestWindow
	if window == 0 {
		window = peer.RequestWindow
	}
	fx := releasetest.Fixture{
		Issuer: c.Issuer, IssuerKey: ed25519.NewKeyFromSeed(c.IssuerSeed),
		HumanIssuer: c.HumanIssuer, HumanIssuerKey: ed25519.NewKeyFromSeed(c.HumanIssuerSeed),
		ReviewIssuer: c.ReviewIssuer, ReviewIssuerKey: ed25519.NewKeyFromSeed(c.ReviewIssuerSeed),
	}
	trusted := func(kind string) string {
		name, key := fx.IssuerFor(kind)
		return name + "=" + hex.EncodeToString(key.Public().(ed25519.PublicKey))
	}
	issuers := ReceiptIssuers{
		Quality: trusted(release.KindQuality), HumanReview: trusted(release.KindHumanReview),
		IndependentReview: trusted(release.KindIndependentModelReview),
	}
	if c.Breaks.Has(BreakWrongIssuer) {
		// Quality receipts signed by the human-review issuer; the
		// advertised issuers stay the right ones.
		fx.Issuer, fx.IssuerKey = fx.HumanIssuer, fx.HumanIssuerKey
	}
	r := &releasetest.Responder{Fixture: fx, Review: releasetest.ReviewAuto, Reviewer: c.Reviewer}
	switch {
	case c.Breaks.Has(DefectReceiptFuture):
		r.Clock = core.ClockFunc(func() time.Time { return time.Now().Add(10 * time.Minute) })
	case c.Breaks.Has(DefectReceiptExpired):
		r.Clock = core.ClockFunc(func() time.Time { return time.Now().Add(-25 * time.Hour) })
	}
	e := &Evidence{backend: evidencetest.New(c.Key, r), responder: r, issuers: issuers,
		guard: newGuard(c.Key, window, c.Breaks), key: append([]byte(nil), c.Key...), breaks: c.Breaks}
	target, err := url.Parse(e.backend.URL)
	if err != nil {
		e.backend.Close()
		return nil, fmt.Errorf("reference: evidence backend: %w", err)
	}
	e.proxy = httputil.NewSingleHostReverseProxy(target)
	e.faults = newFaulty(c.Faults, http.HandlerFunc(e.serve))
	return e, nil
}

// ServeHTTP implements http.Handler.
func (e *Evidence) ServeHTTP(w http.ResponseWriter, r *http.Request) { e.faults.ServeHTTP(w, r) }

// serve makes the request checks of docs/integrating.md "The evidence
// provider API" (signature, window, replay, then the request itself:
// peer.CheckEvidenceRequest) and lets the test provider answer,
// applying the breaks.
func (e *Evidence) serve(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r, 2<<20)
	if err != nil {
		refuse(w, http.StatusBadRequest, "evidence.body_unreadable")
		return
	}
	if status, code, _ := e.guard.check(r, body); status != 0 {
		refuse(w, status, code)
		return
	}
	if e.breaks.Has(DefectEvidenceBusyBadRetry) {
		e.mu.Lock()
		e.served++
		busy := e.served%3 == 0
		e.mu.Unlock()
		if busy {
			w.Header().Set("Retry-After", "1.5")
			refuse(w, http.StatusServiceUnavailable, "evidence.unavailable")
			return
		}
	}
	req, err := peer.CheckEvidenceRequest(body)
	if core.HasCode(err, peer.CodeEvidenceRequestID) && e.breaks.Has(DefectEvidenceUnknown404) {
		// It looks the request up by request_id instead of deriving it.
		refuse(w, http.StatusNotFound, "evidence.job_unknown")
		return
	}
	if err != nil && !e.breaks.skips(err) {
		refuse(w, http.StatusBadRequest, core.CodeOf(err))
		return
	}
	if e.breaks.Has(BreakReceiptNotBound) && err == nil {
		body = bytes.Replace(body, []byte(`"request_id":"`+req.RequestID+`"`), []byte(`"request_id":"`+req.RequestID+`-other"`), 1)
	}
	// The backend sees a fresh request id: the replay check is the
	// guard's (a break may let a replay through).
	fresh, ferr := signedhttp.NewRequestID()
	if ferr != nil {
		refuse(w, http.StatusServiceUnavailable, "evidence.unavailable")
		return
	}
	r.Header.Set(signing.HeaderRequestID, fresh)
	resign(e.key, r, body)
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	rec := record(e.proxy, r)
	out := rec.Body.Bytes()
	retryAfterBreak(e.breaks, rec)
	if rec.Code == http.StatusOK {
		var m map[string]json.RawMessage
		if json.Unmarshal(out, &m) == nil && m != nil {
			if e.breaks.Has(BreakReceiptNotBound) && err == nil {
				m["request_id"], _ = json.Marshal(req.RequestID)
			}
			if e.breaks.Has(BreakAnswerNotStrict) {
				m["extra"] = json.RawMessage("true")
			}
			if err == nil {
				e.answerDefects(m, &req)
			}
			if b, merr := json.Marshal(m); merr == nil {
				out = b
			}
		}
	}
	rec.flush(w, out)
}

// answerDefects applies the answer defects to a 200 answer's members.
func (e *Evidence) answerDefects(m map[string]json.RawMessage, req *contract.EvidenceRequest) {
	fx, now := e.responder.Fixture, time.Now()
	review := func(id string) json.RawMessage {
		raw, _ := json.Marshal(map[string]any{
			"schema":   contract.IndependentModelReviewSchema,
			"provider": map[string]any{"id": id, "model_id": "rv-1", "model_version": "2026-09"},
			"receipt":  fx.IndependentReceipt(id, req.RequestID, req.ResultSHA256, now, 24*time.Hour),
		})
		return raw
	}
	switch {
	case e.breaks.Has(DefectHumanReviewIgnored) && req.HumanReviewRequired:
		m["human_review_receipt"] = json.RawMessage("null")
		m["independent_model_review"] = review(releasetest.DefaultReviewer)
	case e.breaks.Has(DefectReviewerIsTranslator) && req.IndependentReviewRequired:
		m["independent_model_review"] = review(req.Provider.ID)
	case e.breaks.Has(DefectResultNotEchoed):
		m["result_sha256"], _ = json.Marshal(core.SHA256Hex([]byte("another result|" + req.ResultSHA256)))
	}
}

// Close stops the backend.
func (e *Evidence) Close() { e.backend.Close() }

// Issuers are the per-kind issuer values that trust this provider.
func (e *Evidence) Issuers() ReceiptIssuers { return e.issuers }

// EvidenceStats is what the provider saw.
type EvidenceStats struct {
	Requests, Rejected, Answered, Injected int
}

// Stats returns what the provider saw so far.
func (e *Evidence) Stats() EvidenceStats {
	req, rej := e.backend.Counts()
	return EvidenceStats{Requests: req, Rejected: rej, Answered: e.responder.Calls(), Injected: e.faults.Injected()}
}
