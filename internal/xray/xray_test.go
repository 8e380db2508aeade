package xray_test

import (
	"context"
	"strings"
	"testing"

	"github.com/localeflow/localeflow/internal/xray"
)

func withHeader(h string) context.Context {
	return context.WithValue(context.Background(), "x-amzn-trace-id", h) //nolint:staticcheck // the runtime's own key
}

func TestTraceContext(t *testing.T) {
	const h = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	if got := xray.HeaderOf(withHeader(h)); got != h {
		t.Errorf("header = %q", got)
	}
	if got := xray.TraceID(withHeader(h)); got != "1-5759e988-bd862e3fe1be46a994272793" {
		t.Errorf("trace id = %q", got)
	}
	for _, bad := range []string{"", "Root=2-5759e988-bd862e3fe1be46a994272793", "Parent=53995c3f42cd8ad8;Sampled=1",
		"Root=1-5759e988-bd862e3fe1be46a994272793\r\nX-Evil: 1", "Root=1-5759e988-bd862e3fe1be46a994272793;" + strings.Repeat("a", 300)} {
		if xray.HeaderOf(withHeader(bad)) != "" || xray.TraceID(withHeader(bad)) != "" {
			t.Errorf("%q accepted", bad)
		}
	}
	if xray.TraceID(context.Background()) != "" {
		t.Error("trace id without an invocation")
	}
}
