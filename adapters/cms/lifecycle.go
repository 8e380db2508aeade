package cms

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/localeflow/localeflow/adapters/signedhttp"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/lifecycle"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/internal/remotecall"
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
	MinKeyBytes = signedhttp.MinKeyBytes
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
	// PreviousKeys also verify the CMS's responses during a key rotation.
	PreviousKeys [][]byte
	// KeySet, when set, replaces Key and PreviousKeys (re-read on a TTL).
	KeySet signedhttp.KeySet
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
	endpoint *signedhttp.Endpoint
	maxBody  int64
	clock    core.Clock // reads HTTP-date Retry-After values
}

var codes = signedhttp.Codes{
	Name: "cms lifecycle", ConfigInvalid: CodeConfigInvalid, RequestInvalid: CodeTargetInvalid,
	Timeout: CodeTimeout, Cancelled: CodeCancelled, Unavailable: CodeUnavailable,
}

// New validates cfg and returns a Client.
func New(cfg Config) (*Client, error) {
	endpoint, err := signedhttp.New(codes, signedhttp.Config{
		BaseURL: cfg.BaseURL, Key: cfg.Key, PreviousKeys: cfg.PreviousKeys, KeySet: cfg.KeySet,
		Timeout: cfg.Timeout, DefaultTimeout: DefaultTimeout, MaxTimeout: MaxTimeout,
		Clock: cfg.Clock, HTTPClient: cfg.HTTPClient, Transport: defaultTransport(),
	})
	if err != nil {
		return nil, err
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
	return &Client{endpoint: endpoint, maxBody: maxBody, clock: clock}, nil
}

// defaultTransport keeps enough idle connections for a concurrent sweep
// (the standard transport keeps 2 per host and would reconnect per poll).
func defaultTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 256
	t.MaxIdleConnsPerHost = 128
	return t
}

// Timeout is the longest one ReadLifecycle attempt can take. The monitor
// refuses leases that do not outlast it (lifecycle_monitor.lease_too_short).
func (c *Client) Timeout() time.Duration { return c.endpoint.Timeout() }

// LifecyclePath is the request path of the lifecycle view of one change,
// relative to the base URL (also the path the CMS test server serves).
func LifecyclePath(siteID, eventID string) string {
	return "/v1/sites/" + url.PathEscape(siteID) + "/changes/" + url.PathEscape(eventID) + "/lifecycle"
}

// NewRequestID returns a fresh request id: "req-" + 32 hex digits of
// crypto-random bytes, a token by construction.
func NewRequestID() (string, error) { return signedhttp.NewRequestID() }

// ReadLifecycle performs one signed attempt to read target's lifecycle view
// and returns it validated against target. Each call is one attempt with its
// own request id; retrying is the monitor's decision.
func (c *Client) ReadLifecycle(ctx context.Context, target lifecycle.Target) (lifecycle.Response, error) {
	if !core.ValidToken(target.SiteID) || !core.ValidToken(target.EventID) {
		return lifecycle.Response{}, core.Fail(CodeTargetInvalid)
	}
	// The body of an error answer is never read into errors or logs.
	resp, err := c.endpoint.Do(ctx, signedhttp.Request{
		Kind:   remotecall.KindCMSLifecycle,
		Method: http.MethodGet, Path: LifecyclePath(target.SiteID, target.EventID), Accept: "application/json",
		Read: func(status int) bool { return status == http.StatusOK }, MaxBody: c.maxBody,
	})
	if err != nil {
		return lifecycle.Response{}, err
	}
	if resp.Status != http.StatusOK {
		err := statusError(resp.Status)
		if resp.Status == http.StatusTooManyRequests || resp.Status == http.StatusServiceUnavailable {
			// Never retried earlier than the CMS asks (the monitor waits
			// for the longer of this and its backoff).
			return lifecycle.Response{}, core.WithRetryAfter(err, signedhttp.RetryAfter(resp.Header, c.clock.Now()))
		}
		return lifecycle.Response{}, err
	}
	if int64(len(resp.Body)) > c.maxBody {
		return lifecycle.Response{}, core.Wrap(lifecycle.CodeResponseInvalid, false, errors.New("lifecycle body too large"))
	}
	if !c.endpoint.VerifyResponse(resp) {
		return lifecycle.Response{}, core.Wrap(lifecycle.CodeResponseInvalid, false, errors.New("lifecycle response signature invalid"))
	}
	parsed, err := lifecycle.Parse(target, resp.RequestID, resp.Body)
	if err != nil {
		return lifecycle.Response{}, fmt.Errorf("lifecycle %s: %w", target.EventID, err)
	}
	return parsed, nil
}

// statusError maps a non-200 status: 429 and 5xx are retryable, the rest
// (other 4xx, 3xx, unexpected 1xx/2xx) are not.
func statusError(status int) error {
	retryable := status == http.StatusTooManyRequests || (status >= 500 && status <= 599)
	return core.Wrap(signedhttp.StatusCode("cms", status), retryable, fmt.Errorf("cms answered http %d", status))
}
