package localeflow

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/jsii-runtime-go"
)

// HostProps are what a team's own stack hands the construct: constructs it
// already has. All optional; NewStack's app leaves them unset.
type HostProps struct {
	// AlarmTopic is a topic every alarm notifies (created in the same app
	// or imported); the construct then creates no topic of its own.
	// Not with AlarmTopicArn or AlarmEmail.
	AlarmTopic awssns.ITopic
	// EventBus is an existing bus to use instead of creating
	// <prefix>-bus: the routing rules are added to it and the functions
	// publish on it. The CLI finds the bus by the functions' environment,
	// not by name. Other deployments may share it: the input rules and
	// the archive then match only events whose resources hold
	// contract.DeploymentResource(prefix), which producers set.
	EventBus awsevents.IEventBus
	// Vpc puts the three functions in the VPC (e.g. to reach a CMS on a
	// private network), in VpcSubnets (default: the VPC's private
	// subnets) with SecurityGroups (default: one per function, outbound
	// only). The functions then reach DynamoDB, SQS, EventBridge, Secrets
	// Manager and CloudWatch Logs through the VPC's NAT or VPC endpoints:
	// providing them is the team's part.
	Vpc            awsec2.IVpc
	VpcSubnets     *awsec2.SubnetSelection
	SecurityGroups []awsec2.ISecurityGroup
	// DataKey is the team's own KMS key (symmetric, ENCRYPT_DECRYPT) to
	// encrypt what the construct's data key would (release table, release
	// queue and its DLQ, quarantine queue, key secrets); the construct
	// then creates no key. Its key policy must let the account delegate
	// its use through IAM (the functions' roles get statements scoped by
	// kms:ViaService). EventBridge must be allowed kms:Decrypt and
	// kms:GenerateDataKey from the release-queue rules: added to the
	// policy of a key created in the same app; for an imported key synth
	// warns with the statement to add (localeflow:host-key-policy).
	DataKey awskms.IKey
	// TicketTopic is the topic of the ticket-severity alarms (created in
	// the same app or imported); nil: Props.TicketTopicArn, else the
	// construct's own <prefix>-tickets. AlarmTopic is the page topic.
	TicketTopic awssns.ITopic
	// Outputs adds the stack outputs (HealthUrl, EventBusName, table
	// names, queue URLs, secret ARNs, CmsOutageToleranceSeconds). New adds
	// none unless asked; NewStack always adds them.
	Outputs bool
}

// Secrets are the five key secrets as L2 secrets (with their data key when
// the customer-managed key is on), for grants in the construct's account:
// e.g. lf.Secrets()["CMSKeySecret"].GrantRead(role). They are imported
// views, which take no resource policy: for a principal in another
// account GrantRead adds nothing, so use GrantSecretRead, which writes the
// secret's resource policy and the key statement. Keys are the logical ids
// (CMSKeySecret, EventKeySecret, EvidenceKeySecret, ApprovalKeySecret,
// PublicationKeySecret).
func (l *Localeflow) Secrets() map[string]awssecretsmanager.ISecret {
	if l.secretsL2 != nil {
		return l.secretsL2
	}
	l.secretsL2 = map[string]awssecretsmanager.ISecret{}
	for _, s := range secretSpecs {
		cfn := l.cfnSecret(s.Logical)
		l.secretsL2[s.Logical] = awssecretsmanager.Secret_FromSecretAttributes(l.Construct, jsii.String(s.Logical+"Ref"),
			&awssecretsmanager.SecretAttributes{SecretCompleteArn: cfn.Ref(), EncryptionKey: l.DataKeyL2()})
	}
	return l.secretsL2
}

func (l *Localeflow) cfnSecret(logical string) awssecretsmanager.CfnSecret {
	switch logical {
	case "CMSKeySecret":
		return l.CMSKeySecret
	case "EventKeySecret":
		return l.EventKeySecret
	case "EvidenceKeySecret":
		return l.EvidenceKeySecret
	case "ApprovalKeySecret":
		return l.ApprovalKeySecret
	}
	return l.PublicationKeySecret
}

// DataKeyL2 is the customer-managed data key as an L2 key (grant methods):
// the host's key when HostProps.DataKey is given, nil when the key is off.
func (l *Localeflow) DataKeyL2() awskms.IKey {
	if l.hostKey != nil {
		return l.hostKey
	}
	if l.DataKey == nil {
		return nil
	}
	if l.dataKeyL2 == nil {
		// Imported by ARN: the key policy lets the account delegate use
		// through IAM, so a grant is a statement on the grantee.
		l.dataKeyL2 = awskms.Key_FromKeyArn(l.Construct, jsii.String("DataKeyRef"), l.DataKey.AttrArn())
	}
	return l.dataKeyL2
}

// GrantPublishInputs lets grantee (an event producer, the CMS) put the
// input events on the bus: events:PutEvents with events:source =
// localeflow and events:detail-type ∈ contract.InputDetailTypes
// (change.dispatched, plan.accepted, job.completed, change.hint). The
// grantee cannot put the output events consumers trust. A grantee in
// another account is named in the bus's resource policy instead
// (crossaccount.go); an imported host bus makes synth fail with
// ErrCrossAccountUnsupported.
func (l *Localeflow) GrantPublishInputs(grantee awsiam.IGrantable) awsiam.Grant {
	return l.grantPublishInputs(grantee)
}

