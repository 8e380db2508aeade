package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/aws/aws-lambda-go/events"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/health"
	"github.com/localeflow/localeflow/internal/lambdalog"
)

// CodeEventInvalid is returned for an invocation that is neither a Function
// URL request nor the schedule.
const CodeEventInvalid = "health.event_invalid"

// CodeRenderFailed is logged and returned when the health page cannot be
// rendered.
const CodeRenderFailed = "health.render_failed"

// Checker runs one health check (*health.Checker).
type Checker interface {
	Check(ctx context.Context) (health.Report, error)
}

// Publisher puts one event on the bus (*eventbus.Publisher).
type Publisher interface {
	Publish(ctx context.Context, detailType string, detail any) error
}

var _ Checker = (*health.Checker)(nil)

// Config wires a Handler.
type Config struct {
	Checker Checker
	Bus     Publisher
	// Metrics receives the EMF lines (os.Stdout in Lambda).
	Metrics io.Writer
	Clock   core.Clock
	Log     *slog.Logger
	// Deployment is the metrics' Deployment dimension (the resource
	// prefix); empty means DefaultDeployment.
	Deployment string
}

// Handler serves the Function URL and the schedule.
type Handler struct {
	checker Checker
	bus     Publisher
	metrics io.Writer
	mu      sync.Mutex // serializes metric lines
	clock   core.Clock
	log     *slog.Logger
	// deployment is the metrics' Deployment dimension.
	deployment string
}

