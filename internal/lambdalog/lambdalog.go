package lambdalog

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/internal/xray"
)

// New returns a JSON logger writing to w at level that adds the Lambda
// request id ("request_id") and the X-Ray trace id ("xray_trace_id", the
// Root of the invocation's trace header) of the invocation context, and
// the EventBridge event id ("bus_event_id") of a context from WithEventID,
// to every record.
func New(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(requestIDHandler{slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: levelNames})})
}

// Lambda's levels beyond slog's four (AWS_LAMBDA_LOG_LEVEL).
const (
	LevelTrace = slog.LevelDebug - 4
	LevelFatal = slog.LevelError + 4
)

// LevelName is the name Lambda's log-level filter reads for level:
// TRACE, DEBUG, INFO, WARN, ERROR or FATAL.
func LevelName(level slog.Level) string {
	switch {
	case level <= LevelTrace:
		return "TRACE"
	case level >= LevelFatal:
		return "FATAL"
	case level >= slog.LevelError:
		return "ERROR"
	case level >= slog.LevelWarn:
		return "WARN"
	case level >= slog.LevelInfo:
		return "INFO"
	}
	return "DEBUG"
}

// levelNames writes every record's level as Lambda names it (slog would
// write "DEBUG-4" and "ERROR+4", which Lambda reads as INFO).
func levelNames(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.LevelKey {
		if l, ok := a.Value.Any().(slog.Level); ok {
			return slog.String(slog.LevelKey, LevelName(l))
		}
	}
	return a
}

// ParseLevel reads a log level setting: DEBUG, INFO, WARN or ERROR in any
// case. name is the setting's name, used in the error.
func ParseLevel(name, s string) (slog.Level, error) {
	var level slog.Level
	switch v := strings.ToUpper(s); v {
	case "DEBUG", "INFO", "WARN", "ERROR":
		if err := level.UnmarshalText([]byte(v)); err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		return level, nil
	default:
		return 0, fmt.Errorf("%s (%q) must be DEBUG, INFO, WARN or ERROR", name, s)
	}
}

// ParseLambdaLevel reads AWS_LAMBDA_LOG_LEVEL: Lambda's six levels, in
// any case.
func ParseLambdaLevel(name, s string) (slog.Level, error) {
	switch strings.ToUpper(s) {
	case "TRACE":
		return LevelTrace, nil
	case "FATAL":
		return LevelFatal, nil
	case "DEBUG", "INFO", "WARN", "ERROR":
		return ParseLevel(name, s)
	}
	return 0, fmt.Errorf("%s (%q) must be TRACE, DEBUG, INFO, WARN, ERROR or FATAL", name, s)
}

type requestIDHandler struct{ slog.Handler }

func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		r.AddAttrs(slog.String("request_id", lc.AwsRequestID))
	}
	if id := xray.TraceID(ctx); id != "" {
		r.AddAttrs(slog.String("xray_trace_id", id))
	}
	if id := EventID(ctx); id != "" {
		r.AddAttrs(slog.String("bus_event_id", id))
	}
	return h.Handler.Handle(ctx, r)
}

type eventIDKey struct{}

// WithEventID returns ctx carrying the id of the EventBridge event being
// handled (a scheduled event, or the event in an SQS message): the records
// logged with it carry "bus_event_id". An id that is not a token (1..256
// characters of [A-Za-z0-9_.:-]) is left out: it comes from the message.
func WithEventID(ctx context.Context, id string) context.Context {
	if !core.ValidToken(id) {
		return ctx
	}
	return context.WithValue(ctx, eventIDKey{}, id)
}

// EventID is the EventBridge event id of ctx ("" without one).
func EventID(ctx context.Context) string {
	id, _ := ctx.Value(eventIDKey{}).(string)
	return id
}

func (h requestIDHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(attrs)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}
