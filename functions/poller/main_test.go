package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"
)

// TestBuildWiresHandler builds the handler from the environment the way a
// cold start does (no AWS call is made while wiring with a hex key).
func TestBuildWiresHandler(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	env := baseEnv()
	env[envLogLevel] = "debug"
	h, err := build(context.Background(), func(k string) string { return env[k] }, slog.New(slog.DiscardHandler))
	if err != nil || h == nil {
		t.Fatalf("build: %v", err)
	}
	env[envLease] = "5s"
	_, err = build(context.Background(), func(k string) string { return env[k] }, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "lease_too_short") {
		t.Fatalf("build with a lease shorter than the CMS timeout: %v", err)
	}
}
