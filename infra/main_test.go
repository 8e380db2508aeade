package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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

// template reads the synthesized template of stackName in out.
func template(t *testing.T, out, stackName string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(out, stackName+".template.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tmpl map[string]any
	if err := json.Unmarshal(raw, &tmpl); err != nil {
		t.Fatal(err)
	}
	return tmpl
}

// functionEnv is each function's environment in tmpl, by FunctionName.
func functionEnv(tmpl map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, r := range tmpl["Resources"].(map[string]any) {
		res := r.(map[string]any)
		if res["Type"] != "AWS::Lambda::Function" {
			continue
		}
		props := res["Properties"].(map[string]any)
		out[props["FunctionName"].(string)] = props["Environment"].(map[string]any)["Variables"].(map[string]any)
	}
	return out
}

// TestSettingsContextIsAppliedOrRefused: make SETTINGS passes one context
// key per variable. A stack-owned variable with a typed prop is applied
// through it (it used to be dropped and the defaults deployed); a typo or
// another stack-owned variable fails synth naming it.
func TestSettingsContextIsAppliedOrRefused(t *testing.T) {
	out := t.TempDir()
	ctx := map[string]any{"assetDir": assetDir, "deletionProtection": "false", "nag": "false",
		"LOCALEFLOW_SWEEP_GRACE": "10s", "LOCALEFLOW_MAX_CONSECUTIVE_FAILURES": "10", "LOCALEFLOW_TEXT_RETENTION": "24h",
		"LOCALEFLOW_POLL_INTERVAL": "60s"}
	if err := run(&awscdk.AppProps{Context: &ctx, Outdir: jsii.String(out)}); err != nil {
		t.Fatalf("run: %v", err)
	}
	env := functionEnv(template(t, out, "Localeflow"))
	for fn, want := range map[string]map[string]string{
		"localeflow-poller":      {"LOCALEFLOW_SWEEP_GRACE": "10s", "LOCALEFLOW_MAX_CONSECUTIVE_FAILURES": "10", "LOCALEFLOW_POLL_INTERVAL": "60s"},
		"localeflow-coordinator": {"LOCALEFLOW_TEXT_RETENTION": "24h0m0s"},
	} {
		for name, value := range want {
			if env[fn][name] != value {
				t.Errorf("%s %s = %v, want %s", fn, name, env[fn][name], value)
			}
		}
	}
	line, err := os.ReadFile(filepath.Join(out, ToleranceFile))
	if err != nil || strings.HasPrefix(string(line), "CMS outage tolerance: 1m15s") {
		t.Errorf("tolerance %q (%v) is the default's, not 10 failures'", line, err)
	}

	for name, tc := range map[string]struct {
		ctx  map[string]any
		want string
	}{
		"typo":               {map[string]any{"LOCALEFLOW_POLL_INTERVALL": "60s"}, "LOCALEFLOW_POLL_INTERVALL is not a variable any function reads (did you mean LOCALEFLOW_POLL_INTERVAL?)"},
		"typo of LOCALEFLOW": {map[string]any{"LOCALFLOW_POLL_INTERVAL": "60s"}, "did you mean LOCALEFLOW_POLL_INTERVAL?"},
		"stack-owned":        {map[string]any{"LOCALEFLOW_RELEASE_TABLE": "other"}, "LOCALEFLOW_RELEASE_TABLE is stack-owned: the stack sets it from Props.Prefix"},
		"issuers":            {map[string]any{"LOCALEFLOW_RECEIPT_ISSUERS_QUALITY": "qa=" + issuerKey}, "context receiptIssuersQuality, make RECEIPT_ISSUERS_QUALITY"},
		"typed twice":        {map[string]any{"sweepGrace": "20s", "LOCALEFLOW_SWEEP_GRACE": "10s"}, "LOCALEFLOW_SWEEP_GRACE given twice"},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := map[string]any{"assetDir": assetDir, "nag": "false"}
			for k, v := range tc.ctx {
				ctx[k] = v
			}
			err := run(&awscdk.AppProps{Context: &ctx, Outdir: jsii.String(t.TempDir())})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// physicalNames are the explicit resource names in tmpl (tables, queues,
// functions, rules, alarms, secrets, log groups, ...).
func physicalNames(tmpl map[string]any) []string {
	keys := []string{"TableName", "QueueName", "FunctionName", "Name", "ArchiveName", "AliasName", "TopicName",
		"DashboardName", "LogGroupName", "AlarmName", "RoleName", "EventBusName", "RegistryName", "SchemaName"}
	resources := tmpl["Resources"].(map[string]any)
	var out []string
	for _, r := range resources {
		props, _ := r.(map[string]any)["Properties"].(map[string]any)
		if r.(map[string]any)["Type"] == "AWS::EventSchemas::Schema" {
			// A schema's name is unique within its registry: qualify it.
			att := props["RegistryName"].(map[string]any)["Fn::GetAtt"].([]any)
			registry := resources[att[0].(string)].(map[string]any)["Properties"].(map[string]any)["RegistryName"]
			out = append(out, fmt.Sprintf("%v/%v", registry, props["SchemaName"]))
			continue
		}
		for _, k := range keys {
			if s, ok := props[k].(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// TestStackNameFollowsThePrefix: a second prefix is a second stack (it
// used to keep the stack name Localeflow, so deploying it replaced the
// first deployment's tables and keys), and the two templates share no
// physical name. The default prefix keeps the stack name Localeflow.
func TestStackNameFollowsThePrefix(t *testing.T) {
	names := map[string][]string{}
	for prefix, stackName := range map[string]string{"": "Localeflow", "staging": "Localeflow-staging"} {
		out := t.TempDir()
		ctx := map[string]any{"assetDir": assetDir, "deletionProtection": "false", "nag": "false"}
		if prefix != "" {
			ctx["prefix"] = prefix
		}
		if err := run(&awscdk.AppProps{Context: &ctx, Outdir: jsii.String(out)}); err != nil {
			t.Fatalf("run %q: %v", prefix, err)
		}
		names[stackName] = physicalNames(template(t, out, stackName))
	}
	a, b := names["Localeflow"], names["Localeflow-staging"]
	if len(a) < 30 || len(a) != len(b) {
		t.Fatalf("%d and %d physical names", len(a), len(b))
	}
	for _, n := range a {
		if slices.Contains(b, n) {
			t.Errorf("physical name %q in both stacks", n)
		}
	}

	// An explicit stack name of another prefix's form is refused; a name
	// of the team's own is kept.
	ctx := map[string]any{"assetDir": assetDir, "nag": "false", "prefix": "staging", "stackName": "Localeflow"}
	if err := run(&awscdk.AppProps{Context: &ctx, Outdir: jsii.String(t.TempDir())}); err == nil ||
		!strings.Contains(err.Error(), `prefix "staging" deploys as "Localeflow-staging"`) {
		t.Errorf("stackName Localeflow with prefix staging: %v", err)
	}
	for _, tc := range []struct{ prefix, given, want string }{
		{"staging", "", "Localeflow-staging"}, {"", "", "Localeflow"}, {"staging", "TeamL10n", "TeamL10n"},
		{"staging", "Localeflow-staging", "Localeflow-staging"},
	} {
		if got, err := appStackName(tc.prefix, tc.given); err != nil || got != tc.want {
			t.Errorf("appStackName(%q, %q) = %q, %v; want %q", tc.prefix, tc.given, got, err, tc.want)
		}
	}
	for _, given := range []string{"Localeflow-prod", "Localeflow"} {
		if _, err := appStackName("staging", given); err == nil {
			t.Errorf("appStackName(staging, %q) accepted", given)
		}
	}
}

// TestDeployDocsInTheOrderANewcomerFollows: infra/README.md and README.md
// "Deploy" ran `cdk bootstrap` before the build it synthesizes, told a
// hand-written health-page policy to grant lambda:InvokeFunctionUrl only
// (a function URL needs lambda:InvokeFunction too), and the functions
// context needed double quoting through CDK_FLAGS. The docs now build
// first and name both actions, and FUNCTION_OPTIONS reaches cdk as one
// argument.
func TestDeployDocsInTheOrderANewcomerFollows(t *testing.T) {
	for doc, section := range map[string]string{"README.md": "## Deploying to AWS", "../README.md": "## Deploy"} {
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		text := string(raw)
		// The deploy section as a newcomer reads it, to the next section.
		start := strings.Index(text, "\n"+section+"\n")
		if start < 0 {
			t.Fatalf("%s: no section %q", doc, section)
		}
		deploy := text[start+1:]
		if end := strings.Index(deploy[len(section):], "\n## "); end >= 0 {
			deploy = deploy[:len(section)+end]
		}
		bootstrap := strings.Index(deploy, "cdk bootstrap aws://")
		build := strings.Index(deploy, "make build")
		if bootstrap < 0 || build < 0 || build > bootstrap {
			t.Errorf("%s %q: make build at %d, cdk bootstrap at %d: build first (bootstrap synthesizes the app)", doc, section, build, bootstrap)
		}
		if !regexp.MustCompile("lambda:InvokeFunction[^U]").MatchString(text) || !strings.Contains(text, "lambda:InvokeFunctionUrl") {
			t.Errorf("%s: the health page needs lambda:InvokeFunctionUrl and lambda:InvokeFunction", doc)
		}
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	options := `{"poller":{"memoryMB":512,"timeoutSeconds":60}}`
	out, err := exec.Command("make", "-n", "-C", "..", "synth", "FUNCTION_OPTIONS="+options).CombinedOutput()
	if err != nil {
		t.Fatalf("make -n synth: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), `-c 'functions=`+options+`'`) {
		t.Errorf("make synth does not pass FUNCTION_OPTIONS as one argument:\n%s", out)
	}
}

// failingValidation always fails synth with its message.
type failingValidation struct{ msg string }

func (f *failingValidation) Validate() *[]*string { return &[]*string{jsii.String(f.msg)} }

// TestSynthValidationFailureIsAnError: a failed construct validation (the
// construct checks each function's final environment at synth) throws in
// CDK, a panic through jsii; run returns it as an error instead of
// crashing the app.
func TestSynthValidationFailureIsAnError(t *testing.T) {
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	stack := awscdk.NewStack(app, jsii.String("Check"), nil)
	stack.Node().AddValidation(&failingValidation{msg: "infra: the final environment is refused"})
	_, err := synthesize(app)
	if err == nil || !strings.Contains(err.Error(), "infra: the final environment is refused") {
		t.Fatalf("synthesize: %v", err)
	}
}
