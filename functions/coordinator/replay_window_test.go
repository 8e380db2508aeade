package main

import (
	"strings"
	"testing"

	"github.com/localeflow/localeflow/signing"
)

// TestReleaseReplayWindow (issue 25, findings 9 and 10): v1 input
// signatures are refused unless LOCALEFLOW_EVENT_V1=accept; the default
// window covers a DLQ redrive (14 days of DLQ retention); the record
// retention must cover the window.
func TestReleaseReplayWindow(t *testing.T) {
	env := baseEnv()
	c, err := loadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if !c.Events.RefuseV1 {
		t.Fatal("v1 input signatures accepted by default")
	}
	if w := signing.EffectiveEventMaxAge(c.Events.MaxAge); w < 15*24*3600e9 || c.RecordRetention < w {
		t.Fatalf("window %s (a DLQ keeps 14 days), retention %s", w, c.RecordRetention)
	}
	env[envEventV1] = "accept"
	if c, err := loadConfig(func(k string) string { return env[k] }); err != nil || c.Events.RefuseV1 {
		t.Fatalf("explicit v1 acceptance: refuse=%v err=%v", c.Events.RefuseV1, err)
	}
	env = baseEnv()
	env[envRecordRetention] = "240h"
	if _, err := loadConfig(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), envEventMaxAge) {
		t.Fatalf("retention 240h under the default window accepted: %v", err)
	}
	env[envEventMaxAge] = "240h"
	if _, err := loadConfig(func(k string) string { return env[k] }); err != nil {
		t.Fatalf("retention = window refused: %v", err)
	}
}
