package main

import (
	"strings"
	"testing"
	"time"
)

// TestPlainHTTPServiceURLsNeedTheLocalFlag: http:// evidence and CMS URLs
// were accepted everywhere; a deployed function now requires https:// and
// only LOCALEFLOW_ALLOW_INSECURE_HTTP=1 (local runs) allows http://.
func TestPlainHTTPServiceURLsNeedTheLocalFlag(t *testing.T) {
	for _, v := range []string{envEvidenceBaseURL, envCMSBaseURL} {
		env := baseEnv()
		env[v] = "http://127.0.0.1:9009"
		if _, err := loadConfig(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), v+` ("http://127.0.0.1:9009") must be https://`) {
			t.Errorf("%s over http accepted without the flag: %v", v, err)
		}
		env["LOCALEFLOW_ALLOW_INSECURE_HTTP"] = "1"
		if _, err := loadConfig(func(k string) string { return env[k] }); err != nil {
			t.Errorf("%s over http refused with the flag: %v", v, err)
		}
		env["LOCALEFLOW_ALLOW_INSECURE_HTTP"] = "yes"
		if _, err := loadConfig(func(k string) string { return env[k] }); err == nil {
			t.Errorf("flag value yes accepted")
		}
	}
}

// TestEventSettingsFromEnv: the v2 window and the v1 refusal reach the
// coordinator's settings.
func TestEventSettingsFromEnv(t *testing.T) {
	env := baseEnv()
	env[envEventMaxAge] = "2h"
	env[envEventRefuseV1] = "1"
	c, err := loadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.Events.MaxAge != 2*time.Hour || !c.Events.RefuseV1 {
		t.Fatalf("events %+v", c.Events)
	}
	env[envEventRefuseV1] = "yes"
	if _, err := loadConfig(func(k string) string { return env[k] }); err == nil {
		t.Fatal("refuse v1 = yes accepted")
	}
}
