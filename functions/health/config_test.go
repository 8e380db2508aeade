package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/core/health"
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
		{"age limits", func(e map[string]string) {
			e["LOCALEFLOW_HEALTH_MAX_CHANGE_AGE"], e["LOCALEFLOW_HEALTH_MAX_RELEASE_AGE"], e["LOCALEFLOW_HEALTH_EXPIRY_WARNING"] = "72h", "24h", "48h"
		}, ""},
		{"change age not a duration", func(e map[string]string) { e["LOCALEFLOW_HEALTH_MAX_CHANGE_AGE"] = "7d" }, "LOCALEFLOW_HEALTH_MAX_CHANGE_AGE"},
		{"release age zero", func(e map[string]string) { e["LOCALEFLOW_HEALTH_MAX_RELEASE_AGE"] = "0s" }, "health.limits_invalid"},
		{"expiry warning fractional", func(e map[string]string) { e["LOCALEFLOW_HEALTH_EXPIRY_WARNING"] = "1500ms" }, "health.limits_invalid"},
		{"change age above a year", func(e map[string]string) { e["LOCALEFLOW_HEALTH_MAX_CHANGE_AGE"] = "8761h" }, "health.limits_invalid"},
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
				if tc.name == "complete" && c.Limits != health.DefaultLimits() {
					t.Fatalf("limits = %+v, want the defaults", c.Limits)
				}
				if tc.name == "age limits" && (c.Limits != health.Limits{MaxChangeAge: 72 * time.Hour, MaxReleaseAge: 24 * time.Hour, ExpiryWarning: 48 * time.Hour}) {
					t.Fatalf("limits = %+v", c.Limits)
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
