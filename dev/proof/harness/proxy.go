package harness

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// HTTPFault is what the proxy does to one request.
type HTTPFault int

// HTTP faults.
const (
	// Pass forwards the request and the answer unchanged.
	Pass HTTPFault = iota
	// Hang holds the answer back 4 s, longer than the clients' 2 s timeout.
	Hang
	// Status503 answers 503 without forwarding.
	Status503
	// Malformed forwards, then replaces the body with bytes that are not
	// JSON (keeping the status).
	Malformed
	// AnswerLost forwards (the server applies the request), then answers
	// 504: the client cannot know it succeeded.
	AnswerLost
)

// Proxy is an HTTP proxy on 127.0.0.1 in front of a test server that
// applies a scripted fault to each request, in order; after the script
// it passes everything.
type Proxy struct {
	URL    string
	target string
	client *http.Client

	mu     sync.Mutex
	script []HTTPFault
	seen   map[HTTPFault]int
}

// NewProxy starts a proxy to target (closed when t ends).
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p := &Proxy{target: target, client: &http.Client{Timeout: 30 * time.Second}, seen: map[HTTPFault]int{}}
	srv := httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// Script sets the faults of the next requests.
func (p *Proxy) Script(faults ...HTTPFault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.script = append([]HTTPFault(nil), faults...)
}

// Seen counts the faults applied so far.
func (p *Proxy) Seen(f HTTPFault) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[f]
}

func (p *Proxy) next() HTTPFault {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := Pass
	if len(p.script) > 0 {
		f, p.script = p.script[0], p.script[1:]
	}
	p.seen[f]++
	return f
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	fault := p.next()
	switch fault {
	case Hang:
		select {
		case <-r.Context().Done():
		case <-time.After(4 * time.Second):
		}
		w.WriteHeader(http.StatusGatewayTimeout)
		return
	case Status503:
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"code":"proxy.unavailable","retryable":true}`))
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := p.client.Do(req)
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	switch fault {
	case AnswerLost:
		w.WriteHeader(http.StatusGatewayTimeout)
		return
	case Malformed:
		answer = []byte("{\"schema\": <<not json")
	}
	for k, v := range resp.Header {
		if k != "Content-Length" {
			w.Header()[k] = v
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}
