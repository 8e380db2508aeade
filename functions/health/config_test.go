package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

func baseEnv() map[string]string {
	return map[string]string{
		envMonitorTable: "lf-monitor",
		envReleaseTable: "lf-release",
		envEventBus:     "lf-bus",
	}
}

func TestLoadConfig(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(map[string]string)
		error string
	}{
		{"complete", func(map[string]string) {}, ""},
		{"log level", func(e map[string]string) { e[envLogLevel] = "debug" }, ""},
		{"missing monitor table", func(e map[string]string) { delete(e, envMonitorTable) }, envMonitorTable + " is required"},
		{"missing release table", func(e map[string]string) { e[envReleaseTable] = "  " }, envReleaseTable + " is required"},
		{"missing bus", func(e map[string]string) { delete(e, envEventBus) }, envEventBus + " is required"},
		{"same table twice", func(e map[string]string) { e[envReleaseTable] = "lf-monitor" }, "different tables"},
		{"bad log level", func(e map[string]string) { e[envLogLevel] = "loud" }, envLogLevel},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := baseEnv()
			tc.edit(env)
			c, err := loadConfig(func(k string) string { return env[k] })
			if tc.error == "" {
				if err != nil || c.MonitorTable != "lf-monitor" || c.ReleaseTable != "lf-release" || c.EventBus != "lf-bus" {
					t.Fatalf("config = %+v, %v", c, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.error) {
				t.Fatalf("error = %v, want %q", err, tc.error)
			}
		})
	}
}

// TestBuildWiresHandler builds the handler the way a cold start does (no
// AWS call is made while wiring).
func TestBuildWiresHandler(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	env := baseEnv()
	env[envLogLevel] = "WARN"
	var out bytes.Buffer
	h, err := build(context.Background(), func(k string) string { return env[k] }, &out, slog.New(slog.DiscardHandler))
	if err != nil || h == nil {
		t.Fatalf("build: %v", err)
	}
	delete(env, envEventBus)
	if _, err := build(context.Background(), func(k string) string { return env[k] }, &out, nil); err == nil {
		t.Fatal("build without a bus succeeded")
	}
}
