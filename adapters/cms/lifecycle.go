package cms

import (
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
	"github.com/localeflow/localeflow/core/lifecycle"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/signing"
)

// Defaults and limits of the client.
const (
	// DefaultTimeout bounds one lifecycle attempt: connect, headers and body.
	DefaultTimeout = 10 * time.Second
	// MaxTimeout keeps the client timeout far below the longest lease
	// (86,400 s), so a configured lease can always outlast it.
	MaxTimeout = 15 * time.Minute
	// DefaultMaxBodyBytes limits a lifecycle body; larger is response_invalid.
	DefaultMaxBodyBytes = 1 << 20
	// MinKeyBytes is the shortest accepted HMAC key.
	MinKeyBytes = 16
)

// Error codes produced by the client (besides lifecycle.CodeResponseInvalid
// and the per-status cms.http_<code>).
const (
	CodeConfigInvalid = "cms.config_invalid"
	CodeTargetInvalid = "cms.target_invalid"
	CodeTimeout       = "cms.timeout"
	CodeUnavailable   = "cms.unavailable"
	CodeCancelled     = "cms.cancelled"
)

// Config configures a Client.
type Config struct {
	// BaseURL is http(s)://host[:port][/prefix], without query or fragment.
	BaseURL string
	// Key is the HMAC key shared with the CMS (at least MinKeyBytes).
	Key []byte
	// Timeout bounds one attempt; 0 means DefaultTimeout.
	Timeout time.Duration
	// MaxBodyBytes limits the response body; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Clock supplies the signed timestamp; nil means the system clock.
	Clock core.Clock
	// HTTPClient is the transport; nil means a dedicated client. Redirects
	// are never followed whichever client is given (a signed request is
	// bound to its path).
	HTTPClient *http.Client
}

var _ monitor.LifecycleReader = (*Client)(nil)

// Client reads signed lifecycle views from the CMS. It is safe for
// concurrent use.
type Client struct {
	base    *url.URL
	key     []byte
	timeout time.Duration
	maxBody int64
	clock   core.Clock
	http    *http.Client
}

