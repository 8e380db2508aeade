package localeflow_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/cxapi"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/localeflow/localeflow/infra/localeflow"
)

// teamTemplate synthesizes stack and returns its template as JSON.
func teamTemplate(t *testing.T, stack awscdk.Stack) map[string]any {
	t.Helper()
	var raw map[string]any
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("synth: %v", r)
			}
		}()
		b, err := json.Marshal(assertions.Template_FromStack(stack, nil).ToJSON())
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &raw); err != nil {
			t.Fatal(err)
		}
	}()
	return raw
}

// TestTeamStackImportsTheConstruct is what a team does to run localeflow
// inside its own stack: import the package, put the construct next to its
// own resources, set props, and wire its resources to the ones the
// construct returns.
func TestTeamStackImportsTheConstruct(t *testing.T) {
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("TeamPlatform"), &awscdk.StackProps{
		Description: jsii.String("the team's own stack"),
	})
	own := awssqs.NewQueue(stack, jsii.String("TeamQueue"), &awssqs.QueueProps{EnforceSSL: jsii.Bool(true)})
	lf, err := localeflow.New(stack, "Localeflow", &localeflow.Props{
		Prefix:   "team-lf",
		AssetDir: localeflow.AssetDirForTests(), ReceiptIssuers: localeflow.IssuersForTests(),
		CMSBaseURL:         "https://cms.team.example",
		EvidenceBaseURL:    "https://evidence.team.example",
		DeletionProtection: jsii.Bool(false),
		CustomerManagedKey: jsii.Bool(true),
		Functions:          map[string]localeflow.FunctionOptions{"poller": {MemoryMB: 512}},
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if *lf.Stack().Node().Path() != *stack.Node().Path() {
		t.Fatalf("construct in stack %s, want the team's %s", *lf.Stack().Node().Path(), *stack.Node().Path())
	}
	// Every resource a team wires to is returned.
	for name, v := range map[string]any{
		"MonitorTable": lf.MonitorTable, "ReleaseTable": lf.ReleaseTable,
		"PollQueue": lf.PollQueue, "PollDLQ": lf.PollDLQ, "ReleaseQueue": lf.ReleaseQueue, "ReleaseDLQ": lf.ReleaseDLQ,
		"QuarantineQueue": lf.QuarantineQueue, "EventBus": lf.EventBus,
		"Poller": lf.Poller, "Coordinator": lf.Coordinator, "Health": lf.Health, "HealthURL": lf.HealthURL,
		"CMSKeySecret": lf.CMSKeySecret, "EventKeySecret": lf.EventKeySecret, "EvidenceKeySecret": lf.EvidenceKeySecret,
		"ApprovalKeySecret": lf.ApprovalKeySecret, "PublicationKeySecret": lf.PublicationKeySecret,
		"DataKey": lf.DataKey, "AlarmTopic": lf.AlarmTopic, "Dashboard": lf.Dashboard,
	} {
		if v == nil {
			t.Errorf("%s not returned", name)
		}
	}
	if len(lf.Alarms) == 0 {
		t.Error("no alarms returned")
	}
	if lf.Topology.Prefix != "team-lf" {
		t.Errorf("topology prefix %q", lf.Topology.Prefix)
	}
	// The team wires its own role and outputs to the returned resources.
	operator := awsiam.NewRole(stack, jsii.String("OperatorRole"), &awsiam.RoleProps{
		AssumedBy: awsiam.NewAccountRootPrincipal(),
	})
	lf.HealthURL.GrantInvokeUrl(operator)
	lf.EventBus.GrantPutEventsTo(operator, nil)
	awscdk.NewCfnOutput(stack, jsii.String("TeamMonitorTable"), &awscdk.CfnOutputProps{Value: lf.MonitorTable.TableName()})
	awscdk.NewCfnOutput(stack, jsii.String("TeamQueueUrl"), &awscdk.CfnOutputProps{Value: own.QueueUrl()})

	tmpl := teamTemplate(t, stack)
	resources := tmpl["Resources"].(map[string]any)
	idOf := func(el awscdk.CfnElement) string { return *stack.GetLogicalId(el) }
	monitorID := idOf(lf.MonitorTable.Node().DefaultChild().(awscdk.CfnElement))
	table, ok := resources[monitorID].(map[string]any)
	if !ok {
		t.Fatalf("monitor table %s not in the team's template", monitorID)
	}
	if name := table["Properties"].(map[string]any)["TableName"]; name != lf.Topology.Monitor.Name || !strings.HasPrefix(lf.Topology.Monitor.Name, "team-lf-") {
		t.Errorf("monitor table name %v, want %s", name, lf.Topology.Monitor.Name)
	}
	// The construct's id is part of its logical IDs: two constructs (two
	// prefixes) fit in one stack.
	if !strings.HasPrefix(monitorID, "Localeflow") {
		t.Errorf("monitor table logical id %s lacks the construct's path", monitorID)
	}
	counts := map[string]int{}
	for _, r := range resources {
		counts[r.(map[string]any)["Type"].(string)]++
	}
	for typ, want := range map[string]int{
		"AWS::DynamoDB::Table":        2,
		"AWS::SQS::Queue":             7, // six of localeflow's (the event DLQ among them), one of the team's
		"AWS::Lambda::Function":       3,
		"AWS::Lambda::Url":            1,
		"AWS::Events::EventBus":       1,
		"AWS::KMS::Key":               1,
		"AWS::SNS::Topic":             2, // pages and tickets
		"AWS::IAM::Role":              4, // three function roles, the team's operator
		"AWS::CloudWatch::Dashboard":  1,
		"AWS::SecretsManager::Secret": 7, // five key secrets, two public-key secrets
	} {
		if counts[typ] != want {
			t.Errorf("%d %s, want %d", counts[typ], typ, want)
		}
	}
	for id, r := range resources {
		props, _ := r.(map[string]any)["Properties"].(map[string]any)
		if r.(map[string]any)["Type"] == "AWS::Lambda::Function" && props["FunctionName"] == "team-lf-poller" && props["MemorySize"] != 512.0 {
			t.Errorf("poller %s memory %v, want the team's 512", id, props["MemorySize"])
		}
	}
	// The construct's outputs and the team's own.
	outputs := tmpl["Outputs"].(map[string]any)
	for _, want := range []string{"TeamMonitorTable", "TeamQueueUrl"} {
		if _, ok := outputs[want]; !ok {
			t.Errorf("output %s missing", want)
		}
	}
	if got := outputs["TeamMonitorTable"].(map[string]any)["Value"]; !jsonEqual(got, map[string]any{"Ref": monitorID}) {
		t.Errorf("team output = %v, want a Ref to %s", got, monitorID)
	}
	// No outputs of the construct's own unless asked (HostProps.Outputs):
	// they would land in the team's stack.
	for id := range outputs {
		if strings.HasPrefix(id, "Localeflow") {
			t.Errorf("construct output %s without Outputs", id)
		}
	}
	// The team's operator may invoke the health URL and put events.
	policy := jsonString(t, resources)
	for _, action := range []string{"lambda:InvokeFunctionUrl", "events:PutEvents"} {
		if !strings.Contains(policy, `"`+action+`"`) {
			t.Errorf("no %s grant in the template", action)
		}
	}
}

// TestTeamStackNagFindingsAreTheTeams: in a team's stack, cdk-nag reports
// nothing under the construct (the team's own queue without a DLQ is
// reported, which shows the check ran).
func TestTeamStackNagFindingsAreTheTeams(t *testing.T) {
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("TeamPlatform"), nil)
	awssqs.NewQueue(stack, jsii.String("TeamQueue"), &awssqs.QueueProps{EnforceSSL: jsii.Bool(true)})
	if _, err := localeflow.New(stack, "Localeflow", &localeflow.Props{
		Prefix:   "team-lf",
		AssetDir: localeflow.AssetDirForTests(), ReceiptIssuers: localeflow.IssuersForTests(),
		CMSBaseURL:      "https://cms.team.example",
		EvidenceBaseURL: "https://evidence.team.example",
	}); err != nil {
		t.Fatal(err)
	}
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
	teams := 0
	for _, found := range []*[]*cxapi.SynthesisMessage{
		annotations.FindError(jsii.String("*"), nagID),
		annotations.FindWarning(jsii.String("*"), nagID),
	} {
		for _, m := range *found {
			if strings.HasPrefix(*m.Id, "/TeamPlatform/Localeflow/") {
				line, _, _ := strings.Cut(fmt.Sprint(derefString(m.Entry.Data)), "\n")
				t.Errorf("cdk-nag finding in the construct at %s: %s", *m.Id, line)
			} else if strings.HasPrefix(*m.Id, "/TeamPlatform/TeamQueue/") {
				teams++
			}
		}
	}
	if teams == 0 {
		t.Error("cdk-nag reported nothing on the team's queue without a DLQ: did the check run?")
	}
}

