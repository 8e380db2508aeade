package localeflow

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/cxapi"
	"github.com/aws/jsii-runtime-go"

	"github.com/localeflow/localeflow/contract"
)

// teamStack is a team's stack holding one construct (prefix team-lf).
type teamStack struct {
	app   awscdk.App
	stack awscdk.Stack
	lf    *Localeflow
}

// newTeamStack builds the construct into a fresh team stack; edit changes
// the props first (host constructs go into the stack it is given).
func newTeamStack(t *testing.T, edit func(stack awscdk.Stack, p *Props)) teamStack {
	t.Helper()
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("TeamPlatform"), nil)
	p := testProps()
	p.Prefix = "team-lf"
	if edit != nil {
		edit(stack, p)
	}
	lf, err := New(stack, "Localeflow", p)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return teamStack{app: app, stack: stack, lf: lf}
}

// template synthesizes the team stack; a failed validation fails the test.
func (ts teamStack) template(t *testing.T) (assertions.Template, map[string]any) {
	t.Helper()
	var tmpl assertions.Template
	noPanic(t, func() { tmpl = assertions.Template_FromStack(ts.stack, nil) })
	raw, err := json.Marshal(tmpl.ToJSON())
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return tmpl, out
}

// synthError synthesizes the team stack and returns the validation
// message ("" when synth succeeded).
func (ts teamStack) synthError() (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	ts.app.Synth(nil)
	return ""
}

// resourcesOf is logical id → resource of one type in a raw template.
func resourcesOf(raw map[string]any, typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range raw["Resources"].(map[string]any) {
		if res := r.(map[string]any); res["Type"] == typ {
			out[id] = res
		}
	}
	return out
}

// TestHostDataKeyReplacesTheConstructsKey: a team could not hand the
// construct its own KMS key. HostProps.DataKey now encrypts everything the
// construct's key would (release table, release queue and DLQ, quarantine
// queue, secrets), the construct creates no key, the functions' key grants
// name the host key, and EventBridge's statement lands in its policy.
func TestHostDataKeyReplacesTheConstructsKey(t *testing.T) {
	var key awskms.Key
	ts := newTeamStack(t, func(stack awscdk.Stack, p *Props) {
		key = awskms.NewKey(stack, jsii.String("TeamKey"), &awskms.KeyProps{EnableKeyRotation: jsii.Bool(true)})
		p.DataKey = key
	})
	_, raw := ts.template(t)
	keys := resourcesOf(raw, "AWS::KMS::Key")
	if len(keys) != 1 {
		t.Fatalf("%d KMS keys, want the team's only", len(keys))
	}
	var keyID string
	for id := range keys {
		keyID = id
	}
	arn := getAtt(keyID, "Arn")
	if ts.lf.DataKey != nil || ts.lf.DataKeyL2() != key {
		t.Errorf("DataKey %v, DataKeyL2 is not the host key", ts.lf.DataKey)
	}
	topo := ts.lf.Topology
	for _, q := range []string{topo.RelQueue.Name, topo.RelQueue.DLQName, topo.Quarantine.Name} {
		found := false
		for _, r := range resourcesOf(raw, "AWS::SQS::Queue") {
			p := r["Properties"].(map[string]any)
			if p["QueueName"] == q {
				found = true
				if !jsonEqual(p["KmsMasterKeyId"], arn) {
					t.Errorf("queue %s key %v, want the host key", q, p["KmsMasterKeyId"])
				}
			}
		}
		if !found {
			t.Errorf("no queue %s", q)
		}
	}
	for _, r := range resourcesOf(raw, "AWS::DynamoDB::Table") {
		p := r["Properties"].(map[string]any)
		if p["TableName"] == topo.Release.Name && !jsonEqual(p["SSESpecification"].(map[string]any)["KMSMasterKeyId"], arn) {
			t.Errorf("release table SSE %v, want the host key", p["SSESpecification"])
		}
	}
	for id, r := range resourcesOf(raw, "AWS::SecretsManager::Secret") {
		if strings.Contains(id, "PublicKeySecret") {
			// The public-key secrets hold no key material: AWS-managed
			// encryption, so an operator reads them without the data key.
			if k := r["Properties"].(map[string]any)["KmsKeyId"]; k != nil {
				t.Errorf("public-key secret %s encrypted with %v", id, k)
			}
			continue
		}
		if !jsonEqual(r["Properties"].(map[string]any)["KmsKeyId"], arn) {
			t.Errorf("secret %s key %v", id, r["Properties"].(map[string]any)["KmsKeyId"])
		}
	}
	keyGrants, eventsStatement := 0, false
	statements(raw, func(path string, st map[string]any) {
		if strings.Contains(fmt.Sprint(st["Action"]), "kms:") && jsonEqual(st["Resource"], arn) {
			keyGrants++
		}
		if st["Sid"] == "EventBridgeDeliversToReleaseQueue" && strings.Contains(path, keyID) {
			eventsStatement = true
		}
	})
	if keyGrants < 6 {
		t.Errorf("%d role statements on the host key, want the functions' 6", keyGrants)
	}
	if !eventsStatement {
		t.Error("the host key's policy lacks EventBridge's statement for the release-queue rule")
	}
	if !strings.Contains(ts.lf.EncryptionLine(), "HostProps.DataKey") {
		t.Errorf("EncryptionLine %q does not name the host key", ts.lf.EncryptionLine())
	}
}