// New validates cfg and returns a Client.
func New(cfg Config) (*Client, error) {
	base, err := parseBase(cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	if len(cfg.Key) < MinKeyBytes {
		return nil, core.Wrap(CodeConfigInvalid, false, fmt.Errorf("cms key must have at least %d bytes", MinKeyBytes))
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	if timeout < 0 || timeout > MaxTimeout {
		return nil, core.Wrap(CodeConfigInvalid, false, fmt.Errorf("cms timeout must be in (0, %s]", MaxTimeout))
	}
	maxBody := cfg.MaxBodyBytes
	if maxBody == 0 {
		maxBody = DefaultMaxBodyBytes
	}
	if maxBody < 0 {
		return nil, core.Wrap(CodeConfigInvalid, false, errors.New("cms max body bytes must be positive"))
	}
	clock := cfg.Clock
	if clock == nil {
		clock = core.SystemClock{}
	}
	hc := &http.Client{Transport: defaultTransport()}
	if cfg.HTTPClient != nil {
		copied := *cfg.HTTPClient
		hc = &copied
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Client{
		base:    base,
		key:     append([]byte(nil), cfg.Key...),
		timeout: timeout,
		maxBody: maxBody,
		clock:   clock,
		http:    hc,
	}, nil
}

// defaultTransport keeps enough idle connections for a concurrent sweep
// (the standard transport keeps 2 per host and would reconnect per poll).
func defaultTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 256
	t.MaxIdleConnsPerHost = 128
	return t
}

func parseBase(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, core.Wrap(CodeConfigInvalid, false, errors.New("cms base url does not parse"))
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return nil, core.Wrap(CodeConfigInvalid, false, errors.New("cms base url must be http(s)://host[/prefix] without credentials, query or fragment"))
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// Timeout is the longest one ReadLifecycle attempt can take. The monitor
// refuses leases that do not outlast it (lifecycle_monitor.lease_too_short).
func (c *Client) Timeout() time.Duration { return c.timeout }

// LifecyclePath is the request path of the lifecycle view of one change,
// relative to the base URL (also the path the CMS test server serves).
func LifecyclePath(siteID, eventID string) string {
	return "/v1/sites/" + url.PathEscape(siteID) + "/changes/" + url.PathEscape(eventID) + "/lifecycle"
}

// NewRequestID returns a fresh request id: "req-" + 32 hex digits of
// crypto-random bytes, a token by construction.
func NewRequestID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("request id: %w", err)
	}
	return "req-" + hex.EncodeToString(b[:]), nil
}

// ReadLifecycle performs one signed attempt to read target's lifecycle view
// and returns it validated against target. Each call is one attempt with its
// own request id; retrying is the monitor's decision.
func (c *Client) ReadLifecycle(ctx context.Context, target lifecycle.Target) (lifecycle.Response, error) {
	if !core.ValidToken(target.SiteID) || !core.ValidToken(target.EventID) {
		return lifecycle.Response{}, core.Fail(CodeTargetInvalid)
	}
	requestID, err := NewRequestID()
	if err != nil {
		return lifecycle.Response{}, core.Wrap(CodeUnavailable, true, err)
	}
	path := c.base.Path + LifecyclePath(target.SiteID, target.EventID)
	timestamp := strconv.FormatInt(c.clock.Now().Unix(), 10)

	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base.Scheme+"://"+c.base.Host+path, nil)
	if err != nil {
		return lifecycle.Response{}, core.Wrap(CodeTargetInvalid, false, errors.New("build lifecycle request"))
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set(signing.HeaderRequestID, requestID)
	req.Header.Set(signing.HeaderTimestamp, timestamp)
	req.Header.Set(signing.HeaderSignature, signing.SignRequest(c.key, http.MethodGet, path, requestID, timestamp, nil))

	resp, err := c.http.Do(req)
	if err != nil {
		return lifecycle.Response{}, transportError(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// Drain a little so the connection can be reused; the body of an
		// error answer is never read into errors or logs.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return lifecycle.Response{}, statusError(resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.maxBody+1))
	if err != nil {
		return lifecycle.Response{}, transportError(ctx, err)
	}
	if int64(len(body)) > c.maxBody {
		return lifecycle.Response{}, core.Wrap(lifecycle.CodeResponseInvalid, false, errors.New("lifecycle body too large"))
	}
	signature := resp.Header.Values(signing.HeaderSignature)
	if len(signature) != 1 || !signing.VerifyResponse(c.key, requestID, body, signature[0]) {
		return lifecycle.Response{}, core.Wrap(lifecycle.CodeResponseInvalid, false, errors.New("lifecycle response signature invalid"))
	}
	parsed, err := lifecycle.Parse(target, requestID, body)
	if err != nil {
		return lifecycle.Response{}, fmt.Errorf("lifecycle %s: %w", target.EventID, err)
	}
	return parsed, nil
}

// statusError maps a non-200 status: 429 and 5xx are retryable, the rest
// (other 4xx, 3xx, unexpected 1xx/2xx) are not.
func statusError(status int) error {
	code := "cms.http_" + strconv.Itoa(status)
	if !core.ValidErrorCode(code) {
		code = "cms.http_invalid"
	}
	retryable := status == http.StatusTooManyRequests || (status >= 500 && status <= 599)
	return core.Wrap(code, retryable, fmt.Errorf("cms answered http %d", status))
}

// transportError classifies a failure to obtain or read a response. The
// cause is kept out of the message when it could echo a URL with tokens only;
// URLs here carry ids, never secrets, so the net error is kept for logs.
func transportError(ctx context.Context, err error) error {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return core.Wrap(CodeTimeout, true, errors.New("cms lifecycle attempt timed out"))
	case errors.Is(ctx.Err(), context.Canceled):
		return core.Wrap(CodeCancelled, true, errors.New("cms lifecycle attempt cancelled"))
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return core.Wrap(CodeTimeout, true, errors.New("cms lifecycle attempt timed out"))
	}
	return core.Wrap(CodeUnavailable, true, fmt.Errorf("cms unreachable: %w", unwrapURL(err)))
}

// unwrapURL drops the *url.Error wrapper (method and URL) and keeps the cause.
func unwrapURL(err error) error {
	var u *url.Error
	if errors.As(err, &u) {
		return u.Err
	}
	return err
}
