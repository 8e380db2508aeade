package localeflow_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/localeflow/localeflow/infra/localeflow"
)

// variant is one synthesized template the independent checks read: cfn-lint
// (TestCfnLintOnEverySynthesizedVariant) and the IAM sufficiency check
// (TestEveryRecordedCallIsAllowed).
type variant struct {
	name     string
	prefix   string
	template map[string]any
	// operatorRole is the logical id of the role GrantOperator was given
	// to (the team-embed stack only).
	operatorRole string
}

var (
	variantsOnce sync.Once
	variantsList []variant
	variantsErr  string
)

// variantProps are valid props of a deployable stack.
func variantProps(prefix string) localeflow.Props {
	return localeflow.Props{
		Prefix:          prefix,
		AssetDir:        localeflow.AssetDirForTests(),
		CMSBaseURL:      "https://cms.example.com",
		EvidenceBaseURL: "https://evidence.example.com/api/",
		ReceiptIssuers: localeflow.ReceiptIssuers{
			Quality:           "qa-vendor=" + hexKey("0f"),
			HumanReview:       "review-desk=" + hexKey("1e"),
			IndependentReview: "review-beta=" + hexKey("2d"),
		},
	}
}

func hexKey(b string) string {
	out := ""
	for range 32 {
		out += b
	}
	return out
}

// synthVariants synthesizes, once per test binary, every variant the
// independent checks cover: the default stack, another prefix, two option
// combinations (AWS-managed encryption, no deletion protection, an existing
// alarm topic, function sizing and settings; and the customer-managed key
// with an e-mail subscription and custom retention), and the team-embed
// stack (host topic, bus and VPC, every grant helper). When
// LOCALEFLOW_TEMPLATE_DIR is set each template is also written there as
// <name>.template.json.
func synthVariants(t *testing.T) []variant {
	t.Helper()
	variantsOnce.Do(func() { variantsList, variantsErr = buildVariants(t) })
	if variantsErr != "" {
		t.Fatal(variantsErr)
	}
	return variantsList
}

func buildVariants(t *testing.T) (out []variant, failure string) {
	defer func() {
		if r := recover(); r != nil {
			failure = "synth: " + jsonOf(r)
		}
	}()
	stackVariant := func(name string, props localeflow.Props) variant {
		app := awscdk.NewApp(nil)
		lf, err := localeflow.NewStack(app, "Test", &localeflow.StackProps{Props: props})
		if err != nil {
			panic(name + ": " + err.Error())
		}
		prefix := props.Prefix
		if prefix == "" {
			prefix = "localeflow"
		}
		return variant{name: name, prefix: prefix, template: templateOf(lf.Stack())}
	}
	out = append(out, stackVariant("default", variantProps("")))
	out = append(out, stackVariant("prefix-staging", variantProps("staging")))

	managed := variantProps("opts-a")
	managed.CustomerManagedKey = jsii.Bool(false)
	managed.DeletionProtection = jsii.Bool(false)
	managed.AlarmTopicArn = "arn:aws:sns:us-east-1:123456789012:team-alarms"
	managed.MaxConsecutiveFailures = 8
	managed.RetryMaxDelay = 120 * time.Second
	managed.SweepGrace = 45 * time.Second
	managed.Functions = map[string]localeflow.FunctionOptions{"poller": {MemoryMB: 512}}
	managed.Settings = localeflow.Settings{PollInterval: time.Minute}
	out = append(out, stackVariant("options-managed-encryption", managed))

	cmk := variantProps("opts-b")
	cmk.CustomerManagedKey = jsii.Bool(true)
	cmk.AlarmEmail = "oncall@example.com"
	cmk.TextRetention = 48 * time.Hour
	cmk.MonitorRetention = 30 * 24 * time.Hour
	out = append(out, stackVariant("options-cmk-email", cmk))

	ts := newTeamStack(t)
	team := variant{name: "team-embed", prefix: "team-lf", template: templateOf(ts.stack)}
	team.operatorRole = *ts.stack.GetLogicalId(ts.operator.Node().DefaultChild().(awscdk.CfnElement))
	out = append(out, team)

	if dir := os.Getenv("LOCALEFLOW_TEMPLATE_DIR"); dir != "" {
		for _, v := range out {
			b, _ := json.MarshalIndent(v.template, "", " ")
			if err := os.WriteFile(filepath.Join(dir, v.name+".template.json"), b, 0o644); err != nil {
				return nil, err.Error()
			}
		}
	}
	return out, ""
}

// templateOf is the synthesized template of stack as plain JSON values.
func templateOf(stack awscdk.Stack) map[string]any {
	stage := awscdk.Stage_Of(stack)
	assembly := stage.Synth(nil)
	art := assembly.GetStackArtifact(stack.ArtifactId())
	b, err := os.ReadFile(filepath.Join(*assembly.Directory(), *art.TemplateFile()))
	if err != nil {
		panic(err.Error())
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		panic(err.Error())
	}
	return raw
}

func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
