package conformance

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/localeflow/localeflow/adapters/signedhttp"
	"github.com/localeflow/localeflow/signing"
)

// DefaultTimeout bounds one request of a check.
const DefaultTimeout = 30 * time.Second

// maxAnswer is the most of an answer read.
const maxAnswer = 2 << 20

// answer is what one request got.
type answer struct {
	status    int
	header    http.Header
	body      []byte
	requestID string
	err       error
}

// headers are the three signed-request headers as sent.
type headers struct{ requestID, timestamp, signature string }

// client sends signed requests below a base URL and notes every
// Retry-After of a 429 or 503.
type client struct {
	ctx     context.Context
	base    *url.URL
	key     []byte
	http    *http.Client
	now     func() time.Time
	timeout time.Duration

	// retryAfter holds "status: value" of every 429/503 answer, for the
	// retry_after check.
	retryAfter []retryAfterSeen
}

type retryAfterSeen struct {
	status int
	values []string
}

// newClient validates the base URL and key.
func newClient(ctx context.Context, baseURL string, key []byte, hc *http.Client, now func() time.Time) (*client, error) {
	base, err := url.Parse(baseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" ||
		base.User != nil || base.RawQuery != "" || base.Fragment != "" {
		return nil, errors.New("the base URL must be http(s)://host[:port][/prefix] without credentials, query or fragment")
	}
	base.Path = strings.TrimRight(base.Path, "/")
	if len(key) < signedhttp.MinKeyBytes {
		return nil, fmt.Errorf("the HMAC key needs at least %d bytes", signedhttp.MinKeyBytes)
	}
	if hc == nil {
		hc = &http.Client{}
	}
	copied := *hc
	copied.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if now == nil {
		now = time.Now
	}
	return &client{ctx: ctx, base: base, key: key, http: &copied, now: now, timeout: DefaultTimeout}, nil
}

// path is the full request path of rel (the base URL's prefix first).
func (c *client) path(rel string) string { return c.base.Path + rel }

// sign returns fresh signed headers for a request at now+offset signed
// with key (nil: the client's key).
func (c *client) sign(key []byte, method, path string, body []byte, offset time.Duration) headers {
	if key == nil {
		key = c.key
	}
	rid, err := signedhttp.NewRequestID()
	if err != nil {
		rid = "req-conformance-" + strconv.FormatInt(c.now().UnixNano(), 16)
	}
	ts := strconv.FormatInt(c.now().Add(offset).Unix(), 10)
	return headers{requestID: rid, timestamp: ts, signature: signing.SignRequest(key, method, path, rid, ts, body)}
}

// attempts is how often a request answered 429 or 503 is sent (as
// localeflow retries them, a single busy answer fails no check).
const attempts = 3

// signed sends a correctly signed request, signed afresh for each
// attempt; it returns the last answer and the headers it carried.
func (c *client) signed(method, rel string, body []byte) (answer, headers) {
	var a answer
	var h headers
	for i := 0; i < attempts; i++ {
		if i > 0 {
			c.backoff(a)
		}
		h = c.sign(nil, method, c.path(rel), body, 0)
		a = c.once(method, rel, body, &h)
		if !busy(a) {
			break
		}
	}
	return a, h
}

// signedOnce sends a signed request once (no retry).
func (c *client) signedOnce(method, rel string, body []byte) answer {
	h := c.sign(nil, method, c.path(rel), body, 0)
	return c.once(method, rel, body, &h)
}

// signAt signs a request with the timestamp ts (Unix seconds).
func (c *client) signAt(method, path string, body []byte, ts int64) headers {
	h := c.sign(nil, method, path, body, 0)
	h.timestamp = strconv.FormatInt(ts, 10)
	h.signature = signing.SignRequest(c.key, method, path, h.requestID, h.timestamp, body)
	return h
}

// resignedAfter is h's request id signed again one second after h's
// timestamp (a replay a signature cache does not recognize).
func (c *client) resignedAfter(method, path string, body []byte, h headers) headers {
	ts, _ := strconv.ParseInt(h.timestamp, 10, 64)
	h.timestamp = strconv.FormatInt(ts+1, 10)
	h.signature = signing.SignRequest(c.key, method, path, h.requestID, h.timestamp, body)
	return h
}

// send sends body (nil: none) with h (nil: no signature headers), again
// with the same headers while it is answered 429 or 503.
func (c *client) send(method, rel string, body []byte, h *headers) answer {
	a := c.once(method, rel, body, h)
	for i := 1; i < attempts && busy(a); i++ {
		c.backoff(a)
		a = c.once(method, rel, body, h)
	}
	return a
}

func busy(a answer) bool {
	return a.err == nil && (a.status == http.StatusTooManyRequests || a.status == http.StatusServiceUnavailable)
}

// backoff waits before a retry: the answer's Retry-After in seconds, at
// most maxBackoff, or a short default.
func (c *client) backoff(a answer) {
	d := 200 * time.Millisecond
	if v := a.header.Values("Retry-After"); validRetryAfter(v) {
		if n, err := strconv.Atoi(strings.TrimSpace(v[0])); err == nil {
			d = time.Duration(n) * time.Second
		}
	}
	wait(c.ctx, min(d, maxBackoff))
}

// maxBackoff bounds one wait for a retry.
const maxBackoff = 2 * time.Second

// once sends the request one time.
func (c *client) once(method, rel string, body []byte, h *headers) answer {
	ctx, cancel := context.WithTimeout(c.ctx, c.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base.Scheme+"://"+c.base.Host+c.path(rel), rd)
	if err != nil {
		return answer{err: errors.New("cannot build the request")}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	out := answer{}
	if h != nil {
		req.Header.Set(signing.HeaderRequestID, h.requestID)
		req.Header.Set(signing.HeaderTimestamp, h.timestamp)
		req.Header.Set(signing.HeaderSignature, h.signature)
		out.requestID = h.requestID
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// Only the failure's kind: the URL is the user's own.
		var ue *url.Error
		if errors.As(err, &ue) && ue.Timeout() {
			return answer{err: errors.New("timed out")}
		}
		return answer{err: errors.New("no answer (connection failed)")}
	}
	defer resp.Body.Close()
	out.status, out.header = resp.StatusCode, resp.Header
	out.body, err = io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return answer{err: errors.New("answer unreadable")}
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		c.retryAfter = append(c.retryAfter, retryAfterSeen{status: resp.StatusCode, values: resp.Header.Values("Retry-After")})
	}
	return out
}

// retryAfterCheck judges every Retry-After seen: absent, or one value,
// delta-seconds or an HTTP-date (RFC 9110 10.2.3).
func (c *client) retryAfterCheck(r *Report, busyAsked bool) {
	const check = "retry_after"
	if len(c.retryAfter) == 0 {
		why := "no 429 or 503 answered"
		if !busyAsked {
			why += "; name a change the server answers 429/503 for with --busy-change to check it"
		}
		r.skip(check, Must, why)
		return
	}
	missing := 0
	for _, s := range c.retryAfter {
		if len(s.values) == 0 {
			missing++
			continue
		}
		if !validRetryAfter(s.values) {
			r.fail(check, Must, CodeRetryAfter, fmt.Sprintf("%d with Retry-After %q: not one delta-seconds or HTTP-date value", s.status, truncate(strings.Join(s.values, ", "), 40)))
			return
		}
	}
	d := fmt.Sprintf("%d answer(s) 429/503", len(c.retryAfter))
	if missing > 0 {
		d += fmt.Sprintf(", %d without Retry-After (localeflow then backs off on its own)", missing)
	}
	r.pass(check, Must, d)
}

// validRetryAfter: one Retry-After value, delta-seconds or an HTTP-date.
func validRetryAfter(values []string) bool {
	if len(values) != 1 {
		return false
	}
	v := strings.TrimSpace(values[0])
	if v == "" {
		return false
	}
	digits := true
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			digits = false
			break
		}
	}
	if digits {
		return true
	}
	_, err := http.ParseTime(v)
	return err == nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// otherKey is a random HMAC key: a request signed with it must be refused.
func otherKey() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}
