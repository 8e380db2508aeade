package lambdalog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/localeflow/localeflow/internal/lambdalog"
)

func TestNewAddsRequestID(t *testing.T) {
	tests := []struct {
		name string
		ctx  context.Context
		want string // request_id in the record; "" = absent
	}{
		{"invocation", lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"}), "req-1"},
		{"no invocation", context.Background(), ""},
		{"empty id", lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{}), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			log := lambdalog.New(&out, slog.LevelInfo).With("code", "x.y").WithGroup("g")
			log.InfoContext(tt.ctx, "hello", "n", 1)
			var rec map[string]any
			if err := json.Unmarshal(out.Bytes(), &rec); err != nil {
				t.Fatalf("%s: %v", out.String(), err)
			}
			if rec["msg"] != "hello" || rec["code"] != "x.y" {
				t.Fatalf("record %v", rec)
			}
			g, _ := rec["g"].(map[string]any)
			if g["n"] != float64(1) {
				t.Fatalf("group %v", rec)
			}
			got, _ := g["request_id"].(string)
			if got != tt.want {
				t.Fatalf("request_id %q, want %q in %s", got, tt.want, out.String())
			}
		})
	}
}

func TestNewHonoursLevel(t *testing.T) {
	var out bytes.Buffer
	log := lambdalog.New(&out, slog.LevelWarn)
	log.Info("dropped")
	log.Warn("kept")
	if strings.Contains(out.String(), "dropped") || !strings.Contains(out.String(), "kept") {
		t.Fatalf("output %s", out.String())
	}
}

func TestParseLevel(t *testing.T) {
	tests := []struct {
		in   string
		want slog.Level
		ok   bool
	}{
		{"debug", slog.LevelDebug, true},
		{"INFO", slog.LevelInfo, true},
		{"Warn", slog.LevelWarn, true},
		{"ERROR", slog.LevelError, true},
		{"", 0, false},
		{"loud", 0, false},
		{"INFO+2", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := lambdalog.ParseLevel("LOCALEFLOW_LOG_LEVEL", tt.in)
			if (err == nil) != tt.ok || got != tt.want {
				t.Fatalf("ParseLevel(%q) = %v, %v", tt.in, got, err)
			}
			if err != nil && !strings.Contains(err.Error(), "LOCALEFLOW_LOG_LEVEL") {
				t.Fatalf("error %v does not name the setting", err)
			}
		})
	}
}

// TestNewAddsXRayTraceID: log lines carried no trace id, so a line could
// not be joined to its X-Ray trace. Every record logged with an
// invocation's context now carries xray_trace_id (the header's Root).
func TestNewAddsXRayTraceID(t *testing.T) {
	const header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
	ctx = context.WithValue(ctx, "x-amzn-trace-id", header) //nolint:staticcheck // the runtime's own key
	var out bytes.Buffer
	lambdalog.New(&out, slog.LevelInfo).InfoContext(ctx, "hello")
	lambdalog.New(&out, slog.LevelInfo).InfoContext(context.Background(), "cold start")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var rec, cold map[string]any
	if len(lines) != 2 || json.Unmarshal([]byte(lines[0]), &rec) != nil || json.Unmarshal([]byte(lines[1]), &cold) != nil {
		t.Fatalf("lines %q", lines)
	}
	if rec["xray_trace_id"] != "1-5759e988-bd862e3fe1be46a994272793" || rec["request_id"] != "req-1" {
		t.Errorf("record %v", rec)
	}
	if _, ok := cold["xray_trace_id"]; ok {
		t.Errorf("trace id outside an invocation: %v", cold)
	}
}
