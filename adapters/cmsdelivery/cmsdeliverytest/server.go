// Package cmsdeliverytest is a CMS delivery API test server: it verifies
// each request's HMAC signature, then the delivery bundle's Ed25519
// signature with the publication public key (and every approval inside it
// with the approval public key), the way a real CMS would, and records
// deliveries idempotently by delivery_id.
package cmsdeliverytest

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/signing"
)

// Server is a running CMS delivery endpoint on 127.0.0.1.
type Server struct {
	*httptest.Server
	key         []byte
	publication ed25519.PublicKey
	approval    ed25519.PublicKey
	// Further keys accepted while a key rotates (Accept).
	keys         [][]byte
	publications []ed25519.PublicKey
	approvals    []ed25519.PublicKey

	mu         sync.Mutex
	failFirst  int
	calls      int
	rejected   int
	duplicates int
	deliveries map[string][]byte
	bundles    map[string]contract.Bundle
}

// New starts a server sharing key with the client and trusting the given
// publication and approval public keys.
func New(key []byte, publication, approval ed25519.PublicKey) *Server {
	s := &Server{key: key, publication: publication, approval: approval, deliveries: map[string][]byte{}, bundles: map[string]contract.Bundle{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Accept replaces the keys the server accepts, as a CMS does during a key
// rotation: requests signed with any of hmacKeys, bundles signed with any
// of publications, approvals with any of approvals (each nil keeps the
// keys New was given).
func (s *Server) Accept(hmacKeys [][]byte, publications, approvals []ed25519.PublicKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys, s.publications, s.approvals = hmacKeys, publications, approvals
}

func (s *Server) verifyRequest(method, path, rid, ts string, body []byte, sig string) bool {
	keys := s.keys
	if keys == nil {
		keys = [][]byte{s.key}
	}
	for _, k := range keys {
		if signing.VerifyRequest(k, method, path, rid, ts, body, sig) {
			return true
		}
	}
	return false
}

func openAny(context string, pubs []ed25519.PublicKey, fallback ed25519.PublicKey, token string) ([]byte, error) {
	if pubs == nil {
		pubs = []ed25519.PublicKey{fallback}
	}
	var err error
	for _, pub := range pubs {
		var payload []byte
		if payload, err = release.OpenToken(context, pub, token); err == nil {
			return payload, nil
		}
	}
	return nil, err
}

// FailFirst makes the next n calls answer 503.
func (s *Server) FailFirst(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failFirst = n
}

// Stats reports calls, rejected requests, idempotent duplicates and the
// verified deliveries by id.
func (s *Server) Stats() (calls, rejected, duplicates int, bundles map[string]contract.Bundle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]contract.Bundle, len(s.bundles))
	for k, v := range s.bundles {
		out[k] = v
	}
	return s.calls, s.rejected, s.duplicates, out
}

func (s *Server) reject(w http.ResponseWriter, status int) {
	s.rejected++
	w.WriteHeader(status)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.failFirst > 0 {
		s.failFirst--
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	parts := strings.Split(r.URL.Path, "/")
	// /v1/sites/{site}/changes/{event}/deliveries
	if r.Method != http.MethodPost || len(parts) != 7 || parts[1] != "v1" || parts[2] != "sites" || parts[4] != "changes" || parts[6] != "deliveries" {
		s.reject(w, http.StatusNotFound)
		return
	}
	siteID, eventID := parts[3], parts[5]
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		s.reject(w, http.StatusBadRequest)
		return
	}
	rid, ts := r.Header.Get(signing.HeaderRequestID), r.Header.Get(signing.HeaderTimestamp)
	if !core.ValidToken(rid) || ts == "" || !s.verifyRequest(r.Method, r.URL.Path, rid, ts, body, r.Header.Get(signing.HeaderSignature)) {
		s.reject(w, http.StatusUnauthorized)
		return
	}
	var req contract.DeliveryRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if dec.Decode(&req) != nil || req.Schema != contract.DeliveryRequestSchema || req.SiteID != siteID || req.EventID != eventID {
		s.reject(w, http.StatusBadRequest)
		return
	}
	payload, err := openAny(release.PublicationContext, s.publications, s.publication, req.Bundle)
	if err != nil {
		s.reject(w, http.StatusForbidden)
		return
	}
	var b contract.Bundle
	if json.Unmarshal(payload, &b) != nil || b.Schema != contract.DeliveryBundleSchema || b.DeliveryID != req.DeliveryID ||
		b.EventID != eventID || b.SiteID != siteID || len(b.Locales) == 0 {
		s.reject(w, http.StatusBadRequest)
		return
	}
	for _, l := range b.Locales {
		if _, err := openAny(release.ApprovalContext, s.approvals, s.approval, l.Approval); err != nil ||
			core.SHA256Hex([]byte(l.Text)) != l.TargetSHA256 {
			s.reject(w, http.StatusForbidden)
			return
		}
	}
	if prev, ok := s.deliveries[b.DeliveryID]; ok {
		if !bytes.Equal(prev, payload) {
			s.reject(w, http.StatusConflict)
			return
		}
		s.duplicates++
		w.WriteHeader(http.StatusOK)
		return
	}
	s.deliveries[b.DeliveryID] = payload
	s.bundles[b.DeliveryID] = b
	w.WriteHeader(http.StatusCreated)
}
