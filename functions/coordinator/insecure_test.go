package main

import (
	"strings"
	"testing"
)

// TestPlainHTTPServiceURLsNeedTheLocalFlag: http:// evidence and CMS URLs
// were accepted everywhere; a deployed function now requires https:// and
// only LOCALEFLOW_ALLOW_INSECURE_HTTP=1 (local runs) allows http://.
func TestPlainHTTPServiceURLsNeedTheLocalFlag(t *testing.T) {
	for _, v := range []string{envEvidenceBaseURL, envCMSBaseURL} {
		env := baseEnv()
		env[v] = "http://127.0.0.1:9009"
		if _, err := loadConfig(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), v+" must be https://") {
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
