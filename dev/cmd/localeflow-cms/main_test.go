package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/adapters/cms"
	"github.com/localeflow/localeflow/core/lifecycle"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/dev/logcapture"
)

var key = []byte("localeflow-cms-main-test-key-01")

func keys() (pub, apv string) {
	a, p := releasetest.NewFixture().Authorities()
	return hex.EncodeToString(p.PublicKey()), hex.EncodeToString(a.PublicKey())
}

func TestRunServesRegisteredChanges(t *testing.T) {
	changes := filepath.Join(t.TempDir(), "changes.json")
	if err := os.WriteFile(changes, []byte(`[{"event_id":"evt-1","site_id":"site-1","plan_id":"plan-1","website_version":"v1","source_sequence":1,"locales":["de-DE"]}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	pub, apv := keys()
	ctx, cancel := context.WithCancel(context.Background())
	var out logcapture.Buffer
	done := make(chan error, 1)
	getenv := func(k string) string {
		if k == "LOCALEFLOW_CMS_KEY_HEX" {
			return hex.EncodeToString(key)
		}
		return ""
	}
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-changes", changes, "-publication-public-key", pub, "-approval-public-key", apv, "-latency", "1ms"}, getenv, &out)
	}()
	var ready struct {
		URL     string `json:"url"`
		Changes int    `json:"changes"`
	}
	deadline := time.Now().Add(10 * time.Second)
	for ready.URL == "" {
		if time.Now().After(deadline) {
			t.Fatalf("not ready: %s", out.String())
		}
		line, _, _ := strings.Cut(out.String(), "\n")
		_ = json.Unmarshal([]byte(line), &ready)
		time.Sleep(10 * time.Millisecond)
	}
	client, err := cms.New(cms.Config{BaseURL: ready.URL, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.ReadLifecycle(ctx, lifecycle.Target{EventID: "evt-1", SiteID: "site-1", PlanID: "plan-1", WebsiteVersion: "v1", SourceSequence: 1, JobCount: 1})
	if err != nil || resp.Status != "processing" || ready.Changes != 1 {
		t.Fatalf("%+v %v (ready %+v)", resp, err, ready)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(ready.URL); err == nil {
		t.Fatal("server still answers after stop")
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	pub, apv := keys()
	k := hex.EncodeToString(key)
	tests := []struct {
		name string
		args []string
	}{
		{"NoKey", []string{"-publication-public-key", pub, "-approval-public-key", apv}},
		{"ShortKey", []string{"-key-hex", "abcd", "-publication-public-key", pub, "-approval-public-key", apv}},
		{"NoPublicKeys", []string{"-key-hex", k}},
		{"PublicAddress", []string{"-key-hex", k, "-publication-public-key", pub, "-approval-public-key", apv, "-addr", "0.0.0.0:0"}},
		{"BadFailureRate", []string{"-key-hex", k, "-publication-public-key", pub, "-approval-public-key", apv, "-failure-rate", "2"}},
		{"MissingChanges", []string{"-key-hex", k, "-publication-public-key", pub, "-approval-public-key", apv, "-changes", "/nonexistent.json"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := run(context.Background(), tc.args, func(string) string { return "" }, &out); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}
