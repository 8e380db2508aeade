package evidence

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
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

// Path of the evidence endpoint, relative to the base URL.
const Path = "/v1/evidence"

// Defaults and limits.
const (
	DefaultTimeout      = 30 * time.Second
	DefaultMaxBodyBytes = 256 << 10
	MinKeyBytes         = 16
)

// Codes of the client.
const (
	CodeConfigInvalid = "evidence.config_invalid"
	CodeTimeout       = "evidence.timeout"
	CodeUnavailable   = "evidence.unavailable"
	CodeCancelled     = "evidence.cancelled"
	CodeTooLarge      = "evidence.response.too_large"
)

// Config configures a Client.
type Config struct {
	BaseURL      string
	Key          []byte // HMAC key shared with the provider
	Timeout      time.Duration
	MaxBodyBytes int64
	Clock        core.Clock
	HTTPClient   *http.Client
}

// Client calls the evidence provider. Safe for concurrent use.
type Client struct {
	base    *url.URL
	key     []byte
	timeout time.Duration
	maxBody int64
	clock   core.Clock
	http    *http.Client
}

var _ release.EvidenceProvider = (*Client)(nil)

// New validates cfg and returns a Client.
func New(cfg Config) (*Client, error) {
	base, err := url.Parse(cfg.BaseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" ||
		base.User != nil || base.RawQuery != "" || base.Fragment != "" {
		return nil, core.Wrap(CodeConfigInvalid, false, errors.New("evidence base url must be http(s)://host[/prefix]"))
	}
	base.Path = strings.TrimRight(base.Path, "/")
	if len(cfg.Key) < MinKeyBytes {
		return nil, core.Wrap(CodeConfigInvalid, false, fmt.Errorf("evidence key must have at least %d bytes", MinKeyBytes))
	}
	c := &Client{base: base, key: append([]byte(nil), cfg.Key...), timeout: cfg.Timeout, maxBody: cfg.MaxBodyBytes, clock: cfg.Clock}
	if c.timeout == 0 {
		c.timeout = DefaultTimeout
	}
	if c.timeout < 0 || c.timeout > release.MaxLease {
		return nil, core.Wrap(CodeConfigInvalid, false, errors.New("evidence timeout out of range"))
	}
	if c.maxBody == 0 {
		c.maxBody = DefaultMaxBodyBytes
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

// Timeout is the longest one Obtain can take; the evidence lease must
// outlast it.
func (c *Client) Timeout() time.Duration { return c.timeout }

func newRequestID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "req-" + hex.EncodeToString(b[:]), nil
}

// Obtain implements release.EvidenceProvider: one signed attempt.
func (c *Client) Obtain(ctx context.Context, req *release.EvidenceRequest) ([]byte, error) {
	body, err := req.Canonical()
	if err != nil {
		return nil, err
	}
	requestID, err := newRequestID()
	if err != nil {
		return nil, core.Wrap(CodeUnavailable, true, err)
	}
	path := c.base.Path + Path
	ts := strconv.FormatInt(c.clock.Now().Unix(), 10)
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base.Scheme+"://"+c.base.Host+path, bytes.NewReader(body))
	if err != nil {
		return nil, core.Wrap(CodeConfigInvalid, false, errors.New("build evidence request"))
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	hreq.Header.Set(signing.HeaderRequestID, requestID)
	hreq.Header.Set(signing.HeaderTimestamp, ts)
	hreq.Header.Set(signing.HeaderSignature, signing.SignRequest(c.key, http.MethodPost, path, requestID, ts, body))
	resp, err := c.http.Do(hreq)
	if err != nil {
		return nil, transportError(ctx, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, c.maxBody+1))
	if err != nil {
		return nil, transportError(ctx, err)
	}
	if resp.StatusCode == http.StatusOK {
		if int64(len(raw)) > c.maxBody {
			return nil, core.Fail(CodeTooLarge)
		}
		return raw, nil
	}
	return nil, statusError(resp.StatusCode, raw)
}

// statusError maps a non-200 answer to a stable code.
func statusError(status int, body []byte) error {
	httpCode := fmt.Sprintf("evidence.http_%d", status)
	if status == http.StatusTooManyRequests || status >= 500 {
		return core.Retry(httpCode)
	}
	var e struct {
		Code      *string `json:"code"`
		Retryable *bool   `json:"retryable"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if status >= 400 && status < 500 && dec.Decode(&e) == nil && e.Code != nil && e.Retryable != nil {
		code := *e.Code
		if !strings.HasPrefix(code, "evidence.") {
			code = "evidence." + code
		}
		if core.ValidErrorCode(code) {
			return &core.Error{Code: code, Retryable: *e.Retryable}
		}
	}
	return core.Fail(httpCode)
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
