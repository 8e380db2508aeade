package localeflow_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/cxapi"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/infra/localeflow"
)

// teamStack is the team's scratch stack of TestTeamStackEmbedsWithItsOwnConstructs,
// also linted (TestCfnLintOnEverySynthesizedVariant) and the operator's grant of
// the IAM sufficiency check (TestEveryRecordedCallIsAllowed).
type teamStack struct {
	app                               awscdk.App
	stack                             awscdk.Stack
	topic                             awssns.Topic
	bus                               awsevents.EventBus
	lf                                *localeflow.Localeflow
	producer, operator, viewer, cmsRd awsiam.Role
}

// newTeamStack builds the team's stack: its own alarm topic, event bus and
// VPC handed to the construct, and each grant helper used on a role of its
// own (Producer, Operator, HealthViewer, CmsReader).
func newTeamStack(t *testing.T) teamStack {
	t.Helper()
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("TeamPlatform"), nil)
	topic := awssns.NewTopic(stack, jsii.String("TeamAlarms"), &awssns.TopicProps{
		EnforceSSL: jsii.Bool(true),
	})
	cdknag.NagSuppressions_AddResourceSuppressions(topic, &[]*cdknag.NagPackSuppression{
		{Id: jsii.String("AwsSolutions-SNS2"), Reason: jsii.String("the team's alarm topic: alarm names and states only")},
	}, nil)
	bus := awsevents.NewEventBus(stack, jsii.String("TeamBus"), &awsevents.EventBusProps{EventBusName: jsii.String("team-bus")})
	vpc := awsec2.NewVpc(stack, jsii.String("TeamVpc"), &awsec2.VpcProps{MaxAzs: jsii.Number(2), NatGateways: jsii.Number(1)})
	vpc.AddFlowLog(jsii.String("FlowLog"), nil)
	lf, err := localeflow.New(stack, "Localeflow", &localeflow.Props{
		Prefix:   "team-lf",
		AssetDir: localeflow.AssetDirForTests(), ReceiptIssuers: localeflow.IssuersForTests(),
		CMSBaseURL:      "https://cms.internal.team.example",
		EvidenceBaseURL: "https://evidence.team.example",
		HostProps: localeflow.HostProps{
			AlarmTopic: topic, EventBus: bus, Vpc: vpc,
			VpcSubnets: &awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PRIVATE_WITH_EGRESS},
		},
		Settings: localeflow.Settings{PollInterval: time.Minute},
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	role := func(id string) awsiam.Role {
		return awsiam.NewRole(stack, jsii.String(id), &awsiam.RoleProps{AssumedBy: awsiam.NewAccountRootPrincipal()})
	}
	producer, operator, viewer, cms := role("Producer"), role("Operator"), role("HealthViewer"), role("CmsReader")
	lf.GrantPublishInputs(producer)
	lf.GrantOperator(operator)
	lf.GrantHealthRead(viewer)
	lf.Secrets()["CMSKeySecret"].GrantRead(cms, nil)
	lf.DataKeyL2().GrantDecrypt(cms)
	// A producer and the evidence provider in another account.
	otherAccount := awsiam.NewAccountPrincipal(jsii.String("111122223333"))
	lf.GrantPublishInputs(otherAccount)
	if err := lf.GrantSecretRead("EvidenceKeySecret", otherAccount); err != nil {
		t.Fatal(err)
	}
	return teamStack{app: app, stack: stack, topic: topic, bus: bus, lf: lf, producer: producer, operator: operator, viewer: viewer, cmsRd: cms}
}

