package cmsdelivery

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/localeflow/localeflow/adapters/signedhttp"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/internal/remotecall"
)

// Defaults and limits.
const (
	DefaultTimeout = 30 * time.Second
	MinKeyBytes    = signedhttp.MinKeyBytes
)

// Codes of the client.
const (
	CodeConfigInvalid = "cms.config_invalid"
	CodeTargetInvalid = "cms.target_invalid"
	CodeTimeout       = "cms.timeout"
	CodeUnavailable   = "cms.unavailable"
	CodeCancelled     = "cms.cancelled"
)

// Config configures a Client.
type Config struct {
	BaseURL string
	Key     []byte // HMAC key shared with the CMS
	// PreviousKeys also verify the CMS's responses during a key rotation.
	PreviousKeys [][]byte
	// KeySet, when set, replaces Key and PreviousKeys (re-read on a TTL).
	KeySet     signedhttp.KeySet
	Timeout    time.Duration
	Clock      core.Clock
	HTTPClient *http.Client
}

// Client sends deliveries. Safe for concurrent use.
type Client struct {
	endpoint *signedhttp.Endpoint
	clock    core.Clock // reads HTTP-date Retry-After values
}

var _ release.DeliveryClient = (*Client)(nil)

var codes = signedhttp.Codes{
	Name: "cms delivery", ConfigInvalid: CodeConfigInvalid, RequestInvalid: CodeTargetInvalid,
	Timeout: CodeTimeout, Cancelled: CodeCancelled, Unavailable: CodeUnavailable,
}

// New validates cfg and returns a Client.
func New(cfg Config) (*Client, error) {
	endpoint, err := signedhttp.New(codes, signedhttp.Config{BaseURL: cfg.BaseURL, Key: cfg.Key, PreviousKeys: cfg.PreviousKeys, KeySet: cfg.KeySet, Timeout: cfg.Timeout,
		DefaultTimeout: DefaultTimeout, MaxTimeout: release.MaxLease, Clock: cfg.Clock, HTTPClient: cfg.HTTPClient})
	if err != nil {
		return nil, err
	}
	clock := cfg.Clock
	if clock == nil {
		clock = core.SystemClock{}
	}
	return &Client{endpoint: endpoint, clock: clock}, nil
}

// Timeout is the longest one Deliver can take.
func (c *Client) Timeout() time.Duration { return c.endpoint.Timeout() }

// DeliveriesPath is the request path for one change, relative to the base.
func DeliveriesPath(siteID, eventID string) string {
	return "/v1/sites/" + url.PathEscape(siteID) + "/changes/" + url.PathEscape(eventID) + "/deliveries"
}

// Deliver implements release.DeliveryClient: one signed attempt.
func (c *Client) Deliver(ctx context.Context, siteID, eventID string, body []byte) error {
	if !core.ValidToken(siteID) || !core.ValidToken(eventID) || len(body) == 0 {
		return core.Fail(CodeTargetInvalid)
	}
	resp, err := c.endpoint.Do(ctx, signedhttp.Request{
		Kind:   remotecall.KindCMSDelivery,
		Method: http.MethodPost, Path: DeliveriesPath(siteID, eventID), Body: body, ContentType: "application/json",
	})
	if err != nil {
		return err
	}
	if resp.Status >= 200 && resp.Status < 300 {
		return nil
	}
	code := signedhttp.StatusCode("cms", resp.Status)
	switch {
	case resp.Status == http.StatusTooManyRequests || resp.Status == http.StatusServiceUnavailable:
		// Never retried earlier than the CMS asks (the coordinator waits
		// for the longer of this and its backoff).
		return core.WithRetryAfter(core.Retry(code), signedhttp.RetryAfter(resp.Header, c.clock.Now()))
	case resp.Status >= 500:
		return core.Retry(code)
	}
	return core.Fail(code)
}