// New returns a Handler; every Config field but Log is required.
func New(c Config) (*Handler, error) {
	if c.Checker == nil || c.Bus == nil || c.Metrics == nil || c.Clock == nil {
		return nil, errors.New("health handler: Checker, Bus, Metrics and Clock are required")
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return &Handler{checker: c.Checker, bus: c.Bus, metrics: c.Metrics, clock: c.Clock, log: c.Log, deployment: c.Deployment}, nil
}

// Handle is the Lambda entry point: it tells a Function URL request
// (requestContext.http) from a scheduled event.
func (h *Handler) Handle(ctx context.Context, payload json.RawMessage) (any, error) {
	var shape struct {
		RequestContext struct {
			HTTP *struct {
				Method string `json:"method"`
			} `json:"http"`
		} `json:"requestContext"`
		events.EventBridgeEvent
	}
	if err := json.Unmarshal(payload, &shape); err != nil {
		h.log.ErrorContext(ctx, "health invocation invalid", "code", CodeEventInvalid)
		return nil, core.Wrap(CodeEventInvalid, false, errors.New("payload is not a JSON object"))
	}
	switch {
	case shape.RequestContext.HTTP != nil:
		var req events.LambdaFunctionURLRequest
		if err := json.Unmarshal(payload, &req); err != nil {
			h.log.ErrorContext(ctx, "health invocation invalid", "code", CodeEventInvalid)
			return nil, core.Wrap(CodeEventInvalid, false, fmt.Errorf("function URL request: %w", err))
		}
		return h.ServeURL(ctx, req), nil
	case shape.DetailType == contract.ScheduledEventDetailType && shape.Source == contract.ScheduledEventSource:
		return h.Scheduled(lambdalog.WithEventID(ctx, shape.ID))
	}
	h.log.ErrorContext(ctx, "health invocation invalid", "code", CodeEventInvalid)
	return nil, core.Fail(CodeEventInvalid)
}

// ServeURL answers a Function URL request.
func (h *Handler) ServeURL(ctx context.Context, req events.LambdaFunctionURLRequest) events.LambdaFunctionURLResponse {
	method := strings.ToUpper(req.RequestContext.HTTP.Method)
	if method != http.MethodGet && method != http.MethodHead {
		resp := errorResponse(http.StatusMethodNotAllowed, "health.method_not_allowed", false)
		resp.Headers["Allow"] = "GET, HEAD"
		return resp
	}
	html := wantsHTML(req.Headers)
	report, err := h.checker.Check(ctx)
	var resp events.LambdaFunctionURLResponse
	switch {
	case err != nil:
		h.log.ErrorContext(ctx, "health check failed", "code", core.CodeOf(err), "error", err.Error())
		resp = errorResponse(http.StatusServiceUnavailable, health.CodeUnavailable, true)
		if html {
			resp = h.htmlError(ctx)
		}
	case html:
		resp = h.htmlResponse(ctx, report)
	default:
		resp = jsonResponse(report)
	}
	if method == http.MethodHead {
		resp.Body = ""
	}
	return resp
}

func statusCode(r health.Report) int {
	if r.Status == health.StatusOK {
		return http.StatusOK
	}
	return http.StatusServiceUnavailable
}

func baseHeaders(contentType string) map[string]string {
	return map[string]string{
		"Content-Type":           contentType,
		"Cache-Control":          "no-store",
		"X-Content-Type-Options": "nosniff",
		"Vary":                   "Accept",
	}
}

func jsonResponse(r health.Report) events.LambdaFunctionURLResponse {
	body, err := json.Marshal(r)
	if err != nil {
		// The document is maps of ints and strings: cannot fail.
		return errorResponse(http.StatusInternalServerError, "health.encode_failed", false)
	}
	return events.LambdaFunctionURLResponse{StatusCode: statusCode(r), Headers: baseHeaders("application/json"), Body: string(body)}
}

func errorResponse(status int, code string, retryable bool) events.LambdaFunctionURLResponse {
	body, _ := json.Marshal(struct {
		Code      string `json:"code"`
		Retryable bool   `json:"retryable"`
	}{code, retryable})
	return events.LambdaFunctionURLResponse{StatusCode: status, Headers: baseHeaders("application/json"), Body: string(body)}
}

// wantsHTML: a browser's Accept lists text/html (Function URL headers are
// lower-case).
func wantsHTML(headers map[string]string) bool {
	for k, v := range headers {
		if strings.EqualFold(k, "accept") {
			for _, part := range strings.Split(v, ",") {
				media, _, _ := strings.Cut(strings.TrimSpace(part), ";")
				if strings.EqualFold(strings.TrimSpace(media), "text/html") {
					return true
				}
			}
		}
	}
	return false
}

// BlockedDetail is the content-free detail of localeflow.health.blocked.
type BlockedDetail = contract.HealthBlocked

// ScheduledResult is what a scheduled invocation returns.
type ScheduledResult struct {
	Status  string   `json:"status"`
	Reasons []string `json:"reasons"`
}

// Scheduled runs the check of the schedule: metrics, and the blocked event.
func (h *Handler) Scheduled(ctx context.Context) (ScheduledResult, error) {
	report, err := h.checker.Check(ctx)
	if err != nil {
		now := core.Millis(h.clock.Now())
		h.log.ErrorContext(ctx, "health check failed", "code", core.CodeOf(err), "error", err.Error())
		h.writeMetrics(ctx, failedMetrics(h.deployment, now))
		detail := BlockedDetail{Schema: health.Schema, CheckedAtMS: now, Reasons: []string{health.CodeUnavailable}}
		if perr := h.bus.Publish(ctx, contract.DetailHealthBlocked, detail); perr != nil {
			h.log.ErrorContext(ctx, "health blocked event not published", "code", core.CodeOf(perr))
		}
		return ScheduledResult{}, fmt.Errorf("scheduled health check: %w", err)
	}
	h.writeMetrics(ctx, reportMetrics(h.deployment, report))
	if report.Status == health.StatusBlocked {
		detail := BlockedDetail{Schema: health.Schema, CheckedAtMS: report.CheckedAtMS, Reasons: report.Reasons,
			Monitor: &report.Monitor, Release: &report.Release}
		if err := h.bus.Publish(ctx, contract.DetailHealthBlocked, detail); err != nil {
			h.log.ErrorContext(ctx, "health blocked event not published", "code", core.CodeOf(err))
			return ScheduledResult{}, fmt.Errorf("publish %s: %w", contract.DetailHealthBlocked, err)
		}
		h.log.WarnContext(ctx, "health blocked event published", "reasons", report.Reasons)
	}
	return ScheduledResult{Status: report.Status, Reasons: report.Reasons}, nil
}

func (h *Handler) writeMetrics(ctx context.Context, line []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, err := h.metrics.Write(append(line, '\n')); err != nil {
		h.log.ErrorContext(ctx, "health metrics not written", "code", "health.metrics_failed")
	}
}
