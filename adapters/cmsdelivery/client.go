package cmsdelivery

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
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/signing"
)

// Defaults and limits.
const (
	DefaultTimeout = 30 * time.Second
	MinKeyBytes    = 16
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
	BaseURL    string
	Key        []byte // HMAC key shared with the CMS
	Timeout    time.Duration
	Clock      core.Clock
	HTTPClient *http.Client
}

// Client sends deliveries. Safe for concurrent use.
type Client struct {
	base    *url.URL
	key     []byte
	timeout time.Duration
	clock   core.Clock
	http    *http.Client
}

var _ release.DeliveryClient = (*Client)(nil)

// New validates cfg and returns a Client.
func New(cfg Config) (*Client, error) {
	base, err := url.Parse(cfg.BaseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" ||
		base.User != nil || base.RawQuery != "" || base.Fragment != "" {
		return nil, core.Wrap(CodeConfigInvalid, false, errors.New("cms base url must be http(s)://host[/prefix]"))
	}
	base.Path = strings.TrimRight(base.Path, "/")
	if len(cfg.Key) < MinKeyBytes {
		return nil, core.Wrap(CodeConfigInvalid, false, fmt.Errorf("cms key must have at least %d bytes", MinKeyBytes))
	}
	c := &Client{base: base, key: append([]byte(nil), cfg.Key...), timeout: cfg.Timeout, clock: cfg.Clock}
	if c.timeout == 0 {
		c.timeout = DefaultTimeout
	}
	if c.timeout < 0 || c.timeout > release.MaxLease {
		return nil, core.Wrap(CodeConfigInvalid, false, errors.New("cms timeout out of range"))
	}
	if c.clock == nil {
		c.clock = core.SystemClock{}
	}
	c.http = &http.Client{}
	if cfg.HTTPClient != nil {
		copied := *cfg.HTTPClient
		c.http = &copied
	}
	c.http.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c, nil
}

// Timeout is the longest one Deliver can take.
func (c *Client) Timeout() time.Duration { return c.timeout }

// DeliveriesPath is the request path for one change, relative to the base.
func DeliveriesPath(siteID, eventID string) string {
	return "/v1/sites/" + url.PathEscape(siteID) + "/changes/" + url.PathEscape(eventID) + "/deliveries"
}

// Deliver implements release.DeliveryClient: one signed attempt.
func (c *Client) Deliver(ctx context.Context, siteID, eventID string, body []byte) error {
	if !core.ValidToken(siteID) || !core.ValidToken(eventID) || len(body) == 0 {
		return core.Fail(CodeTargetInvalid)
	}
	var rb [16]byte
	if _, err := rand.Read(rb[:]); err != nil {
		return core.Wrap(CodeUnavailable, true, err)
	}
	requestID := "req-" + hex.EncodeToString(rb[:])
	path := c.base.Path + DeliveriesPath(siteID, eventID)
	ts := strconv.FormatInt(c.clock.Now().Unix(), 10)
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base.Scheme+"://"+c.base.Host+path, bytes.NewReader(body))
	if err != nil {
		return core.Wrap(CodeTargetInvalid, false, errors.New("build delivery request"))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(signing.HeaderRequestID, requestID)
	req.Header.Set(signing.HeaderTimestamp, ts)
	req.Header.Set(signing.HeaderSignature, signing.SignRequest(c.key, http.MethodPost, path, requestID, ts, body))
	resp, err := c.http.Do(req)
	if err != nil {
		return transportError(ctx, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	code := fmt.Sprintf("cms.http_%d", resp.StatusCode)
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
		return core.Retry(code)
	}
	return core.Fail(code)
}

func transportError(ctx context.Context, err error) error {
	var ne net.Error
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return core.Wrap(CodeTimeout, true, err)
	case errors.Is(ctx.Err(), context.Canceled):
		return core.Wrap(CodeCancelled, true, err)
	}
	return core.Wrap(CodeUnavailable, true, err)
}
