package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/localeflow/localeflow/infra/localeflow"
	"github.com/localeflow/localeflow/infra/localeflow/localeflowtest"
)

// assetDir holds a dummy <fn>/bootstrap for every function, created once in
// TestMain (CDK only zips it; nothing executes it).
var assetDir string

// Receipt issuers' Ed25519 public keys in hex, one per receipt kind (any 32
// bytes pass the format check).
var (
	issuerKey = strings.Repeat("0f", 32)
	humanKey  = strings.Repeat("1e", 32)
	reviewKey = strings.Repeat("2d", 32)
)

func TestMain(m *testing.M) {
	localeflowtest.Main(m, "localeflow-infra-app-assets-", &assetDir)
}

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
		// A function setting: a context key named as the variable, and
		// one function's own setting in functions.
		"LOCALEFLOW_POLL_INTERVAL": "60s",
		"LOCALEFLOW_LOG_LEVEL":     "WARN",
	}
	ctx["functions"] = `{"coordinator":{"memoryMB":1024},"health":{"settings":{"LOCALEFLOW_LOG_LEVEL":"ERROR"}}}`
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
			wantLevel := "WARN"
			if r.Properties["FunctionName"] == "ctx-test-health" {
				wantLevel = "ERROR"
			}
			if env["LOCALEFLOW_LOG_LEVEL"] != wantLevel {
				t.Errorf("%v: log level %v, want %s", r.Properties["FunctionName"], env["LOCALEFLOW_LOG_LEVEL"], wantLevel)
			}
			if _, set := env["LOCALEFLOW_POLL_INTERVAL"]; set != (r.Properties["FunctionName"] == "ctx-test-poller") ||
				(set && env["LOCALEFLOW_POLL_INTERVAL"] != "60s") {
				t.Errorf("%v: poll interval %v", r.Properties["FunctionName"], env["LOCALEFLOW_POLL_INTERVAL"])
			}
			if r.Properties["FunctionName"] == "ctx-test-coordinator" {
				if r.Properties["MemorySize"] != 1024.0 {
					t.Errorf("coordinator memory %v", r.Properties["MemorySize"])
				}
				if env[localeflow.EnvCMSBaseURL] != "https://cms.example.com" || env[localeflow.EnvEvidenceBaseURL] != placeholderURL {
					t.Errorf("coordinator URLs %v %v", env[localeflow.EnvCMSBaseURL], env[localeflow.EnvEvidenceBaseURL])
				}
				if env[localeflow.EnvReceiptIssuersQuality] != "qa="+issuerKey || env[localeflow.EnvReceiptIssuersHumanReview] != "desk="+humanKey ||
					env[localeflow.EnvReceiptIssuersIndependentReview] != "rv="+reviewKey {
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
		"bad function setting":         {"assetDir": assetDir, "LOCALEFLOW_POLL_CONCURRENCY": "999"},
		"sweep grace not a duration":   {"assetDir": assetDir, "sweepGrace": "soon"},
		"sweep grace zero":             {"assetDir": assetDir, "sweepGrace": "0s"},
		"sweep grace over 900s":        {"assetDir": assetDir, "sweepGrace": "16m"},
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
		// Guaranteed: the sum of the least jittered backoffs (half of each).
		{"defaults", map[string]any{}, "5", "5m0s", "CMS outage tolerance: 1m15s guaranteed (up to 1m52.5s) "},
		{"extended", map[string]any{"maxConsecutiveFailures": "10", "retryMaxDelay": "10m"}, "10", "10m0s", "CMS outage tolerance: 30m35s guaranteed (up to 45m52.5s) "},
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
			for _, kv := range []string{`"` + localeflow.EnvMaxFailures + `":"` + tt.failures + `"`, `"` + localeflow.EnvRetryMaxDelay + `":"` + tt.maxWait + `"`} {
				if !strings.Contains(strings.Join(strings.Fields(string(raw)), ""), kv) {
					t.Errorf("template lacks %s", kv)
				}
			}
		})
	}
}

// TestSweepGraceFromContext: -c sweepGrace (make deploy SWEEP_GRACE=...)
// reaches the poller's LOCALEFLOW_SWEEP_GRACE in the template.
func TestSweepGraceFromContext(t *testing.T) {
	out := t.TempDir()
	ctx := map[string]any{"assetDir": assetDir, "stackName": "Grace", "deletionProtection": "false", "nag": "false", ctxSweepGrace: "2m"}
	if err := run(&awscdk.AppProps{Context: &ctx, Outdir: jsii.String(out)}); err != nil {
		t.Fatalf("run: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join(out, "Grace.template.json"))
	if err != nil {
		t.Fatal(err)
	}
	if kv := `"` + localeflow.EnvSweepGrace + `":"2m0s"`; !strings.Contains(strings.Join(strings.Fields(string(raw)), ""), kv) {
		t.Errorf("template lacks %s", kv)
	}
}

// TestSynthSaysWhetherTheKeyIsOn: `make synth` prints encryption.txt.
func TestSynthSaysWhetherTheKeyIsOn(t *testing.T) {
	for _, tt := range []struct{ ctx, want string }{{"", "customer-managed KMS key: on"}, {"false", "customer-managed KMS key: off"}} {
		out := t.TempDir()
		ctx := map[string]any{"assetDir": assetDir, "stackName": "Enc", "deletionProtection": "false", "nag": "false"}
		if tt.ctx != "" {
			ctx[ctxCustomerManagedKey] = tt.ctx
		}
		if err := run(&awscdk.AppProps{Context: &ctx, Outdir: jsii.String(out)}); err != nil {
			t.Fatalf("run: %v", err)
		}
		line, err := os.ReadFile(filepath.Join(out, EncryptionFile))
		if err != nil || !strings.HasPrefix(string(line), tt.want) {
			t.Fatalf("%q (%v), want prefix %q", line, err, tt.want)
		}
	}
}

func TestParseFunctionOptions(t *testing.T) {
	want := map[string]localeflow.FunctionOptions{"poller": {MemoryMB: 512, TimeoutSeconds: 60, ReservedConcurrency: 5}}
	for name, in := range map[string]any{
		"string from -c": `{"poller":{"memoryMB":512,"timeoutSeconds":60,"reservedConcurrency":5}}`,
		"object from cdk.json": map[string]any{"poller": map[string]any{
			"memoryMB": 512, "timeoutSeconds": 60, "reservedConcurrency": 5,
		}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := parseFunctionOptions(in)
			if err != nil || !jsonEqual(t, got, want) {
				t.Fatalf("got %v, %v", got, err)
			}
		})
	}
	for _, bad := range []any{`{"poller":{"memory":512}}`, `[1]`, `{`} {
		if _, err := parseFunctionOptions(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	if got, err := parseFunctionOptions(nil); err != nil || len(got) != 0 {
		t.Errorf("nil: %v, %v", got, err)
	}
}

// jsonEqual compares two values by their JSON encoding.
func jsonEqual(t testing.TB, a, b any) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(ja) == string(jb)
}
