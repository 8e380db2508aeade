package main

import (
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
)

// TestConfigErrorsNameVariableValueAndRule: a bad setting said only
// "monitor settings: lifecycle_monitor.delay_invalid" or "X: not a
// duration"; every invalid setting now names the variable, the value given
// and the rule (or expected format) it breaks — one case per kind of
// variable.
func TestConfigErrorsNameVariableValueAndRule(t *testing.T) {
	tests := []struct {
		kind string
		set  map[string]string
		want []string
	}{
		{"duration format", map[string]string{envPollInterval: "soon"},
			[]string{envPollInterval + ` ("soon") is not a Go duration`, "e.g. 30s"}},
		{"duration range", map[string]string{envPollInterval: "48h"},
			[]string{envPollInterval + " (48h0m0s) must be a Go duration of whole milliseconds from 1ms to 24h0m0s"}},
		{"integer format", map[string]string{envMaxFailures: "five"},
			[]string{envMaxFailures + ` ("five") is not an integer`}},
		{"integer range", map[string]string{envMaxFailures: "25"},
			[]string{envMaxFailures + " (25) must be 1..20"}},
		{"rule between two variables", map[string]string{envBaseDelay: "10s", envMaxDelay: "4s"},
			[]string{"LOCALEFLOW_RETRY_BASE_DELAY (10s) must not exceed LOCALEFLOW_RETRY_MAX_DELAY (4s)"}},
		{"rule between two variables (lease)", map[string]string{envLease: "5s", envCMSTimeout: "10s"},
			[]string{envLease + " (5s) must outlast " + envCMSTimeout + " (10s)"}},
		{"level", map[string]string{envLogLevel: "loud"},
			[]string{envLogLevel + ` ("loud") must be DEBUG, INFO, WARN or ERROR`}},
		{"flag", map[string]string{"LOCALEFLOW_ALLOW_INSECURE_HTTP": "yes"},
			[]string{`LOCALEFLOW_ALLOW_INSECURE_HTTP ("yes") must be 1 or unset`}},
		{"URL", map[string]string{envCMSBaseURL: "ftp://cms.example"},
			[]string{envCMSBaseURL + ` ("ftp://cms.example") must be an https:// URL`}},
		{"retention", map[string]string{envRetention: "10m"},
			[]string{envRetention + " (10m0s) must be at least 1h0m0s"}},
		{"prefix", map[string]string{"LOCALEFLOW_DEPLOYMENT": "Bad Prefix"},
			[]string{`LOCALEFLOW_DEPLOYMENT ("Bad Prefix") must be a resource prefix`}},
	}
	for _, tc := range tests {
		t.Run(tc.kind, func(t *testing.T) {
			env := baseEnv()
			for k, v := range tc.set {
				env[k] = v
			}
			_, err := loadConfig(func(k string) string { return env[k] })
			if err == nil {
				t.Fatal("accepted")
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q\nwant it to contain %q", err, want)
				}
			}
		})
	}
	env := baseEnv()
	c, err := loadConfig(func(k string) string { return env[k] })
	if err != nil || c.Retention != DefaultMonitorRetention || c.Deployment != "localeflow" || DefaultMonitorRetention != 90*24*time.Hour {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
}

// TestSweepGraceSetting: LOCALEFLOW_SWEEP_GRACE sets the sweep's grace
// (monitor.Config.SweepGrace; default 30s when unset) and refuses, with the
// variable, the value and monitor's stable code, every value outside whole
// milliseconds in (0, 900s] — zero included, which would otherwise
// silently take the default.
func TestSweepGraceSetting(t *testing.T) {
	for value, want := range map[string]time.Duration{
		"": monitor.DefaultSweepGrace, "30s": 30 * time.Second, "1ms": time.Millisecond,
		"2m": 2 * time.Minute, "900s": monitor.MaxSweepGrace, " 45s ": 45 * time.Second,
	} {
		env := baseEnv()
		env[envSweepGrace] = value
		c, err := loadConfig(func(k string) string { return env[k] })
		if err != nil || c.Monitor.SweepGrace != want {
			t.Errorf("%q: grace %s, %v; want %s", value, c.Monitor.SweepGrace, err, want)
		}
	}
	for _, value := range []string{"0", "0s", "-1s", "900001ms", "16m", "1500us", "1us"} {
		env := baseEnv()
		env[envSweepGrace] = value
		_, err := loadConfig(func(k string) string { return env[k] })
		if err == nil {
			t.Errorf("%q accepted", value)
			continue
		}
		if !core.HasCode(err, monitor.CodeDelayInvalid) || !strings.Contains(err.Error(), envSweepGrace+" (") ||
			!strings.Contains(err.Error(), "whole milliseconds from 1ms to 15m0s") {
			t.Errorf("%q: %v", value, err)
		}
	}
	env := baseEnv()
	env[envSweepGrace] = "soon"
	if _, err := loadConfig(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), envSweepGrace+` ("soon") is not a Go duration`) {
		t.Errorf("soon: %v", err)
	}
}
