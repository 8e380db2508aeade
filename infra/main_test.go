package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

// TestAppSynthesizesFromContext runs the app's entry point with context
// values (strings, as `cdk -c` gives them) and reads the template it writes.
func TestAppSynthesizesFromContext(t *testing.T) {
	out := t.TempDir()
	ctx := map[string]any{
		"assetDir":           assetDir,
		"prefix":             "ctx-test",
		"stackName":          "CtxTest",
		"deletionProtection": "false",
		"functions":          `{"coordinator":{"memoryMB":1024}}`,
		"cmsBaseUrl":         "https://cms.example.com/",
		// One issuer set per receipt kind.
		"receiptIssuersQuality":           "qa=" + issuerKey,
		"receiptIssuersHumanReview":       "desk=" + humanKey,
		"receiptIssuersIndependentReview": "rv=" + reviewKey,
	}
	if err := run(&awscdk.AppProps{Context: &ctx, Outdir: jsii.String(out)}); err != nil {
		t.Fatalf("run: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join(out, "CtxTest.template.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tmpl struct {
		Resources map[string]struct {
			Type       string
			Properties map[string]any
		}
	}
	if err := json.Unmarshal(raw, &tmpl); err != nil {
		t.Fatal(err)
	}
	functions := 0
	for id, r := range tmpl.Resources {
		switch r.Type {
		case "AWS::DynamoDB::Table":
			if r.Properties["DeletionProtectionEnabled"] != false || !strings.HasPrefix(r.Properties["TableName"].(string), "ctx-test-") {
				t.Errorf("table %s: %v", id, r.Properties)
			}
		case "AWS::Lambda::Function":
			functions++
			env := r.Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
			if r.Properties["FunctionName"] == "ctx-test-coordinator" {
				if r.Properties["MemorySize"] != 1024.0 {
					t.Errorf("coordinator memory %v", r.Properties["MemorySize"])
				}
				if env[EnvCMSBaseURL] != "https://cms.example.com" || env[EnvEvidenceBaseURL] != placeholderURL {
					t.Errorf("coordinator URLs %v %v", env[EnvCMSBaseURL], env[EnvEvidenceBaseURL])
				}
				if env[EnvReceiptIssuersQuality] != "qa="+issuerKey || env[EnvReceiptIssuersHumanReview] != "desk="+humanKey ||
					env[EnvReceiptIssuersIndependentReview] != "rv="+reviewKey {
					t.Errorf("coordinator issuers %v", env)
				}
			}
		}
	}
	if functions != 3 {
		t.Errorf("%d functions", functions)
	}
	// cdk-nag ran in the app and wrote its report.
	if _, err := os.Stat(filepath.Join(out, "AwsSolutions--CtxTest-NagReport.csv")); err != nil {
		t.Errorf("no nag report: %v", err)
	}
}

func TestAppRejectsBadContext(t *testing.T) {
	for name, ctx := range map[string]map[string]any{
		"deletion protection not bool": {"assetDir": assetDir, "deletionProtection": "maybe"},
		"nag not bool":                 {"assetDir": assetDir, "nag": "sometimes"},
		"functions not json":           {"assetDir": assetDir, "functions": "{"},
		"missing bootstrap":            {"assetDir": t.TempDir()},
		"retired shared issuers":       {"assetDir": assetDir, "receiptIssuers": "qa=" + issuerKey},
	} {
		t.Run(name, func(t *testing.T) {
			if err := run(&awscdk.AppProps{Context: &ctx, Outdir: jsii.String(t.TempDir())}); err == nil {
				t.Fatal("run accepted bad context")
			}
		})
	}
}

// TestOutageToleranceFromContext: the outage a change survives was nowhere
// stated; synth now sets the poller's failure budget explicitly and writes
// the tolerance of those settings next to the template.
func TestOutageToleranceFromContext(t *testing.T) {
	for _, tt := range []struct {
		name              string
		ctx               map[string]any
		failures, maxWait string
		want              string
	}{
		{"defaults", map[string]any{}, "5", "5m0s", "CMS outage tolerance: 1m15s "},
		{"extended", map[string]any{"maxConsecutiveFailures": "10", "retryMaxDelay": "10m"}, "10", "10m0s", "CMS outage tolerance: 30m35s "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := t.TempDir()
			ctx := map[string]any{"assetDir": assetDir, "stackName": "Tol", "deletionProtection": "false", "nag": "false"}
			for k, v := range tt.ctx {
				ctx[k] = v
			}
			if err := run(&awscdk.AppProps{Context: &ctx, Outdir: jsii.String(out)}); err != nil {
				t.Fatalf("run: %v", err)
			}
			line, err := os.ReadFile(filepath.Join(out, ToleranceFile))
			if err != nil || !strings.HasPrefix(string(line), tt.want) {
				t.Fatalf("tolerance %q (%v), want prefix %q", line, err, tt.want)
			}
			raw, err := os.ReadFile(filepath.Join(out, "Tol.template.json"))
			if err != nil {
				t.Fatal(err)
			}
			for _, kv := range []string{`"` + EnvMaxFailures + `":"` + tt.failures + `"`, `"` + EnvRetryMaxDelay + `":"` + tt.maxWait + `"`} {
				if !strings.Contains(strings.Join(strings.Fields(string(raw)), ""), kv) {
					t.Errorf("template lacks %s", kv)
				}
			}
		})
	}
}
