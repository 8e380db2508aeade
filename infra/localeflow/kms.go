package localeflow

import (
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
)

// DataKeyLogical is the construct id of the customer-managed KMS key.
const DataKeyLogical = "DataKey"

// keyAdminActions let the account (through IAM) administer the key. They are
// written out because the stack allows no wildcard action; kms:PutKeyPolicy
// keeps the key manageable (no lock-out).
var keyAdminActions = []string{
	"kms:CancelKeyDeletion", "kms:CreateAlias", "kms:CreateGrant", "kms:DeleteAlias", "kms:DescribeKey",
	"kms:DisableKey", "kms:DisableKeyRotation", "kms:EnableKey", "kms:EnableKeyRotation",
	"kms:GetKeyPolicy", "kms:GetKeyRotationStatus", "kms:ListAliases", "kms:ListGrants",
	"kms:ListKeyPolicies", "kms:ListKeyRotations", "kms:ListResourceTags", "kms:PutKeyPolicy",
	"kms:RetireGrant", "kms:RevokeGrant", "kms:RotateKeyOnDemand", "kms:ScheduleKeyDeletion",
	"kms:TagResource", "kms:UntagResource", "kms:UpdateAlias", "kms:UpdateKeyDescription",
}

// keyUseActions are the cryptographic actions the account may delegate to
// its IAM principals (each function's role gets only what it needs, per
// service, in grant()).
var keyUseActions = []string{
	"kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:GenerateDataKeyWithoutPlaintext",
	"kms:ReEncryptFrom", "kms:ReEncryptTo",
}

// eventsKeyActions: EventBridge delivering to a KMS-encrypted queue.
var eventsKeyActions = []string{"kms:Decrypt", "kms:GenerateDataKey"}

// addKey creates the customer-managed key of the stack's content: the
// release table (source and result texts), the release queue and its DLQ,
// the quarantine queue (rejected bodies may carry texts) and the key
// secrets. Automatic rotation is on; it is retained with the other
// stateful resources when deletion protection is on.
//
// The key policy is written here instead of CDK's default (which grants
// kms:*): the account administers it and may delegate its use through IAM,
// and EventBridge may use it only for the rules that target the release
// queue (aws:SourceArn, built from the rule names so the key does not
// depend on the rules).
func (b *builder) addKey() {
	topo := b.cfg.topo
	account := awsiam.NewAccountRootPrincipal()
	var ruleArns []*string
	var ruleNames []string
	for _, r := range topo.Rules {
		if r.TargetQueue == topo.RelQueue.Logical {
			ruleNames = append(ruleNames, r.Name)
			ruleArns = append(ruleArns, jsii.String("arn:"+*awscdk.Aws_PARTITION()+":events:"+*awscdk.Aws_REGION()+":"+
				*awscdk.Aws_ACCOUNT_ID()+":rule/"+b.busName()+"/"+r.Name))
		}
	}
	var events awsiam.PolicyStatement
	if len(ruleArns) > 0 {
		events = awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:        jsii.String("EventBridgeDeliversToReleaseQueue"),
			Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("events.amazonaws.com"), nil)},
			Actions:    jsii.Strings(eventsKeyActions...), Resources: jsii.Strings("*"),
			Conditions: &map[string]any{"ArnEquals": map[string]any{"aws:SourceArn": ruleArns}},
		})
	}
	if host := b.cfg.host.DataKey; host != nil {
		// The host's key: its policy is the host's. A key of the same
		// app takes the EventBridge statement; an imported one cannot,
		// and the team adds it (synth says so).
		b.hostKey = host
		if events != nil && !*host.AddToResourcePolicy(events, jsii.Bool(true)).StatementAdded {
			awscdk.Annotations_Of(b.scope).AddWarningV2(jsii.String("localeflow:host-key-policy"), jsii.String(
				"HostProps.DataKey is imported: add to its key policy a statement allowing events.amazonaws.com kms:Decrypt and kms:GenerateDataKey "+
					"with aws:SourceArn = the ARN of the rule "+strings.Join(ruleNames, ", ")+" (the release queue is encrypted with the key; "+
					"without it EventBridge cannot deliver plan.accepted/job.completed to it)"), nil)
		}
		return
	}
	statements := []awsiam.PolicyStatement{
		awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid: jsii.String("AccountAdministers"), Principals: &[]awsiam.IPrincipal{account},
			Actions: jsii.Strings(keyAdminActions...), Resources: jsii.Strings("*"),
		}),
		awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid: jsii.String("AccountDelegatesUse"), Principals: &[]awsiam.IPrincipal{account},
			Actions: jsii.Strings(keyUseActions...), Resources: jsii.Strings("*"),
		}),
	}
	if events != nil {
		statements = append(statements, events)
	}
	b.keyPolicy = awsiam.NewPolicyDocument(&awsiam.PolicyDocumentProps{Statements: &statements})
	b.key = awskms.NewCfnKey(b.scope, jsii.String(DataKeyLogical), &awskms.CfnKeyProps{
		Description:       jsii.String("localeflow " + topo.Prefix + ": release table, release and quarantine queues, key secrets"),
		EnableKeyRotation: jsii.Bool(true),
		KeyPolicy:         b.keyPolicy,
	})
	b.key.ApplyRemovalPolicy(b.removal, nil)
	awskms.NewCfnAlias(b.scope, jsii.String(DataKeyLogical+"Alias"), &awskms.CfnAliasProps{
		AliasName:   jsii.String("alias/" + topo.Prefix + "-data"),
		TargetKeyId: b.key.Ref(),
	})
}

