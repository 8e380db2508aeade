package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/adapters/delayqueue"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/monitor"
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

// TestJitteredRetryWithinTheHorizon (issue 39 finding 3): with
// LOCALEFLOW_RETRY_MAX_DELAY above 4 h a jittered retry (up to 1.5 × the
// maximum) landed past the handler's horizon (the longest wait + 2 h) and
// the poller quarantined its own retry as delayqueue.envelope_too_far.
// Every retry the monitor schedules is inside the horizon, up to the
// largest maximum delay the configuration accepts.
func TestJitteredRetryWithinTheHorizon(t *testing.T) {
	now := time.UnixMilli(1_764_460_800_000)
	for _, maxDelay := range []time.Duration{5 * time.Minute, 4 * time.Hour, 5 * time.Hour, 12 * time.Hour, monitor.MaxDelay} {
		cfg := monitor.Config{MaxDelay: maxDelay}.WithDefaults()
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		wait := longestWait(cfg)
		for i := range 200 {
			id := fmt.Sprintf("evt-%d", i)
			for failures := 1; failures <= monitor.MaxFailures; failures++ {
				env, err := delayqueue.NewEnvelope(contract.KindPoll, id, "", now.Add(cfg.RetryDelayFor(id, failures)))
				if err != nil {
					t.Fatal(err)
				}
				if err := delayqueue.CheckHorizon(env, now, wait); err != nil {
					t.Fatalf("max delay %s: %s's retry after %d failures (%s) refused: %v", maxDelay, id, failures, cfg.RetryDelayFor(id, failures), err)
				}
			}
		}
	}
}
