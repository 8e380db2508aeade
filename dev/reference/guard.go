package reference

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/peer"
	"github.com/localeflow/localeflow/signing"
)

// Breaks make a reference server violate the contract on purpose, one
// named way each, so that a conformance checker (`localeflow conformance
// cms|evidence`) can be shown to report each violation by its check. A
// server without breaks follows docs/integrating.md, SHOULDs included.
//
// "skip:<peer code>" skips one peer-side check of peer (the
// request checks request.signature_invalid, request.stale,
// request.replayed; the delivery checks delivery.*, bundle.*; the
// evidence request checks evidence_request.*): the request is served as
// if it had passed. The other breaks are listed in KnownBreaks.
type Breaks []string

// Breaks that are not a skipped check.
const (
	// BreakAnswerUnsigned: lifecycle answers carry no signature.
	BreakAnswerUnsigned = "answer-unsigned"
	// BreakAnswerWrongSignature: lifecycle answers are signed with another key.
	BreakAnswerWrongSignature = "answer-wrong-signature"
	// BreakAnswerNotStrict: 200 answers carry an extra member (validly
	// signed on the CMS).
	BreakAnswerNotStrict = "answer-not-strict"
	// BreakBadRetryAfter: 429 and 503 answers carry "Retry-After: soon".
	BreakBadRetryAfter = "bad-retry-after"
	// BreakNotIdempotent: a delivery_id delivered before is answered 409
	// even with the same bundle.
	BreakNotIdempotent = "not-idempotent"
	// BreakAcceptConflict: another bundle under a known delivery_id is
	// answered 2xx.
	BreakAcceptConflict = "accept-conflict"
	// BreakWrongIssuer: quality receipts are signed by the human-review
	// issuer (a key trusted for another kind).
	BreakWrongIssuer = "wrong-issuer"
	// BreakReceiptNotBound: receipts are bound to another request id.
	BreakReceiptNotBound = "receipt-not-bound"
)

