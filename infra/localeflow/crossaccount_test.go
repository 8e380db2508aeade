package localeflow

import (
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/jsii-runtime-go"

	"github.com/localeflow/localeflow/contract"
)

// otherAccount is the CMS's or producer's own AWS account.
const otherAccount = "111122223333"

func otherAccountRoot() awsiam.IPrincipal {
	return awsiam.NewAccountPrincipal(jsii.String(otherAccount))
}

var otherAccountARN = map[string]any{"Fn::Join": []any{"", []any{"arn:", map[string]any{"Ref": "AWS::Partition"}, ":iam::" + otherAccount + ":root"}}}

// TestCrossAccountProducerGetsTheBusPolicy: GrantPublishInputs for a
// producer in another account returned an unsuccessful grant and wrote
// nothing. It now writes the bus's resource policy, with the same
// source and detail-type conditions as the identity grant, for the
// construct's own bus and for a host bus of the same app, in an
// environment-agnostic stack and in one with a fixed account.
func TestCrossAccountProducerGetsTheBusPolicy(t *testing.T) {
	for _, tt := range []struct {
		name    string
		account string
		hostBus bool
	}{
		{"own bus, environment-agnostic stack", "", false},
		{"own bus, stack in a fixed account", "123456789012", false},
		{"host bus of the same app", "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			app := awscdk.NewApp(nil)
			var env *awscdk.Environment
			if tt.account != "" {
				env = &awscdk.Environment{Account: jsii.String(tt.account), Region: jsii.String("eu-west-1")}
			}
			stack := awscdk.NewStack(app, jsii.String("TeamPlatform"), &awscdk.StackProps{Env: env})
			p := testProps()
			if tt.hostBus {
				p.EventBus = awsevents.NewEventBus(stack, jsii.String("TeamBus"), &awsevents.EventBusProps{EventBusName: jsii.String("team-bus")})
			}
			lf, err := New(stack, "Localeflow", p)
			if err != nil {
				t.Fatal(err)
			}
			if g := lf.GrantPublishInputs(otherAccountRoot()); !*g.Success() {
				t.Error("cross-account grant unsuccessful")
			}
			_, raw := teamStack{app: app, stack: stack, lf: lf}.template(t)
			policies := resourcesOf(raw, "AWS::Events::EventBusPolicy")
			if len(policies) != 1 {
				t.Fatalf("%d bus policies, want 1", len(policies))
			}
			for _, pol := range policies {
				st := pol["Properties"].(map[string]any)["Statement"].(map[string]any)
				principal := st["Principal"].(map[string]any)["AWS"]
				if st["Effect"] != "Allow" || st["Action"] != "events:PutEvents" || (!jsonEqual(principal, otherAccountARN) &&
					principal != "arn:aws:iam::"+otherAccount+":root") {
					t.Errorf("bus policy statement %v", st)
				}
				cond := st["Condition"].(map[string]any)["StringEquals"].(map[string]any)
				if cond["events:source"] != contract.EventSource || !jsonEqual(sortedStrings(cond["events:detail-type"]), sortedStrings(toAny(contract.InputDetailTypes))) {
					t.Errorf("bus policy conditions %v", cond)
				}
			}
		})
	}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// TestSameAccountProducerNeedsNoBusPolicy: a role of the same app keeps
// the identity statement only.
func TestSameAccountProducerNeedsNoBusPolicy(t *testing.T) {
	ts := newTeamStack(t, nil)
	role := awsiam.NewRole(ts.stack, jsii.String("Producer"), &awsiam.RoleProps{AssumedBy: awsiam.NewAccountRootPrincipal()})
	if g := ts.lf.GrantPublishInputs(role); !*g.Success() {
		t.Error("grant unsuccessful")
	}
	_, raw := ts.template(t)
	if n := len(resourcesOf(raw, "AWS::Events::EventBusPolicy")); n != 0 {
		t.Errorf("%d bus policies for a same-account role", n)
	}
}

