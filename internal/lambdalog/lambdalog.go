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
	return slog.New(requestIDHandler{slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})})
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
