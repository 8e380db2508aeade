package main

import (
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/contract"
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

// TestEventSettingsFromEnv: the v2 window and the v1 setting reach the
// coordinator's settings; a bad value and the retired variable are
// refused naming the variable.
func TestEventSettingsFromEnv(t *testing.T) {
	env := baseEnv()
	env[envEventMaxAge] = "2h"
	env[envEventV1] = "refuse"
	c, err := loadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.Events.MaxAge != 2*time.Hour || !c.Events.RefuseV1 {
		t.Fatalf("events %+v", c.Events)
	}
	env[envEventV1] = "accept"
	if c, err := loadConfig(func(k string) string { return env[k] }); err != nil || c.Events.RefuseV1 {
		t.Fatalf("accept: refuse=%v, %v", c.Events.RefuseV1, err)
	}
	env[envEventV1] = "yes"
	if _, err := loadConfig(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), envEventV1) {
		t.Fatalf("%s=yes: %v", envEventV1, err)
	}
	delete(env, envEventV1)
	env[contract.EnvEventRefuseV1Retired] = "0"
	if _, err := loadConfig(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), envEventV1+"=accept") {
		t.Fatalf("retired %s=0: %v", contract.EnvEventRefuseV1Retired, err)
	}
}