// TestCrossAccountGrantOnAnImportedBusFailsSynth: an imported host bus
// cannot take a resource policy from here; synth fails naming
// ErrCrossAccountUnsupported instead of succeeding with nothing granted.
func TestCrossAccountGrantOnAnImportedBusFailsSynth(t *testing.T) {
	ts := newTeamStack(t, func(stack awscdk.Stack, p *Props) {
		p.EventBus = awsevents.EventBus_FromEventBusName(stack, jsii.String("Imported"), jsii.String("shared-bus"))
	})
	ts.lf.GrantPublishInputs(otherAccountRoot())
	if got := ts.synthError(); !strings.Contains(got, ErrCrossAccountUnsupported) || !strings.Contains(got, otherAccount) {
		t.Fatalf("synth error %q", got)
	}
}

// TestCrossAccountProviderReadsItsSecret: a secret grant to another
// account added nothing. GrantSecretRead now writes the secret's resource
// policy (one per secret, public policies blocked) and a data-key
// statement for that account, through Secrets Manager and for that
// secret only.
func TestCrossAccountProviderReadsItsSecret(t *testing.T) {
	ts := newTeamStack(t, nil)
	for _, grantee := range []awsiam.IGrantable{otherAccountRoot(), awsiam.NewAccountPrincipal(jsii.String("444455556666"))} {
		if err := ts.lf.GrantSecretRead("CMSKeySecret", grantee); err != nil {
			t.Fatal(err)
		}
	}
	if err := ts.lf.GrantSecretRead("EvidenceKeySecret", otherAccountRoot()); err != nil {
		t.Fatal(err)
	}
	_, raw := ts.template(t)
	policies := resourcesOf(raw, "AWS::SecretsManager::ResourcePolicy")
	if len(policies) != 2 {
		t.Fatalf("%d secret policies, want one per secret (2)", len(policies))
	}
	cmsStatements := 0
	for _, pol := range policies {
		p := pol["Properties"].(map[string]any)
		if p["BlockPublicPolicy"] != true {
			t.Errorf("public policies not blocked: %v", p)
		}
		sts := asList(p["ResourcePolicy"].(map[string]any)["Statement"])
		if jsonEqual(p["SecretId"], ref(*ts.stack.GetLogicalId(ts.lf.CMSKeySecret))) {
			cmsStatements = len(sts)
		}
		for _, s := range sts {
			st := s.(map[string]any)
			if !jsonEqual(sortedStrings(st["Action"]), []string{"secretsmanager:DescribeSecret", "secretsmanager:GetSecretValue"}) {
				t.Errorf("secret policy actions %v", st["Action"])
			}
		}
	}
	if cmsStatements != 2 {
		t.Errorf("CMS secret policy has %d statements, want 2", cmsStatements)
	}
	keyStatements := 0
	for _, k := range resourcesOf(raw, "AWS::KMS::Key") {
		for _, s := range asList(k["Properties"].(map[string]any)["KeyPolicy"].(map[string]any)["Statement"]) {
			st := s.(map[string]any)
			if !strings.HasPrefix(st["Sid"].(string), "CrossAccountReadsSecret") {
				continue
			}
			keyStatements++
			cond := st["Condition"].(map[string]any)
			if st["Action"] != "kms:Decrypt" || cond["StringEquals"] == nil || cond["StringLike"] == nil {
				t.Errorf("key statement %v", st)
			}
		}
	}
	if keyStatements != 3 {
		t.Errorf("%d cross-account key statements, want 3", keyStatements)
	}
}