func derefString(v any) any {
	if p, ok := v.(*string); ok && p != nil {
		return *p
	}
	return v
}

// TestTwoDeploymentsInOneStack: two constructs with two prefixes share one
// stack; every name and logical ID stays apart.
func TestTwoDeploymentsInOneStack(t *testing.T) {
	stack := awscdk.NewStack(awscdk.NewApp(nil), jsii.String("TeamPlatform"), nil)
	for _, prefix := range []string{"team-a", "team-b"} {
		if _, err := localeflow.New(stack, prefix, &localeflow.Props{
			Prefix:   prefix,
			AssetDir: localeflow.AssetDirForTests(), ReceiptIssuers: localeflow.IssuersForTests(),
			CMSBaseURL:      "https://cms.team.example",
			EvidenceBaseURL: "https://evidence.team.example",
			HostProps:       localeflow.HostProps{Outputs: true},
		}); err != nil {
			t.Fatalf("%s: %v", prefix, err)
		}
	}
	tmpl := teamTemplate(t, stack)
	names := map[string]string{}
	tables := 0
	for id, r := range tmpl["Resources"].(map[string]any) {
		res := r.(map[string]any)
		props, _ := res["Properties"].(map[string]any)
		for _, field := range []string{"TableName", "QueueName", "FunctionName", "Name", "AlarmName", "AliasName", "LogGroupName", "DashboardName", "TopicName"} {
			name, ok := props[field].(string)
			if !ok {
				continue
			}
			key := res["Type"].(string) + " " + name
			if other, dup := names[key]; dup {
				t.Errorf("%s named by both %s and %s", key, other, id)
			}
			names[key] = id
		}
		if res["Type"] == "AWS::DynamoDB::Table" {
			tables++
		}
	}
	if tables != 4 || len(names) < 2*30 {
		t.Errorf("%d tables (want 2 per deployment), %d names", tables, len(names))
	}
	if len(tmpl["Outputs"].(map[string]any)) < 2*7 {
		t.Errorf("outputs %v", tmpl["Outputs"])
	}
}

