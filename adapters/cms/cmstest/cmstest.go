// Package cmstest is a signed test CMS: a real HTTP handler implementing
// the lifecycle contract of docs/design.md ("CMS lifecycle API") for tests, the
// local demo and the fault suite.
//
// It verifies every request signature (401 on failure), answers with bodies
// signed over the exact bytes and bound to the request id, and plays a
// scripted sequence of steps per change: lifecycle statuses, HTTP errors
// (503, 429, 404…), delays longer than the client timeout, and contract
// violations (bad or missing signature, mismatched request id, oversized or
// malformed bodies, extra keys, foreign identity). The last step of a
// script repeats once the script is exhausted.
//
// Bind it to 127.0.0.1 only (Start does).
package cmstest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/lifecycle"
	"github.com/localeflow/localeflow/signing"
)

// Fault is a contract violation the server commits on purpose.
type Fault int

// Faults.
const (
	FaultNone Fault = iota
	// FaultBadSignature signs the body with a wrong key.
	FaultBadSignature
	// FaultMissingSignature omits the response signature header.
	FaultMissingSignature
	// FaultMismatchedRequestID puts another request id into the body and
	// signs that body validly for the request's own id.
	FaultMismatchedRequestID
	// FaultForeignRequestID signs the (otherwise valid) body for another
	// request id, as a replayed answer would be.
	FaultForeignRequestID
	// FaultOversizedBody pads the body beyond 1 MiB (valid JSON, signed).
	FaultOversizedBody
	// FaultMalformedBody answers a signed body that is not JSON.
	FaultMalformedBody
	// FaultExtraKey adds an unknown key to the body (signed).
	FaultExtraKey
	// FaultWrongIdentity answers for another plan id (signed).
	FaultWrongIdentity
)

// Step is one scripted answer.
type Step struct {
	// Status is the lifecycle status of a 200 answer.
	Status string
	// Approved and Blocked locales ([locale, reason_code]); QueueCounts;
	// Delivery and Tombstone are raw JSON objects or nil for null.
	Approved    []string
	Blocked     [][2]string
	QueueCounts map[string]int64
	Delivery    json.RawMessage
	Tombstone   json.RawMessage
	// HTTPStatus, when non-zero and not 200, answers that status with an
	// error body instead of a lifecycle view.
	HTTPStatus int
	// Delay holds the answer back (or until the client gives up).
	Delay time.Duration
	// Fault breaks the contract on purpose.
	Fault Fault
}

// StatusStep answers status (with every locale approved when published).
func StatusStep(status string) Step { return Step{Status: status} }

// HTTPStep answers an HTTP error status.
func HTTPStep(status int) Step { return Step{HTTPStatus: status} }

// Repeat returns n copies of step.
func Repeat(step Step, n int) []Step {
	out := make([]Step, n)
	for i := range out {
		out[i] = step
	}
	return out
}

// Change is a change the CMS knows.
type Change struct {
	EventID         string
	SiteID          string
	PlanID          string
	WebsiteVersion  string
	SourceSequence  int64
	RequiredLocales []string
}

// Request is one request the server received.
type Request struct {
	EventID   string
	SiteID    string
	RequestID string
	Timestamp string
	// SignatureValid says whether the request signature verified.
	SignatureValid bool
	// Status is the HTTP status answered (0 when the client left first).
	Status int
}

// CMS is the test server's state and http.Handler.
type CMS struct {
	key []byte // guarded by mu once serving (Rotate)

	mu       sync.Mutex
	accepted [][]byte // previous keys still accepted on requests
	changes  map[string]Change
	scripts  map[string][]Step
	served   map[string]int
	requests []Request
	latency  time.Duration
	clock    core.Clock
	skew     time.Duration
}

// New returns a CMS that signs and verifies with key.
func New(key []byte) *CMS {
	return &CMS{
		key:     append([]byte(nil), key...),
		changes: map[string]Change{},
		scripts: map[string][]Step{},
		served:  map[string]int{},
	}
}

// Rotate makes key the CMS's current key (it signs the responses with it)
// and keeps accepting requests signed with the previous one until Forget:
// the CMS side of a key rotation.
func (c *CMS) Rotate(key []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.accepted = append(c.accepted, c.key)
	c.key = append([]byte(nil), key...)
}

// Accept also accepts requests signed with key (the first step of a
// rotation: the clients may start signing with the new key).
func (c *CMS) Accept(key []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.accepted = append(c.accepted, append([]byte(nil), key...))
}

// Forget stops accepting every key but the current one.
func (c *CMS) Forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.accepted = nil
}

func (c *CMS) currentKey() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.key
}

func (c *CMS) requestKeys() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]byte{c.key}, c.accepted...)
}

// Start serves c on a fresh 127.0.0.1 listener; Close the server when done.
func (c *CMS) Start() *httptest.Server { return httptest.NewServer(c) }

// Put registers (or replaces) a change.
func (c *CMS) Put(ch Change) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.changes[ch.EventID] = ch
}

// Script sets the answers for eventID, restarting at the first step.
func (c *CMS) Script(eventID string, steps ...Step) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.scripts[eventID] = append([]Step(nil), steps...)
	c.served[eventID] = 0
}

// SetLatency delays every answer by d (on top of a step's Delay).
func (c *CMS) SetLatency(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.latency = d
}

// CheckTimestamp makes the server refuse (401) requests whose timestamp is
// more than skew away from clock.
func (c *CMS) CheckTimestamp(clock core.Clock, skew time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clock, c.skew = clock, skew
}

// Requests returns a copy of every request received so far.
func (c *CMS) Requests() []Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Request(nil), c.requests...)
}