// TestCrossAccountSecretReadRefusals: without a key another account may
// use, or with an imported host key, GrantSecretRead returns
// ErrCrossAccountUnsupported and adds nothing; an unknown secret is
// refused; a same-account role gets identity statements only.
func TestCrossAccountSecretReadRefusals(t *testing.T) {
	for name, edit := range map[string]func(awscdk.Stack, *Props){
		"AWS-managed key": func(_ awscdk.Stack, p *Props) { p.CustomerManagedKey = jsii.Bool(false) },
		"imported host key": func(stack awscdk.Stack, p *Props) {
			p.DataKey = awskms.Key_FromKeyArn(stack, jsii.String("Imported"), jsii.String("arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"))
		},
	} {
		t.Run(name, func(t *testing.T) {
			ts := newTeamStack(t, edit)
			err := ts.lf.GrantSecretRead("CMSKeySecret", otherAccountRoot())
			if err == nil || !strings.HasPrefix(err.Error(), ErrCrossAccountUnsupported) {
				t.Fatalf("GrantSecretRead: %v", err)
			}
			_, raw := ts.template(t)
			if n := len(resourcesOf(raw, "AWS::SecretsManager::ResourcePolicy")); n != 0 {
				t.Errorf("%d secret policies after a refusal", n)
			}
		})
	}
	ts := newTeamStack(t, nil)
	if err := ts.lf.GrantSecretRead("NoSuchSecret", otherAccountRoot()); err == nil {
		t.Error("unknown secret accepted")
	}
	role := awsiam.NewRole(ts.stack, jsii.String("Cms"), &awsiam.RoleProps{AssumedBy: awsiam.NewAccountRootPrincipal()})
	if err := ts.lf.GrantSecretRead("CMSKeySecret", role); err != nil {
		t.Fatal(err)
	}
	_, raw := ts.template(t)
	if n := len(resourcesOf(raw, "AWS::SecretsManager::ResourcePolicy")); n != 0 {
		t.Errorf("%d secret policies for a same-account role", n)
	}
	roleID := *ts.stack.GetLogicalId(role.Node().DefaultChild().(awscdk.CfnElement))
	var actions []string
	for _, pol := range resourcesOf(raw, "AWS::IAM::Policy") {
		if !jsonEqual(pol["Properties"].(map[string]any)["Roles"], []any{ref(roleID)}) {
			continue
		}
		statements(pol, func(_ string, st map[string]any) {
			actions = append(actions, sortedStrings(st["Action"])...)
		})
	}
	if got := strings.Join(actions, " "); !strings.Contains(got, "secretsmanager:GetSecretValue") || !strings.Contains(got, "kms:Decrypt") {
		t.Errorf("same-account role actions %v", actions)
	}
}

// TestHealthReadGrantsBothFunctionURLActions: a function URL with AWS_IAM
// auth needs lambda:InvokeFunctionUrl and lambda:InvokeFunction; the docs
// told a hand-written policy the first only. GrantHealthRead grants both,
// each under its condition, on the health function.
func TestHealthReadGrantsBothFunctionURLActions(t *testing.T) {
	ts := newTeamStack(t, nil)
	viewer := awsiam.NewRole(ts.stack, jsii.String("Viewer"), &awsiam.RoleProps{AssumedBy: awsiam.NewAccountRootPrincipal()})
	ts.lf.GrantHealthRead(viewer)
	_, raw := ts.template(t)
	roleID := *ts.stack.GetLogicalId(viewer.Node().DefaultChild().(awscdk.CfnElement))
	healthID := *ts.stack.GetLogicalId(ts.lf.Health.Node().DefaultChild().(awscdk.CfnElement))
	want := map[string]map[string]any{
		"lambda:InvokeFunctionUrl": {"StringEquals": map[string]any{"lambda:FunctionUrlAuthType": "AWS_IAM"}},
		"lambda:InvokeFunction":    {"Bool": map[string]any{"lambda:InvokedViaFunctionUrl": true}},
	}
	for _, pol := range resourcesOf(raw, "AWS::IAM::Policy") {
		if !jsonEqual(pol["Properties"].(map[string]any)["Roles"], []any{ref(roleID)}) {
			continue
		}
		statements(pol, func(_ string, st map[string]any) {
			action, _ := st["Action"].(string)
			cond, ok := want[action]
			if !ok {
				t.Errorf("unexpected action %v", st["Action"])
				return
			}
			if !jsonEqual(st["Resource"], getAtt(healthID, "Arn")) || !jsonEqual(st["Condition"], cond) {
				t.Errorf("%s: resource %v condition %v", action, st["Resource"], st["Condition"])
			}
			delete(want, action)
		})
	}
	if len(want) > 0 {
		t.Errorf("GrantHealthRead lacks %v", want)
	}
}