// GrantHealthRead lets grantee open the health page: InvokeFunctionUrl on
// the health function (the URL is AWS_IAM; `localeflow health --serve`
// signs with the caller's credentials).
func (l *Localeflow) GrantHealthRead(grantee awsiam.IGrantable) awsiam.Grant {
	return l.HealthURL.GrantInvokeUrl(grantee)
}

// operatorTableActions are what the `localeflow` CLI does on both tables:
// status, list, audit and health read (GetItem, BatchGetItem, Query, Scan,
// DescribeTable); ack and requeue write (UpdateItem, PutItem, the
// acknowledgement transaction's ConditionCheckItem).
var operatorTableActions = []string{
	"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query", "dynamodb:Scan", "dynamodb:DescribeTable",
	"dynamodb:UpdateItem", "dynamodb:PutItem", "dynamodb:ConditionCheckItem",
}

// operatorQueueActions: `localeflow quarantine list/replay` and `localeflow
// dlq list/redrive` receive, hide and delete messages.
var operatorQueueActions = []string{
	"sqs:GetQueueUrl", "sqs:GetQueueAttributes", "sqs:ReceiveMessage", "sqs:ChangeMessageVisibility", "sqs:DeleteMessage",
}

// GrantOperator grants what the `localeflow` CLI needs (README.md,
// "Operating"): read and acknowledge records in both tables and their
// indexes, list and replay the quarantine queue and the DLQs (send to the
// work queues), replay the bus archive, open the health page, and use the
// data key for those services. It returns one Grant per statement.
func (l *Localeflow) GrantOperator(grantee awsiam.IGrantable) []awsiam.Grant {
	var tableArns []*string
	for _, t := range []awsdynamodb.Table{l.MonitorTable, l.ReleaseTable} {
		tableArns = append(tableArns, t.TableArn())
	}
	for _, t := range l.Topology.Tables() {
		table := l.MonitorTable
		if t.Logical == l.Topology.Release.Logical {
			table = l.ReleaseTable
		}
		for _, ix := range t.Indexes {
			tableArns = append(tableArns, indexArn(table, ix.Name))
		}
	}
	grants := []awsiam.Grant{
		awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
			Grantee: grantee, Actions: jsii.Strings(operatorTableActions...), ResourceArns: &tableArns,
		}),
		awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
			Grantee: grantee, Actions: jsii.Strings(operatorQueueActions...),
			ResourceArns: &[]*string{l.QuarantineQueue.QueueArn(), l.PollDLQ.QueueArn(), l.ReleaseDLQ.QueueArn(), l.EventDLQ.QueueArn()},
		}),
		awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
			Grantee: grantee, Actions: jsii.Strings(append([]string{"sqs:GetQueueUrl"}, sendAction...)...),
			ResourceArns: &[]*string{l.PollQueue.QueueArn(), l.ReleaseQueue.QueueArn()},
		}),
		// `localeflow replay`: StartReplay of the bus archive's input events.
		awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
			Grantee: grantee, Actions: jsii.Strings("events:StartReplay"), ResourceArns: &[]*string{l.EventArchive.ArchiveArn()},
		}),
		// `localeflow replay` first reads the archive (DescribeArchive: its
		// source bus, the deployment's or the host's) and checks the input
		// rules it replays to (DescribeRule) on that bus.
		awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
			Grantee: grantee, Actions: jsii.Strings("events:DescribeArchive"), ResourceArns: &[]*string{l.EventArchive.ArchiveArn()},
		}),
		awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
			Grantee: grantee, Actions: jsii.Strings("events:DescribeRule"), ResourceArns: l.ruleArns(),
		}),
		// `localeflow keys` names each key secret by reference (ARN, version
		// ids): its metadata, not its value; the public keys of the Ed25519
		// sets it reads from their public-key secrets (the coordinator
		// publishes them), never a seed.
		awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
			Grantee: grantee, Actions: jsii.Strings("secretsmanager:DescribeSecret"), ResourceArns: l.secretArns(),
		}),
		awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
			Grantee: grantee, Actions: jsii.Strings("secretsmanager:GetSecretValue"),
			ResourceArns: &[]*string{l.ApprovalPublicKeySecret.Ref(), l.PublicationPublicKeySecret.Ref()},
		}),
		l.GrantHealthRead(grantee),
	}
	if key := l.DataKeyL2(); key != nil {
		grants = append(grants, awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
			Grantee: grantee, Actions: jsii.Strings(queueKeyActions...), ResourceArns: &[]*string{key.KeyArn()},
			Conditions: conditions(kmsVia("sqs", "dynamodb")),
		}))
	}
	return grants
}

// secretArns are the ARNs of the five key secrets.
func (l *Localeflow) secretArns() *[]*string {
	var arns []*string
	for _, s := range secretSpecs {
		arns = append(arns, l.cfnSecret(s.Logical).Ref())
	}
	return &arns
}

// ruleArns are the ARNs of the deployment's input rules (on its bus or the
// host's: rule/<bus>/<rule>).
func (l *Localeflow) ruleArns() *[]*string {
	var arns []*string
	for _, r := range l.Topology.Rules {
		arns = append(arns, l.Stack().FormatArn(&awscdk.ArnComponents{
			Service: jsii.String("events"), Resource: jsii.String("rule"),
			ResourceName: jsii.String(*l.EventBus.EventBusName() + "/" + r.Name), ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME,
		}))
	}
	return &arns
}

// conditions converts a condition block to Grant's form.
func conditions(c map[string]any) *map[string]*map[string]any {
	out := map[string]*map[string]any{}
	for op, v := range c {
		m := v.(map[string]any)
		out[op] = &m
	}
	return &out
}