// TestNewRejectsBadInput: New returns errors, never panics, on a missing
// scope, id or props and on invalid props.
func TestNewRejectsBadInput(t *testing.T) {
	valid := func() *localeflow.Props {
		return &localeflow.Props{AssetDir: localeflow.AssetDirForTests(), ReceiptIssuers: localeflow.IssuersForTests(), CMSBaseURL: "https://cms.example.com", EvidenceBaseURL: "https://ev.example.com"}
	}
	stack := awscdk.NewStack(awscdk.NewApp(nil), jsii.String("Team"), nil)
	for name, call := range map[string]func(t *testing.T) error{
		"nil scope": func(*testing.T) error { _, err := localeflow.New(nil, "Localeflow", valid()); return err },
		"empty id":  func(*testing.T) error { _, err := localeflow.New(stack, "", valid()); return err },
		"nil props": func(*testing.T) error { _, err := localeflow.New(stack, "Localeflow", nil); return err },
		"bad prefix": func(*testing.T) error {
			p := valid()
			p.Prefix = "Bad_Prefix"
			_, err := localeflow.New(stack, "Localeflow", p)
			return err
		},
		"duplicate id": func(t *testing.T) error {
			if _, err := localeflow.New(stack, "Taken", valid()); err != nil {
				t.Fatalf("first New: %v", err)
			}
			_, err := localeflow.New(stack, "Taken", valid())
			return err
		},
		"duplicate stack id": func(*testing.T) error {
			app := awscdk.NewApp(nil)
			awscdk.NewStack(app, jsii.String("Localeflow"), nil)
			_, err := localeflow.NewStack(app, "Localeflow", &localeflow.StackProps{Props: *valid()})
			return err
		},
		"nil stack props": func(*testing.T) error {
			_, err := localeflow.NewStack(awscdk.NewApp(nil), "Localeflow", nil)
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			if err := call(t); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func jsonString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func jsonEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}
