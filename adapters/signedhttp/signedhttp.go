package signedhttp

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/signing"
)

// MinKeyBytes is the shortest accepted HMAC key.
const MinKeyBytes = 16

// drainBytes is how much of an answer that is not read is drained so the
// connection can be reused.
const drainBytes = 64 << 10

// Codes are a client's stable error codes and the name its messages use.
type Codes struct {
	Name           string // "cms lifecycle", "evidence": the start of messages
	ConfigInvalid  string // a bad base URL, key or timeout
	RequestInvalid string // a request that cannot be built
	Timeout        string // the attempt's timeout ran out (retryable)
	Cancelled      string // the caller's context was cancelled (retryable)
	Unavailable    string // any other transport failure (retryable)
}

// Config is the part of a client's configuration New validates.
type Config struct {
	// BaseURL is http(s)://host[:port][/prefix], without credentials,
	// query or fragment.
	BaseURL string
	// Key is the HMAC key (at least MinKeyBytes) that signs requests and
	// verifies responses; New copies it.
	Key []byte
	// PreviousKeys also verify responses (a key rotation in progress: the
	// server may still sign with one of them); New copies them.
	PreviousKeys [][]byte
	// KeySet, when set, replaces Key and PreviousKeys: each request is
	// signed with the first key it returns and its response verified with
	// any of them (secretkey.Cache re-reads a rotated secret on a TTL).
	KeySet KeySet
	// Timeout bounds one attempt; 0 means DefaultTimeout, and it must not
	// exceed MaxTimeout.
	Timeout, DefaultTimeout, MaxTimeout time.Duration
	// Clock supplies the signed timestamp; nil means the system clock.
	Clock core.Clock
	// HTTPClient is copied (its redirects disabled); nil means a dedicated
	// client with Transport (nil: the default transport).
	HTTPClient *http.Client
	Transport  http.RoundTripper
}

// KeySet supplies the current key set: the first key signs, every key
// verifies.
type KeySet interface {
	Keys(ctx context.Context) ([][]byte, error)
}

// Endpoint sends signed requests below one base URL. Safe for concurrent
// use.
type Endpoint struct {
	codes   Codes
	base    *url.URL
	key     []byte
	verify  [][]byte // key, then the previous keys
	keySet  KeySet   // when set, replaces key and verify per request
	timeout time.Duration
	clock   core.Clock
	http    *http.Client
}

// New validates cfg; failures are codes.ConfigInvalid, not retryable.
func New(codes Codes, cfg Config) (*Endpoint, error) {
	base, err := url.Parse(cfg.BaseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" ||
		base.User != nil || base.RawQuery != "" || base.Fragment != "" || base.Opaque != "" {
		return nil, core.Wrap(codes.ConfigInvalid, false,
			fmt.Errorf("%s base url must be http(s)://host[/prefix] without credentials, query or fragment", codes.Name))
	}
	base.Path = strings.TrimRight(base.Path, "/")
	base.RawPath = ""
	if cfg.KeySet == nil && len(cfg.Key) < MinKeyBytes {
		return nil, core.Wrap(codes.ConfigInvalid, false, fmt.Errorf("%s key must have at least %d bytes", codes.Name, MinKeyBytes))
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = cfg.DefaultTimeout
	}
	if timeout <= 0 || timeout > cfg.MaxTimeout {
		return nil, core.Wrap(codes.ConfigInvalid, false, fmt.Errorf("%s timeout must be in (0, %s]", codes.Name, cfg.MaxTimeout))
	}
	clock := cfg.Clock
	if clock == nil {
		clock = core.SystemClock{}
	}
	hc := &http.Client{Transport: cfg.Transport}
	if cfg.HTTPClient != nil {
		copied := *cfg.HTTPClient
		hc = &copied
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	e := &Endpoint{codes: codes, base: base, key: append([]byte(nil), cfg.Key...), timeout: timeout, clock: clock, http: hc}
	e.verify, e.keySet = [][]byte{e.key}, cfg.KeySet
	for _, k := range cfg.PreviousKeys {
		if len(k) < MinKeyBytes {
			return nil, core.Wrap(codes.ConfigInvalid, false, fmt.Errorf("%s previous key must have at least %d bytes", codes.Name, MinKeyBytes))
		}
		e.verify = append(e.verify, append([]byte(nil), k...))
	}
	return e, nil
}

// Timeout is the longest one Do can take.
func (e *Endpoint) Timeout() time.Duration { return e.timeout }

// NewRequestID returns a fresh request id: "req-" + 32 hex digits of
// crypto-random bytes, a token by construction.
func NewRequestID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("request id: %w", err)
	}
	return "req-" + hex.EncodeToString(b[:]), nil
}

// Request is one signed attempt.
type Request struct {
	Method string
	// Path is appended to the base URL's path (escape ids in it).
	Path string
	// Body is sent and signed; nil for none.
	Body []byte
	// ContentType and Accept are sent when not empty.
	ContentType, Accept string
	// Read reports whether the body of an answer with this status is read
	// (at most MaxBody+1 bytes); nil or false drains and drops it.
	Read    func(status int) bool
	MaxBody int64
}