// keyArn is the data key's ARN: the construct's key, the host's
// (HostProps.DataKey), or nil when the key is off.
func (b *builder) keyArn() *string {
	if b.hostKey != nil {
		return b.hostKey.KeyArn()
	}
	if b.key == nil {
		return nil
	}
	return b.key.AttrArn()
}

// encryptQueue switches q from SQS-managed encryption to the data key. It
// sets the CloudFormation property directly: handing the key to the L2
// queue would make CDK's grant helpers add their own (wildcard) key grants.
func (b *builder) encryptQueue(q awssqs.Queue) {
	if b.keyArn() == nil {
		return
	}
	cfn := q.Node().DefaultChild().(awssqs.CfnQueue)
	cfn.AddPropertyDeletionOverride(jsii.String("SqsManagedSseEnabled"))
	cfn.SetKmsMasterKeyId(b.keyArn())
	cfn.SetKmsDataKeyReusePeriodSeconds(jsii.Number(300))
}

// encryptTable encrypts t with the data key (SSE-KMS).
func (b *builder) encryptTable(t awsdynamodb.Table) {
	if b.keyArn() == nil {
		return
	}
	cfn := t.Node().DefaultChild().(awsdynamodb.CfnTable)
	cfn.SetSseSpecification(&awsdynamodb.CfnTable_SSESpecificationProperty{
		SseEnabled: jsii.Bool(true), SseType: jsii.String("KMS"), KmsMasterKeyId: b.keyArn(),
	})
}

// kmsVia restricts a key grant to requests a service makes for the role.
func kmsVia(services ...string) map[string]any {
	via := make([]*string, 0, len(services))
	for _, s := range services {
		via = append(via, jsii.String(s+"."+*awscdk.Aws_REGION()+".amazonaws.com"))
	}
	return map[string]any{"StringEquals": map[string]any{"kms:ViaService": via}}
}

// busName is the bus's name: the topology's, or the host's bus (a token
// when created in the same app).
func (b *builder) busName() string {
	if b.cfg.host.EventBus != nil {
		return *b.cfg.host.EventBus.EventBusName()
	}
	return b.cfg.topo.BusName
}