// KnownBreaks lists the accepted break names ("skip:" + each peer code
// the servers check, and the named breaks).
func KnownBreaks() []string {
	out := []string{BreakAnswerUnsigned, BreakAnswerWrongSignature, BreakAnswerNotStrict, BreakBadRetryAfter,
		BreakNotIdempotent, BreakAcceptConflict, BreakWrongIssuer, BreakReceiptNotBound}
	for _, d := range defectBreaks() {
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	for _, code := range []string{peer.CodeRequestSignature, peer.CodeRequestStale, peer.CodeRequestReplayed,
		peer.CodeDeliveryRequestInvalid, peer.CodeBundleSignature, peer.CodeBundleInvalid, peer.CodeBundleDeliveryID,
		peer.CodeBundleApproval, peer.CodeBundleApprovalMismatch, peer.CodeBundleApprovalExpired, peer.CodeBundleText,
		peer.CodeEvidenceRequestID, peer.CodeEvidenceRequestText} {
		out = append(out, "skip:"+code)
	}
	return out
}

// Validate refuses unknown break names.
func (b Breaks) Validate() error {
	known := KnownBreaks()
	for _, name := range b {
		if !slices.Contains(known, name) {
			return errors.New("reference: unknown break " + name + " (known: " + strings.Join(known, ", ") + ")")
		}
	}
	return nil
}

// Has reports whether break name is on.
func (b Breaks) Has(name string) bool { return slices.Contains(b, name) }

// skips reports whether the peer check that failed with err is skipped.
func (b Breaks) skips(err error) bool { return err != nil && b.Has("skip:"+core.CodeOf(err)) }

// guard makes the request checks of docs/integrating.md (signature, then
// timestamp window, then request-id replay within the window) in front of
// a reference server's handlers.
type guard struct {
	keys   [][]byte
	window time.Duration // <= 0: no window (and replay ids kept forever)
	breaks Breaks
	now    func() time.Time

	mu     sync.Mutex
	seen   map[string]time.Time // accepted request ids, by when
	pruned time.Time            // last sweep of seen (at most one a second)
}

func newGuard(key []byte, window time.Duration, breaks Breaks) *guard {
	return &guard{keys: [][]byte{key}, window: window, breaks: breaks, now: time.Now, seen: map[string]time.Time{}}
}

// check verifies r (body nil for none) and returns 0 or the refusal's HTTP
// status and peer code. skippedSig reports a bad signature let through by
// a break (the caller re-signs before its backend sees the request).
func (g *guard) check(r *http.Request, body []byte) (status int, code string, skippedSig bool) {
	req := peer.Request{Method: r.Method, Path: r.URL.EscapedPath(), RequestID: r.Header.Get(signing.HeaderRequestID),
		Timestamp: r.Header.Get(signing.HeaderTimestamp), Signature: r.Header.Get(signing.HeaderSignature), Body: body}
	now := g.now()
	if g.breaks.Has(DefectSigReparsedBody) && len(body) > 0 {
		// The framework parsed the JSON; the hash is taken of its
		// re-serialization, not of the bytes received.
		if canon, cerr := core.CanonicalizeJSON(body); cerr == nil {
			req.Body = canon
		}
	}
	err := peer.VerifyRequest(g.keys, req, now, nil)
	if core.HasCode(err, peer.CodeRequestStale) && g.window <= 0 {
		err = nil
	}
	if core.HasCode(err, peer.CodeRequestStale) && g.breaks.Has(DefectWindowPastOnly) {
		if ts, perr := strconv.ParseInt(req.Timestamp, 10, 64); perr == nil && ts > now.Unix() {
			err = nil
		}
	}
	if core.HasCode(err, peer.CodeRequestSignature) && (g.breaks.skips(err) || (g.breaks.Has(DefectSigAnyValue) && req.Signature != "")) {
		skippedSig = true
		// The window is still checked on a request let through.
		err = peer.VerifyRequest(g.keys, resigned(g.keys[0], req), now, nil)
		if core.HasCode(err, peer.CodeRequestStale) && g.window <= 0 {
			err = nil
		}
	}
	if err != nil && !g.breaks.skips(err) {
		return http.StatusUnauthorized, core.CodeOf(err), skippedSig
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.window > 0 && now.Sub(g.pruned) > time.Second {
		// Ids older than the window can no longer pass the window check.
		g.pruned = now
		for id, at := range g.seen {
			if now.Sub(at) > 2*g.window {
				delete(g.seen, id)
			}
		}
	}
	id := req.RequestID
	if g.breaks.Has(DefectReplayBySig) {
		id = req.Signature
	}
	if _, dup := g.seen[id]; dup && id != "" && !g.breaks.Has("skip:"+peer.CodeRequestReplayed) {
		return http.StatusConflict, peer.CodeRequestReplayed, skippedSig
	}
	if id != "" {
		g.seen[id] = now
	}
	return 0, "", skippedSig
}

// resigned is req signed validly with key (a fresh request id when it has
// none): what a server that ignores signatures would act on.
func resigned(key []byte, req peer.Request) peer.Request {
	if !core.ValidToken(req.RequestID) {
		req.RequestID = "req-resigned-" + core.SHA256Hex([]byte(req.Signature + req.Timestamp))[:16]
	}
	if req.Timestamp == "" {
		// A server that ignores signatures has no timestamp to check.
		req.Timestamp = strconv.FormatInt(time.Now().Unix(), 10)
	}
	req.Signature = signing.SignRequest(key, req.Method, req.Path, req.RequestID, req.Timestamp, req.Body)
	return req
}

// resign rewrites r's signature headers as resigned does.
func resign(key []byte, r *http.Request, body []byte) {
	req := resigned(key, peer.Request{Method: r.Method, Path: r.URL.EscapedPath(), RequestID: r.Header.Get(signing.HeaderRequestID),
		Timestamp: r.Header.Get(signing.HeaderTimestamp), Signature: r.Header.Get(signing.HeaderSignature), Body: body})
	r.Header.Set(signing.HeaderRequestID, req.RequestID)
	r.Header.Set(signing.HeaderTimestamp, req.Timestamp)
	r.Header.Set(signing.HeaderSignature, req.Signature)
}

// refuse answers a failed peer check with its status and
// {"code", "retryable": false}.
func refuse(w http.ResponseWriter, status int, code string) {
	writeJSON(w, status, map[string]any{"code": code, "retryable": false})
}

// recorded is a backend's answer held back so a break can alter it.
type recorded struct{ *httptest.ResponseRecorder }

func record(h http.Handler, r *http.Request) recorded {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return recorded{rec}
}

// flush writes the held answer to w.
func (rec recorded) flush(w http.ResponseWriter, body []byte) {
	for k, v := range rec.Header() {
		if k == "Content-Length" {
			continue
		}
		w.Header()[k] = v
	}
	if rec.Code == 0 {
		rec.Code = http.StatusOK
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(body)
}

// retryAfterBreak applies BreakBadRetryAfter to a held answer.
func retryAfterBreak(b Breaks, rec recorded) {
	if b.Has(BreakBadRetryAfter) && (rec.Code == http.StatusTooManyRequests || rec.Code == http.StatusServiceUnavailable) {
		rec.Header().Set("Retry-After", "soon")
	}
}

// readBody reads at most limit bytes of r's body (nil for an empty GET).
func readBody(r *http.Request, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	if r.Body == nil {
		return nil, nil
	}
	if _, err := buf.ReadFrom(http.MaxBytesReader(nil, r.Body, limit)); err != nil {
		return nil, err
	}
	if buf.Len() == 0 && r.Method == http.MethodGet {
		return nil, nil
	}
	return buf.Bytes(), nil
}
