package evidence

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/localeflow/localeflow/adapters/signedhttp"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/internal/remotecall"
)

// Path of the evidence endpoint, relative to the base URL.
const Path = "/v1/evidence"

// Defaults and limits.
const (
	DefaultTimeout      = 30 * time.Second
	DefaultMaxBodyBytes = 256 << 10
	MinKeyBytes         = signedhttp.MinKeyBytes
)

// Codes of the client.
const (
	CodeConfigInvalid = "evidence.config_invalid"
	CodeTimeout       = "evidence.timeout"
	CodeUnavailable   = release.CodeEvidenceUnavailable
	CodeCancelled     = "evidence.cancelled"
	CodeTooLarge      = "evidence.response.too_large"
)

// Config configures a Client.
type Config struct {
	BaseURL string
	Key     []byte // HMAC key shared with the provider
	// PreviousKeys complete the key set during a rotation. The evidence
	// contract signs requests only: the provider's answers carry no HMAC,
	// their trust comes from the Ed25519 receipts they hold.
	PreviousKeys [][]byte
	// KeySet, when set, replaces Key and PreviousKeys (re-read on a TTL).
	KeySet       signedhttp.KeySet
	Timeout      time.Duration
	MaxBodyBytes int64
	Clock        core.Clock
	HTTPClient   *http.Client
}

// Client calls the evidence provider. Safe for concurrent use.
type Client struct {
	endpoint *signedhttp.Endpoint
	maxBody  int64
	clock    core.Clock // reads HTTP-date Retry-After values
}

var _ release.EvidenceProvider = (*Client)(nil)

var codes = signedhttp.Codes{
	Name: "evidence", ConfigInvalid: CodeConfigInvalid, RequestInvalid: CodeConfigInvalid,
	Timeout: CodeTimeout, Cancelled: CodeCancelled, Unavailable: CodeUnavailable,
}

// New validates cfg and returns a Client.
func New(cfg Config) (*Client, error) {
	endpoint, err := signedhttp.New(codes, signedhttp.Config{
		BaseURL: cfg.BaseURL, Key: cfg.Key, PreviousKeys: cfg.PreviousKeys, KeySet: cfg.KeySet,
		Timeout: cfg.Timeout, DefaultTimeout: DefaultTimeout, MaxTimeout: release.MaxLease,
		Clock: cfg.Clock, HTTPClient: cfg.HTTPClient,
	})
	if err != nil {
		return nil, err
	}
	clock := cfg.Clock
	if clock == nil {
		clock = core.SystemClock{}
	}
	c := &Client{endpoint: endpoint, maxBody: cfg.MaxBodyBytes, clock: clock}
	if c.maxBody == 0 {
		c.maxBody = DefaultMaxBodyBytes
	}
	return c, nil
}

// Timeout is the longest one Obtain can take; the evidence lease must
// outlast it.
func (c *Client) Timeout() time.Duration { return c.endpoint.Timeout() }

// Obtain implements release.EvidenceProvider: one signed attempt.
func (c *Client) Obtain(ctx context.Context, req *contract.EvidenceRequest) ([]byte, error) {
	body, err := release.EvidenceBody(req)
	if err != nil {
		return nil, err
	}
	resp, err := c.endpoint.Do(ctx, signedhttp.Request{
		Kind:   remotecall.KindEvidence,
		Method: http.MethodPost, Path: Path, Body: body,
		ContentType: "application/json", Accept: "application/json",
		Read: func(int) bool { return true }, MaxBody: c.maxBody,
	})
	if err != nil {
		return nil, err
	}
	if resp.Status == http.StatusOK {
		if int64(len(resp.Body)) > c.maxBody {
			return nil, core.Fail(CodeTooLarge)
		}
		return resp.Body, nil
	}
	err = statusError(resp.Status, resp.Body)
	if resp.Status == http.StatusTooManyRequests || resp.Status == http.StatusServiceUnavailable {
		// Never retried earlier than the provider asks (the coordinator
		// waits for the longer of this and its backoff).
		err = core.WithRetryAfter(err, signedhttp.RetryAfter(resp.Header, c.clock.Now()))
	}
	return nil, err
}

// statusError maps a non-200 answer to a stable code.
func statusError(status int, body []byte) error {
	httpCode := signedhttp.StatusCode("evidence", status)
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
