package main

import (
	"strings"
	"testing"
)

// TestPlainHTTPCMSURLNeedsTheLocalFlag: an http:// CMS URL was accepted
// everywhere; now only LOCALEFLOW_ALLOW_INSECURE_HTTP=1 (local runs)
// allows it.
func TestPlainHTTPCMSURLNeedsTheLocalFlag(t *testing.T) {
	env := baseEnv()
	env[envCMSBaseURL] = "http://127.0.0.1:9009"
	if _, err := loadConfig(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), envCMSBaseURL+` ("http://127.0.0.1:9009") must be https://`) {
		t.Fatalf("http CMS URL accepted without the flag: %v", err)
	}
	env["LOCALEFLOW_ALLOW_INSECURE_HTTP"] = "1"
	if _, err := loadConfig(func(k string) string { return env[k] }); err != nil {
		t.Fatalf("http CMS URL refused with the flag: %v", err)
	}
}