// TestImportedHostDataKeyWarnsWithTheStatement: an imported key's policy
// cannot be changed from here; synth says which statement to add, and the
// host key with CustomerManagedKey false is refused.
func TestImportedHostDataKeyWarnsWithTheStatement(t *testing.T) {
	ts := newTeamStack(t, func(stack awscdk.Stack, p *Props) {
		p.DataKey = awskms.Key_FromKeyArn(stack, jsii.String("Imported"), jsii.String("arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"))
	})
	var warnings *[]*cxapi.SynthesisMessage
	noPanic(t, func() {
		warnings = assertions.Annotations_FromStack(ts.stack).FindWarning(jsii.String("*"),
			assertions.Match_StringLikeRegexp(jsii.String("HostProps.DataKey is imported.*events.amazonaws.com.*")))
	})
	if len(*warnings) != 1 {
		t.Errorf("%d host-key-policy warnings, want 1", len(*warnings))
	}
	p := testProps()
	p.CustomerManagedKey = jsii.Bool(false)
	p.DataKey = ts.lf.DataKeyL2()
	if _, err := resolve(p); err == nil || !strings.Contains(err.Error(), "HostProps.DataKey") {
		t.Errorf("DataKey with CustomerManagedKey false: %v", err)
	}
}

// TestQueuesFollowTheTablesRemovalPolicy: the queues were destroyed with
// the stack even with deletion protection on (the tables retained). They
// now follow the tables by default, and QueueRemovalPolicy says otherwise.
func TestQueuesFollowTheTablesRemovalPolicy(t *testing.T) {
	for _, tt := range []struct {
		name    string
		protect bool
		policy  awscdk.RemovalPolicy
		want    string
	}{
		{"default follows deletion protection", true, "", "Retain"},
		{"development stack", false, "", "Delete"},
		{"explicit destroy", true, awscdk.RemovalPolicy_DESTROY, "Delete"},
		{"explicit retain", false, awscdk.RemovalPolicy_RETAIN, "Retain"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := testProps()
			p.DeletionProtection = jsii.Bool(tt.protect)
			p.QueueRemovalPolicy = tt.policy
			s := synth(t, p)
			queues := s.resources("AWS::SQS::Queue")
			if len(queues) != 6 {
				t.Fatalf("%d queues, want 6", len(queues))
			}
			for id, q := range queues {
				if q["DeletionPolicy"] != tt.want || q["UpdateReplacePolicy"] != tt.want {
					t.Errorf("%s: DeletionPolicy %v UpdateReplacePolicy %v, want %s", id, q["DeletionPolicy"], q["UpdateReplacePolicy"], tt.want)
				}
			}
		})
	}
	p := testProps()
	p.QueueRemovalPolicy = awscdk.RemovalPolicy_SNAPSHOT
	if _, err := resolve(p); err == nil || !strings.Contains(err.Error(), "QueueRemovalPolicy") {
		t.Errorf("SNAPSHOT: %v", err)
	}
}

// TestTeamTagsReachTheConstructsResources: the construct's `application`
// tag overrode the team's own. Its tags are namespaced now: a team's
// application tag on its stack stays on every resource, next to
// localeflow:application and localeflow:prefix.
func TestTeamTagsReachTheConstructsResources(t *testing.T) {
	ts := newTeamStack(t, func(stack awscdk.Stack, _ *Props) {
		awscdk.Tags_Of(stack).Add(jsii.String("application"), jsii.String("team-platform"), nil)
	})
	_, raw := ts.template(t)
	checked := 0
	for _, typ := range []string{"AWS::DynamoDB::Table", "AWS::SQS::Queue", "AWS::Lambda::Function"} {
		for id, r := range resourcesOf(raw, typ) {
			tags := map[string]any{}
			for _, tag := range asList(r["Properties"].(map[string]any)["Tags"]) {
				if m, ok := tag.(map[string]any); ok {
					tags[fmt.Sprint(m["Key"])] = m["Value"]
				}
			}
			if tags["application"] != "team-platform" || tags[TagApplication] != "localeflow" || tags[TagPrefix] != "team-lf" {
				t.Errorf("%s tags %v", id, tags)
			}
			checked++
		}
	}
	if checked < 10 {
		t.Fatalf("checked %d resources", checked)
	}
}