// Response is an answer. Body holds what was read (more than MaxBody bytes
// means the answer was too large).
type Response struct {
	RequestID string
	Status    int
	Header    http.Header
	Body      []byte

	verify [][]byte // the key set the request was signed under
}

// Do performs one signed attempt bounded by the timeout. Its errors are
// the transport codes (retryable) and RequestInvalid.
func (e *Endpoint) Do(ctx context.Context, r Request) (*Response, error) {
	requestID, err := NewRequestID()
	if err != nil {
		return nil, core.Wrap(e.codes.Unavailable, true, err)
	}
	key, verify := e.key, e.verify
	if e.keySet != nil {
		set, err := e.keySet.Keys(ctx)
		if err != nil || len(set) == 0 || len(set[0]) < MinKeyBytes {
			return nil, core.Wrap(e.codes.Unavailable, true, fmt.Errorf("%s key set unavailable", e.codes.Name))
		}
		key, verify = set[0], set
	}
	path := e.base.Path + r.Path
	timestamp := strconv.FormatInt(e.clock.Now().Unix(), 10)
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	var body io.Reader
	if r.Body != nil {
		body = bytes.NewReader(r.Body)
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, e.base.Scheme+"://"+e.base.Host+path, body)
	if err != nil {
		return nil, core.Wrap(e.codes.RequestInvalid, false, fmt.Errorf("build %s request", e.codes.Name))
	}
	if r.ContentType != "" {
		req.Header.Set("Content-Type", r.ContentType)
	}
	if r.Accept != "" {
		req.Header.Set("Accept", r.Accept)
	}
	req.Header.Set(signing.HeaderRequestID, requestID)
	req.Header.Set(signing.HeaderTimestamp, timestamp)
	req.Header.Set(signing.HeaderSignature, signing.SignRequest(key, r.Method, path, requestID, timestamp, r.Body))
	resp, err := e.http.Do(req)
	if err != nil {
		return nil, e.transportError(ctx, err)
	}
	defer resp.Body.Close()
	out := &Response{RequestID: requestID, Status: resp.StatusCode, Header: resp.Header, verify: verify}
	if r.Read == nil || !r.Read(resp.StatusCode) {
		// The body is never read into errors or logs.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainBytes))
		return out, nil
	}
	if out.Body, err = io.ReadAll(io.LimitReader(resp.Body, r.MaxBody+1)); err != nil {
		return nil, e.transportError(ctx, err)
	}
	return out, nil
}

// StatusCode is the code of an HTTP status: prefix + ".http_" + status.
func StatusCode(prefix string, status int) string {
	code := prefix + ".http_" + strconv.Itoa(status)
	if !core.ValidErrorCode(code) {
		code = prefix + ".http_invalid"
	}
	return code
}

// transportError classifies a failure to obtain or read an answer, the
// context's state first. The *url.Error wrapper (method and URL) is
// dropped from the cause.
func (e *Endpoint) transportError(ctx context.Context, err error) error {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return core.Wrap(e.codes.Timeout, true, fmt.Errorf("%s attempt timed out", e.codes.Name))
	case errors.Is(ctx.Err(), context.Canceled):
		return core.Wrap(e.codes.Cancelled, true, fmt.Errorf("%s attempt cancelled", e.codes.Name))
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return core.Wrap(e.codes.Timeout, true, fmt.Errorf("%s attempt timed out", e.codes.Name))
	}
	var u *url.Error
	if errors.As(err, &u) {
		err = u.Err
	}
	return core.Wrap(e.codes.Unavailable, true, fmt.Errorf("%s unreachable: %w", e.codes.Name, err))
}

// VerifyResponse reports whether r carries exactly one response signature
// and it is valid for r's request id and body.
func (e *Endpoint) VerifyResponse(r *Response) bool {
	signature := r.Header.Values(signing.HeaderSignature)
	if len(signature) != 1 {
		return false
	}
	keys := r.verify
	if keys == nil {
		keys = e.verify
	}
	for _, k := range keys {
		if signing.VerifyResponse(k, r.RequestID, r.Body, signature[0]) {
			return true
		}
	}
	return false
}

// MaxRetryAfter caps an honoured Retry-After: a server asking for longer is
// retried after this (the failure budget still counts the attempt).
const MaxRetryAfter = time.Hour

// RetryAfter reads a Retry-After header (delta-seconds or an HTTP-date,
// RFC 9110 10.2.3) relative to now, capped at MaxRetryAfter; 0 when it is
// absent, malformed or not in the future. Delta-seconds of any length are
// capped, however large (2^32 s and more, beyond any integer type, too).
func RetryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	var d time.Duration
	if allDigits(v) {
		secs, err := strconv.ParseUint(v, 10, 64)
		if err != nil || secs >= uint64(MaxRetryAfter/time.Second) {
			// Only a value out of range fails to parse here.
			return MaxRetryAfter
		}
		d = time.Duration(secs) * time.Second
	} else if at, err := http.ParseTime(v); err == nil {
		d = at.Sub(now)
	}
	if d <= 0 {
		return 0
	}
	return min(d, MaxRetryAfter)
}

// allDigits reports whether v is one or more ASCII digits (delta-seconds).
func allDigits(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return false
		}
	}
	return v != ""
}
