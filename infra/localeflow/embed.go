package localeflow

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/jsii-runtime-go"

	"github.com/localeflow/localeflow/contract"
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
// the customer-managed key is on), for grants: e.g.
// lf.Secrets()["CMSKeySecret"].GrantRead(role). Keys are the logical ids
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

// DataKeyL2 is the customer-managed data key as an L2 key (grant methods),
// nil when the key is off.
func (l *Localeflow) DataKeyL2() awskms.IKey {
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
// grantee cannot put the output events consumers trust.
func (l *Localeflow) GrantPublishInputs(grantee awsiam.IGrantable) awsiam.Grant {
	return awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
		Grantee:      grantee,
		Actions:      jsii.Strings(putEvents...),
		ResourceArns: &[]*string{l.EventBus.EventBusArn()},
		Conditions: conditions(map[string]any{"StringEquals": map[string]any{
			"events:source":      contract.EventSource,
			"events:detail-type": contract.InputDetailTypes,
		}}),
	})
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
		l.GrantHealthRead(grantee),
	}
	if l.DataKey != nil {
		grants = append(grants, awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
			Grantee: grantee, Actions: jsii.Strings(queueKeyActions...), ResourceArns: &[]*string{l.DataKey.AttrArn()},
			Conditions: conditions(kmsVia("sqs", "dynamodb")),
		}))
	}
	return grants
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