// RequestsFor returns the requests for one event id.
func (c *CMS) RequestsFor(eventID string) []Request {
	var out []Request
	for _, r := range c.Requests() {
		if r.EventID == eventID {
			out = append(out, r)
		}
	}
	return out
}

// ServeHTTP implements the lifecycle endpoint; everything else is 404.
func (c *CMS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	site, event, ok := parsePath(r.URL.EscapedPath())
	if !ok || r.Method != http.MethodGet {
		writeError(w, http.StatusNotFound, "cms.route_not_found")
		return
	}
	rec := Request{
		EventID:   event,
		SiteID:    site,
		RequestID: r.Header.Get(signing.HeaderRequestID),
		Timestamp: r.Header.Get(signing.HeaderTimestamp),
	}
	rec.SignatureValid = false
	if core.ValidToken(rec.RequestID) {
		for _, k := range c.requestKeys() {
			if signing.VerifyRequest(k, http.MethodGet, r.URL.EscapedPath(), rec.RequestID, rec.Timestamp, nil, r.Header.Get(signing.HeaderSignature)) {
				rec.SignatureValid = true
			}
		}
	}

	c.mu.Lock()
	idx := len(c.requests)
	c.requests = append(c.requests, rec)
	fresh := c.timestampFresh(rec.Timestamp)
	change, known := c.changes[event]
	var step Step
	if rec.SignatureValid && fresh && known && change.SiteID == site {
		step = c.nextStep(event)
	}
	latency := c.latency
	c.mu.Unlock()

	status := c.answer(w, r, rec, fresh, known && change.SiteID == site, change, step, latency)
	c.mu.Lock()
	c.requests[idx].Status = status
	c.mu.Unlock()
}

func (c *CMS) answer(w http.ResponseWriter, r *http.Request, rec Request, fresh, known bool, change Change, step Step, latency time.Duration) int {
	if !rec.SignatureValid || !fresh {
		writeError(w, http.StatusUnauthorized, "cms.signature_invalid")
		return http.StatusUnauthorized
	}
	if !known {
		writeError(w, http.StatusNotFound, "cms.change_not_found")
		return http.StatusNotFound
	}
	if wait := latency + step.Delay; wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return 0
		}
	}
	if step.HTTPStatus != 0 && step.HTTPStatus != http.StatusOK {
		writeError(w, step.HTTPStatus, "cms.scripted_error")
		return step.HTTPStatus
	}
	body := c.body(change, rec.RequestID, step)
	signFor, key := rec.RequestID, c.currentKey()
	switch step.Fault {
	case FaultBadSignature:
		key = []byte("not-the-cms-key-at-all")
	case FaultForeignRequestID:
		signFor = rec.RequestID + "-other"
	}
	w.Header().Set("Content-Type", "application/json")
	if step.Fault != FaultMissingSignature {
		w.Header().Set(signing.HeaderSignature, signing.SignResponse(key, signFor, body))
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
	return http.StatusOK
}

func (c *CMS) timestampFresh(ts string) bool {
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || secs < 0 {
		return false
	}
	if c.clock == nil {
		return true
	}
	d := c.clock.Now().Sub(time.Unix(secs, 0))
	return d <= c.skew && d >= -c.skew
}

func (c *CMS) nextStep(event string) Step {
	script := c.scripts[event]
	if len(script) == 0 {
		return Step{Status: "processing"}
	}
	i := c.served[event]
	c.served[event] = i + 1
	if i >= len(script) {
		i = len(script) - 1
	}
	return script[i]
}

func (c *CMS) body(change Change, requestID string, step Step) []byte {
	if step.Fault == FaultMalformedBody {
		return []byte(`{"schema":"localeflow.cms-lifecycle.v1",`)
	}
	approved := step.Approved
	if approved == nil && step.Status == "published" {
		approved = change.RequiredLocales
	}
	blocked := make([][2]string, 0, len(step.Blocked))
	blocked = append(blocked, step.Blocked...)
	counts := step.QueueCounts
	if counts == nil {
		counts = map[string]int64{}
	}
	m := map[string]any{
		"schema":           lifecycle.Schema,
		"request_id":       requestID,
		"event_id":         change.EventID,
		"site_id":          change.SiteID,
		"plan_id":          change.PlanID,
		"website_version":  change.WebsiteVersion,
		"source_sequence":  change.SourceSequence,
		"status":           step.Status,
		"required_locales": nonNil(change.RequiredLocales),
		"approved_locales": nonNil(approved),
		"blocked_locales":  blocked,
		"queue_counts":     counts,
		"delivery":         rawOrNull(step.Delivery),
		"tombstone":        rawOrNull(step.Tombstone),
	}
	switch step.Fault {
	case FaultMismatchedRequestID:
		m["request_id"] = requestID + "-other"
	case FaultExtraKey:
		m["extra"] = true
	case FaultWrongIdentity:
		m["plan_id"] = change.PlanID + "-other"
	case FaultOversizedBody:
		m["tombstone"] = map[string]string{"padding": strings.Repeat("x", 1<<20)}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		panic("cmstest: encode lifecycle body: " + err.Error())
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func rawOrNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

// parsePath matches /v1/sites/{site}/changes/{event}/lifecycle with token
// segments (tokens need no escaping, so the escaped path is compared).
func parsePath(p string) (site, event string, ok bool) {
	parts := strings.Split(p, "/")
	if len(parts) != 7 || parts[0] != "" || parts[1] != "v1" || parts[2] != "sites" ||
		parts[4] != "changes" || parts[6] != "lifecycle" ||
		!core.ValidToken(parts[3]) || !core.ValidToken(parts[5]) {
		return "", "", false
	}
	return parts[3], parts[5], true
}

func writeError(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(`{"code":"` + code + `","retryable":` + strconv.FormatBool(status == 429 || status >= 500) + `}`))
}