// TestEventV1AcceptAndRefuseReachTheFunctions: the typed v1 setting's two
// values end up as LOCALEFLOW_EVENT_V1 on exactly the functions that read
// it, and a value the loaders refuse fails synth.
func TestEventV1AcceptAndRefuseReachTheFunctions(t *testing.T) {
	for _, v := range []contract.EventV1{contract.EventV1Accept, contract.EventV1Refuse} {
		p := testProps()
		p.Settings = Settings{EventV1: v}
		s := synth(t, p)
		for _, fn := range s.topo.Functions {
			reads := false
			for _, name := range contract.Names(contract.FunctionEnv[fn.Dir], contract.Operator) {
				reads = reads || name == contract.EnvEventV1
			}
			got, set := s.functionEnv(t, fn.Dir)[contract.EnvEventV1]
			if set != reads || (reads && got != string(v)) {
				t.Errorf("%s: %s = %v (set %v), want %q on the functions that read it", fn.Dir, contract.EnvEventV1, got, set, v)
			}
		}
	}
	p := testProps()
	p.Settings = Settings{EventV1: "maybe"}
	if _, err := resolve(p); err == nil || !strings.Contains(err.Error(), contract.EnvEventV1) {
		t.Errorf("EventV1 maybe: %v", err)
	}
}

// TestFinalEnvironmentIsCheckedAtSynth: environment added after New
// (Function.AddEnvironment, the L1 SetEnvironment) reached the template
// unchecked. Each function's final environment now goes through its own
// config loader at synth, and stack-owned variables cannot be changed.
func TestFinalEnvironmentIsCheckedAtSynth(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func(lf *Localeflow)
		want string // "" = synth succeeds
	}{
		{"valid setting and a foreign variable", func(lf *Localeflow) {
			lf.Poller.AddEnvironment(jsii.String(contract.EnvPollInterval), jsii.String("60s"), nil)
			lf.Poller.AddEnvironment(jsii.String("OTEL_SERVICE_NAME"), jsii.String("poller"), nil)
		}, ""},
		{"bad value", func(lf *Localeflow) {
			lf.Poller.AddEnvironment(jsii.String(contract.EnvPollInterval), jsii.String("often"), nil)
		}, "poller environment: the function would not start"},
		{"typo", func(lf *Localeflow) {
			lf.Poller.AddEnvironment(jsii.String("LOCALEFLOW_POLL_INTERVALL"), jsii.String("60s"), nil)
		}, "did you mean LOCALEFLOW_POLL_INTERVAL?"},
		{"setting of another function", func(lf *Localeflow) {
			lf.Health.AddEnvironment(jsii.String(contract.EnvPollInterval), jsii.String("60s"), nil)
		}, "is not a setting the health reads"},
		{"stack-owned variable changed", func(lf *Localeflow) {
			lf.Coordinator.AddEnvironment(jsii.String(contract.EnvReleaseTable), jsii.String("someone-elses-table"), nil)
		}, "LOCALEFLOW_RELEASE_TABLE was changed after New"},
		{"stack-owned variable added", func(lf *Localeflow) {
			lf.Health.AddEnvironment(jsii.String(contract.EnvCMSBaseURL), jsii.String("https://cms.example.com"), nil)
		}, "LOCALEFLOW_CMS_BASE_URL is stack-owned"},
		{"L1 environment replaced without the issuers", func(lf *Localeflow) {
			cfn := lf.Coordinator.Node().DefaultChild().(awslambda.CfnFunction)
			vars := map[string]*string{}
			for name, v := range lf.stackEnv[contract.FunctionCoordinator] {
				if !strings.HasPrefix(name, "LOCALEFLOW_RECEIPT_ISSUERS_") {
					vars[name] = v
				}
			}
			cfn.SetEnvironment(&awslambda.CfnFunction_EnvironmentProperty{Variables: &vars})
		}, "LOCALEFLOW_RECEIPT_ISSUERS_QUALITY is required"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ts := newTeamStack(t, nil)
			tt.edit(ts.lf)
			got := ts.synthError()
			if tt.want == "" && got != "" {
				t.Fatalf("synth refused: %s", got)
			}
			if tt.want != "" && !strings.Contains(got, tt.want) {
				t.Fatalf("synth error %q, want it to contain %q", got, tt.want)
			}
		})
	}
}

// TestNewRefusesPropsWithoutReceiptIssuers: New accepted props without
// receipt issuers, with which the coordinator cannot start. Synth now
// fails naming the prop; SynthOnly (the app's `make synth` without
// issuers) warns instead.
func TestNewRefusesPropsWithoutReceiptIssuers(t *testing.T) {
	ts := newTeamStack(t, func(_ awscdk.Stack, p *Props) { p.ReceiptIssuers = ReceiptIssuers{} })
	if got := ts.synthError(); !strings.Contains(got, contract.EnvReceiptIssuersQuality+" is required") || !strings.Contains(got, "Props.ReceiptIssuers") {
		t.Fatalf("synth without issuers: %q", got)
	}
	ts = newTeamStack(t, func(_ awscdk.Stack, p *Props) { p.ReceiptIssuers, p.SynthOnly = ReceiptIssuers{}, true })
	var warnings *[]*cxapi.SynthesisMessage
	noPanic(t, func() {
		warnings = assertions.Annotations_FromStack(ts.stack).FindWarning(jsii.String("*"),
			assertions.Match_StringLikeRegexp(jsii.String("SynthOnly without receipt issuers.*")))
	})
	if len(*warnings) != 1 {
		t.Errorf("%d SynthOnly warnings, want 1", len(*warnings))
	}
}
