package reference

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"
)

// Faults injects latency and failures in front of a handler.
type Faults struct {
	// Latency delays every answer; Jitter adds a uniform random [0, Jitter).
	Latency time.Duration
	Jitter  time.Duration
	// FailureRate in [0, 1] is the share of requests answered 503.
	FailureRate float64
	// Every, when above 1, answers every Every-th request 503 as well
	// (deterministic: a client that retries once always gets through).
	Every int
	// Code is the error code of an injected failure.
	Code string
	// Seed makes the random choices reproducible (0: random).
	Seed uint64
}

// Validate checks the ranges.
func (f Faults) Validate() error {
	if f.Latency < 0 || f.Jitter < 0 || f.Latency > time.Minute || f.Jitter > time.Minute {
		return errors.New("reference: latency and jitter must be in [0, 1m]")
	}
	if f.Every < 0 {
		return errors.New("reference: every must not be negative")
	}
	if f.FailureRate < 0 || f.FailureRate > 1 {
		return errors.New("reference: failure rate must be in [0, 1]")
	}
	return nil
}

type faulty struct {
	f    Faults
	next http.Handler

	mu       sync.Mutex
	rng      *rand.Rand
	injected int
	seen     int
}

func newFaulty(f Faults, next http.Handler) *faulty {
	seed := f.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	if f.Code == "" {
		f.Code = "unavailable"
	}
	return &faulty{f: f, next: next, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

func (h *faulty) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	wait := h.f.Latency
	if h.f.Jitter > 0 {
		wait += time.Duration(h.rng.Int64N(int64(h.f.Jitter)))
	}
	h.seen++
	fail := (h.f.FailureRate > 0 && h.rng.Float64() < h.f.FailureRate) || (h.f.Every > 1 && h.seen%h.f.Every == 0)
	if fail {
		h.injected++
	}
	h.mu.Unlock()
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	if fail {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"code": h.f.Code, "retryable": true})
		return
	}
	h.next.ServeHTTP(w, r)
}

// Injected returns how many failures were injected.
func (h *faulty) Injected() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.injected
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Server is a running reference server.
type Server struct {
	URL string
	srv *http.Server
	ln  net.Listener
}

// Serve serves h on addr ("127.0.0.1:0" picks a free port). Only loopback
// addresses are accepted: these servers are for local use.
func Serve(addr string, h http.Handler) (*Server, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("reference: address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("reference: address %q is not a loopback IP (use 127.0.0.1)", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("reference: listen %s: %w", addr, err)
	}
	s := &Server{URL: "http://" + ln.Addr().String(), ln: ln,
		srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Close stops the server.
func (s *Server) Close() error { return s.srv.Close() }
