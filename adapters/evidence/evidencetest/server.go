// Package evidencetest is a signed evidence provider test server: it
// verifies each request's HMAC signature and canonical body, and answers
// with receipts signed by an issuer key (releasetest.Responder decides the
// review answers and injected failures).
package evidencetest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/signing"
)

// Server is a running test provider on 127.0.0.1.
type Server struct {
	*httptest.Server
	Responder *releasetest.Responder
	key       []byte

	mu        sync.Mutex
	keys      [][]byte // Accept
	requests  int
	rejected  int
	requestID map[string]bool
}

// New starts a provider that shares key with the client.
func New(key []byte, r *releasetest.Responder) *Server {
	s := &Server{Responder: r, key: key, requestID: map[string]bool{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Accept replaces the request keys the provider accepts, as it does
// during a key rotation (nil: the key New was given).
func (s *Server) Accept(keys ...[]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = keys
}

func (s *Server) verify(method, path, rid, ts string, body []byte, sig string) bool {
	s.mu.Lock()
	keys := s.keys
	s.mu.Unlock()
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

// Counts returns how many requests arrived and how many were rejected as
// unsigned, badly signed or malformed.
func (s *Server) Counts() (requests, rejected int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests, s.rejected
}

func writeError(w http.ResponseWriter, status int, code string, retryable bool) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"code": code, "retryable": retryable})
}

func (s *Server) reject(w http.ResponseWriter, status int, code string) {
	s.mu.Lock()
	s.rejected++
	s.mu.Unlock()
	writeError(w, status, code, false)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests++
	s.mu.Unlock()
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/v1/evidence") {
		s.reject(w, http.StatusNotFound, "not_found")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 2<<20))
	if err != nil {
		s.reject(w, http.StatusBadRequest, "body_unreadable")
		return
	}
	rid := r.Header.Get(signing.HeaderRequestID)
	ts := r.Header.Get(signing.HeaderTimestamp)
	if !core.ValidToken(rid) || ts == "" ||
		!s.verify(r.Method, r.URL.Path, rid, ts, body, r.Header.Get(signing.HeaderSignature)) {
		s.reject(w, http.StatusUnauthorized, "signature_invalid")
		return
	}
	s.mu.Lock()
	replay := s.requestID[rid]
	s.requestID[rid] = true
	s.mu.Unlock()
	if replay {
		s.reject(w, http.StatusConflict, "request_replayed")
		return
	}
	canonical, err := core.CanonicalizeJSON(body)
	if err != nil || !bytes.Equal(canonical, body) {
		s.reject(w, http.StatusBadRequest, "body_not_canonical")
		return
	}
	var req contract.EvidenceRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || req.Schema != contract.EvidenceRequestSchema || !core.ValidToken(req.RequestID) {
		s.reject(w, http.StatusBadRequest, "request_invalid")
		return
	}
	out, err := s.Responder.Respond(&req)
	if err != nil {
		if core.IsRetryable(err) {
			writeError(w, http.StatusServiceUnavailable, core.CodeOf(err), true)
			return
		}
		writeError(w, http.StatusUnprocessableEntity, core.CodeOf(err), false)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}
