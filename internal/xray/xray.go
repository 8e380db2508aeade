// Package xray reads the AWS X-Ray trace context of a Lambda invocation:
// the trace header the runtime hands each invocation (aws-lambda-go puts
// it in the context under "x-amzn-trace-id" and in _X_AMZN_TRACE_ID), its
// root trace id for the logs (xray_trace_id, the Powertools convention),
// and the header to propagate on outgoing requests.
package xray

import (
	"context"
	"regexp"
	"strings"
)

// Header is the HTTP header that carries the trace context.
const Header = "X-Amzn-Trace-Id"

// contextKey is the key aws-lambda-go stores the invocation's trace
// header under (a plain string: its own choice, read here as is).
const contextKey = "x-amzn-trace-id"

// rootPattern is an X-Ray trace id: version 1, 8 hex digits of epoch
// seconds, 24 hex digits.
var rootPattern = regexp.MustCompile(`^1-[0-9a-f]{8}-[0-9a-f]{24}$`)

// headerPattern bounds what is propagated: key=value pairs of a small
// charset, at most 256 characters (the header comes from the runtime,
// but nothing unchecked goes on the wire).
var headerPattern = regexp.MustCompile(`^[A-Za-z0-9=;:._-]{1,256}$`)

// HeaderOf is the invocation's trace header in ctx, "" without one or when
// it is not a well-formed header with a valid Root.
func HeaderOf(ctx context.Context) string {
	h, _ := ctx.Value(contextKey).(string) //nolint:staticcheck // the runtime's own key
	if !headerPattern.MatchString(h) || RootOf(h) == "" {
		return ""
	}
	return h
}

// TraceID is the root trace id of the invocation in ctx ("" without one).
func TraceID(ctx context.Context) string {
	return RootOf(HeaderOf(ctx))
}

// RootOf is the Root of a trace header ("" when it has no valid one).
func RootOf(header string) string {
	for _, part := range strings.Split(header, ";") {
		if v, ok := strings.CutPrefix(part, "Root="); ok && rootPattern.MatchString(v) {
			return v
		}
	}
	return ""
}
