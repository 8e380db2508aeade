package localeflow

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// Reasons for the cdk-nag AwsSolutions findings this stack accepts. Every
// other finding fails TestNagAwsSolutions.
const (
	// AwsSolutions-SQS4 only recognises a TLS-only queue policy whose Deny
	// names the action as `sqs:*` or `*`. This stack forbids wildcard actions
	// in every statement, so the Deny on aws:SecureTransport=false lists every
	// SQS action that applies to a queue (sqsActions): the same protection,
	// written out.
	reasonSQSTLS = "TLS is required by an explicit Deny of every SQS queue action when aws:SecureTransport is false; " +
		"the action list is written out because the stack allows no wildcard actions, which this rule does not recognise"
	// AwsSolutions-SQS3 wants a DLQ on every queue that is not one. The
	// quarantine queue has no consumer: nothing receives its messages
	// except an operator's list/replay, so nothing could move them to a DLQ;
	// it is itself the end of the line for rejected messages.
	reasonQuarantineNoDLQ = "the quarantine queue has no consumer (only an operator lists and replays it), so no receive " +
		"could ever move a message to a DLQ; it is itself the dead end for rejected messages, kept 14 days"
	// The event DLQ is the dead-letter queue of the rule targets: it has no
	// consumer either (an operator lists and redrives it).
	reasonEventDLQNoDLQ = "the event DLQ is itself the dead-letter queue of every EventBridge rule target; it has no consumer " +
		"(only an operator lists and redrives it with localeflow dlq), kept 14 days"
	// AwsSolutions-IAM5: active tracing adds xray:PutTraceSegments and
	// xray:PutTelemetryRecords on "*"; X-Ray supports no resource-level
	// permission for them.
	reasonXRayResource = "active X-Ray tracing: xray:PutTraceSegments and xray:PutTelemetryRecords support no resource-level " +
		"permissions, so they can only be granted on *; no other action of these roles has a wildcard resource"
	// AwsSolutions-SMG4 wants a rotation Lambda. These secrets are not
	// database passwords: the HMAC keys are shared with the CMS and the event
	// producer, and the Ed25519 keys' public halves are pinned by the CMS
	// verifiers, so a unilateral automatic rotation would break every
	// signature. Rotation is the coordinated manual procedure in README.md.
	reasonSecretRotation = "key material shared with or pinned by external parties (CMS, event producer, signature verifiers); " +
		"rotation is a coordinated manual procedure (infra/README.md), an automatic unilateral rotation would break signatures"
)

// AwsSolutions-SNS2 wants server-side encryption with a KMS key on the alarm
// topic. CloudWatch alarms can publish to an encrypted topic only through a
// customer-managed key whose policy admits cloudwatch.amazonaws.com (the
// AWS-managed aws/sns key cannot grant it); the stack's data key is for
// content (texts, key material) and admits no other service than
// EventBridge for the release queue. The topic carries alarm names and
// states only, no content.
const reasonAlarmTopicSSE = "alarm notifications (alarm names and states, no content) cannot be published by CloudWatch to a topic " +
	"encrypted with the AWS-managed key, and the stack's customer-managed key is reserved for content; TLS is enforced on the topic"

// vpcNetworkInterfaceActions are what Lambda does with the execution role
// to attach a function to a VPC (the actions of the AWS managed policy
// AWSLambdaVPCAccessExecutionRole, which this stack does not attach: no
// managed policies).
var vpcNetworkInterfaceActions = []string{
	"ec2:CreateNetworkInterface", "ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets", "ec2:DeleteNetworkInterface",
	"ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses",
}

// AwsSolutions-IAM5 flags the Resource "*" of the VPC statement: the
// Describe actions support no resource-level permission and the network
// interfaces Lambda creates have no ARN before they exist (AWS's own
// AWSLambdaVPCAccessExecutionRole grants the same on "*").
const reasonVpcNetworkInterfaces = "Lambda creates and deletes the function's network interfaces with the execution role; " +
	"the ec2 Describe actions support no resource-level permissions and the interfaces have no ARN before they exist " +
	"(the same as AWS's AWSLambdaVPCAccessExecutionRole, which this stack does not attach)"

// allowVpcNetworkInterfaces lets Lambda attach the function of role to
// the host's VPC (HostProps.Vpc).
func allowVpcNetworkInterfaces(role awsiam.Role) {
	role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("VpcNetworkInterfaces"),
		Actions:   jsii.Strings(vpcNetworkInterfaceActions...),
		Resources: jsii.Strings("*"),
	}))
	cdknag.NagSuppressions_AddResourceSuppressions(role, &[]*cdknag.NagPackSuppression{
		{Id: jsii.String("AwsSolutions-IAM5"), Reason: jsii.String(reasonVpcNetworkInterfaces), AppliesTo: &[]any{"Resource::*"}},
	}, jsii.Bool(true))
}

// suppressFindings records the accepted findings on the constructs they
// concern, so they travel with the stack (synth and tests alike).
func (b *builder) suppressFindings() {
	for _, q := range b.cfg.topo.Queues() {
		for _, queue := range []any{b.queues[q.Logical], b.dlqs[q.Logical]} {
			cdknag.NagSuppressions_AddResourceSuppressions(queue, &[]*cdknag.NagPackSuppression{
				{Id: jsii.String("AwsSolutions-SQS4"), Reason: jsii.String(reasonSQSTLS)},
			}, jsii.Bool(true))
		}
	}
	cdknag.NagSuppressions_AddResourceSuppressions(b.quarantine, &[]*cdknag.NagPackSuppression{
		{Id: jsii.String("AwsSolutions-SQS4"), Reason: jsii.String(reasonSQSTLS)},
		{Id: jsii.String("AwsSolutions-SQS3"), Reason: jsii.String(reasonQuarantineNoDLQ)},
	}, jsii.Bool(true))
	cdknag.NagSuppressions_AddResourceSuppressions(b.eventDLQ, &[]*cdknag.NagPackSuppression{
		{Id: jsii.String("AwsSolutions-SQS4"), Reason: jsii.String(reasonSQSTLS)},
		{Id: jsii.String("AwsSolutions-SQS3"), Reason: jsii.String(reasonEventDLQNoDLQ)},
	}, jsii.Bool(true))
	for _, role := range b.roles {
		cdknag.NagSuppressions_AddResourceSuppressions(role, &[]*cdknag.NagPackSuppression{
			{Id: jsii.String("AwsSolutions-IAM5"), Reason: jsii.String(reasonXRayResource), AppliesTo: &[]any{jsii.String("Resource::*")}},
		}, jsii.Bool(true))
	}
	if b.alarmTopic != nil {
		cdknag.NagSuppressions_AddResourceSuppressions(b.alarmTopic, &[]*cdknag.NagPackSuppression{
			{Id: jsii.String("AwsSolutions-SNS2"), Reason: jsii.String(reasonAlarmTopicSSE)},
		}, jsii.Bool(true))
	}
	for _, s := range secretSpecs {
		cdknag.NagSuppressions_AddResourceSuppressions(b.secrets[s.Logical], &[]*cdknag.NagPackSuppression{
			{Id: jsii.String("AwsSolutions-SMG4"), Reason: jsii.String(reasonSecretRotation)},
		}, jsii.Bool(false))
	}
}