// TestTeamStackEmbedsWithItsOwnConstructs is a team's scratch stack: its
// own alarm topic, event bus and VPC handed to the construct, and each
// grant helper used on a role of its own. It synthesizes cdk-nag clean
// (no AwsSolutions finding anywhere in the stack).
func TestTeamStackEmbedsWithItsOwnConstructs(t *testing.T) {
	ts := newTeamStack(t)
	app, stack, topic, bus, producer := ts.app, ts.stack, ts.topic, ts.bus, ts.producer

	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	var annotations assertions.Annotations
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("synth: %v", r)
			}
		}()
		annotations = assertions.Annotations_FromStack(stack)
	}()
	nagID := assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*"))
	for _, found := range []*[]*cxapi.SynthesisMessage{
		annotations.FindError(jsii.String("*"), nagID), annotations.FindWarning(jsii.String("*"), nagID),
	} {
		for _, m := range *found {
			line, _, _ := strings.Cut(fmt.Sprint(derefString(m.Entry.Data)), "\n")
			t.Errorf("cdk-nag finding at %s: %s", *m.Id, line)
		}
	}

	tmpl := teamTemplate(t, stack)
	resources := tmpl["Resources"].(map[string]any)
	idOf := func(c awscdk.CfnElement) string { return *stack.GetLogicalId(c) }
	topicID := idOf(topic.Node().DefaultChild().(awscdk.CfnElement))
	busID := idOf(bus.Node().DefaultChild().(awscdk.CfnElement))
	counts := map[string]int{}
	for id, r := range resources {
		res := r.(map[string]any)
		typ := res["Type"].(string)
		counts[typ]++
		props, _ := res["Properties"].(map[string]any)
		switch typ {
		case "AWS::CloudWatch::Alarm":
			if !jsonEqual(props["AlarmActions"], []any{map[string]any{"Ref": topicID}}) {
				t.Errorf("alarm %s notifies %v, want the team's topic", id, props["AlarmActions"])
			}
		case "AWS::Events::Rule":
			// (The data key's state rule matches CloudTrail events, which
			// arrive only on the account's default bus.)
			if props["EventPattern"] != nil && !isKeyStateRule(props) && !jsonEqual(props["EventBusName"], map[string]any{"Ref": busID}) {
				t.Errorf("rule %s on bus %v, want the team's", id, props["EventBusName"])
			}
		case "AWS::Lambda::Function":
			if strings.HasPrefix(fmt.Sprint(props["FunctionName"]), "team-lf-") && props["VpcConfig"] == nil {
				t.Errorf("function %v not in the VPC", props["FunctionName"])
			}
			// Lambda attaches a VPC function with its execution role: without
			// the network interface actions the deploy fails.
			roleID := props["Role"].(map[string]any)["Fn::GetAtt"].([]any)[0].(string)
			if !strings.Contains(policyOf(t, resources, roleID), `"ec2:CreateNetworkInterface"`) {
				t.Errorf("function %v: its role cannot create the VPC network interfaces", props["FunctionName"])
			}
		}
	}
	if counts["AWS::SNS::Topic"] != 1 || counts["AWS::Events::EventBus"] != 1 {
		t.Errorf("%d topics, %d buses: want only the team's", counts["AWS::SNS::Topic"], counts["AWS::Events::EventBus"])
	}
	if _, ok := tmpl["Outputs"]; ok {
		t.Errorf("outputs in the team's stack: %v", tmpl["Outputs"])
	}
	// The producer may put only the input detail-types.
	policies := jsonString(t, resources)
	for _, want := range []string{`"events:detail-type":["` + strings.Join(contract.InputDetailTypes, `","`) + `"]`,
		`"lambda:InvokeFunctionUrl"`, `"dynamodb:UpdateItem"`, `"sqs:ReceiveMessage"`, `"secretsmanager:GetSecretValue"`} {
		if !strings.Contains(policies, want) {
			t.Errorf("no %s in the team's policies", want)
		}
	}
	producerPolicy := policyOf(t, resources, idOf(producer.Node().DefaultChild().(awscdk.CfnElement)))
	for _, out := range contract.OutputDetailTypes {
		if strings.Contains(producerPolicy, out) {
			t.Errorf("producer may put %s", out)
		}
	}
}

// policyOf is the JSON of the policies attached to role id.
func policyOf(t *testing.T, resources map[string]any, roleID string) string {
	t.Helper()
	var out []string
	for _, r := range resources {
		res := r.(map[string]any)
		if res["Type"] != "AWS::IAM::Policy" {
			continue
		}
		props := res["Properties"].(map[string]any)
		if slices.ContainsFunc(props["Roles"].([]any), func(v any) bool { return jsonEqual(v, map[string]any{"Ref": roleID}) }) {
			out = append(out, jsonString(t, props["PolicyDocument"]))
		}
	}
	if len(out) == 0 {
		t.Fatalf("no policy on role %s", roleID)
	}
	return strings.Join(out, "\n")
}

// TestAlarmTopicArnFromTheSameApp: a topic ARN from a construct of the same
// app (a token) was refused as "not an SNS topic ARN"; it is now accepted.
func TestAlarmTopicArnFromTheSameApp(t *testing.T) {
	stack := awscdk.NewStack(awscdk.NewApp(nil), jsii.String("TeamPlatform"), nil)
	topic := awssns.NewTopic(stack, jsii.String("TeamAlarms"), nil)
	if _, err := localeflow.New(stack, "Localeflow", &localeflow.Props{
		AssetDir: localeflow.AssetDirForTests(), ReceiptIssuers: localeflow.IssuersForTests(), CMSBaseURL: "https://cms.team.example", EvidenceBaseURL: "https://evidence.team.example",
		AlarmTopicArn: *topic.TopicArn(),
	}); err != nil {
		t.Fatalf("a token topic ARN: %v", err)
	}
	if _, err := localeflow.New(stack, "Other", &localeflow.Props{
		Prefix:   "other",
		AssetDir: localeflow.AssetDirForTests(), ReceiptIssuers: localeflow.IssuersForTests(), CMSBaseURL: "https://cms.team.example", EvidenceBaseURL: "https://evidence.team.example",
		AlarmTopicArn: "not-an-arn",
	}); err == nil {
		t.Fatal("a literal non-ARN accepted")
	}
}

// isKeyStateRule says whether a rule's pattern is the data key's
// CloudTrail rule (source aws.kms, on the default bus).
func isKeyStateRule(props map[string]any) bool {
	p, _ := props["EventPattern"].(map[string]any)
	return jsonEqual(p["source"], []any{"aws.kms"})
}
