package main

import (
	"strings"
	"testing"

	"github.com/localeflow/localeflow/signing"
)

// TestRegistrationStaysIdempotentForTheReplayWindow (issue 25, finding
// 9): a v1 dispatch carries no time and was accepted by default, and a
// monitor retention shorter than LOCALEFLOW_EVENT_MAX_AGE was allowed: an
// old dispatch re-sent after its record expired registered the finished
// change again (a second outcome). v1 is now refused unless
// LOCALEFLOW_EVENT_V1=accept, and the retention must cover the window.
func TestRegistrationStaysIdempotentForTheReplayWindow(t *testing.T) {
	env := baseEnv()
	c, err := loadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if !c.RefuseV1 {
		t.Fatal("v1 dispatch signatures accepted by default")
	}
	if c.Retention < signing.EffectiveEventMaxAge(c.EventMaxAge) {
		t.Fatalf("default retention %s below the default window %s", c.Retention, signing.EffectiveEventMaxAge(c.EventMaxAge))
	}
	env[envEventV1] = "accept"
	if c, err := loadConfig(func(k string) string { return env[k] }); err != nil || c.RefuseV1 {
		t.Fatalf("explicit v1 acceptance: refuse=%v err=%v", c.RefuseV1, err)
	}
	env = baseEnv()
	env[envRetention] = "72h"
	if _, err := loadConfig(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), envEventMaxAge) {
		t.Fatalf("retention 72h under the default window accepted: %v", err)
	}
	env[envEventMaxAge] = "48h"
	if _, err := loadConfig(func(k string) string { return env[k] }); err != nil {
		t.Fatalf("retention 72h with a 48h window refused: %v", err)
	}
	env[envEventMaxAge] = "96h"
	if _, err := loadConfig(func(k string) string { return env[k] }); err == nil {
		t.Fatal("retention 72h with a 96h window accepted")
	}
}
