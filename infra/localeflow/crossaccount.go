package localeflow

import (
	"fmt"
	"slices"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/jsii-runtime-go"

	"github.com/localeflow/localeflow/contract"
)

// ErrCrossAccountUnsupported starts every refusal of a cross-account grant
// the construct cannot write (an imported bus or key, no customer-managed
// key): synth fails with it, or GrantSecretRead returns it.
const ErrCrossAccountUnsupported = "infra: cross_account_unsupported"

// secretReadActions are what a counterparty needs to read its key secret
// (GetSecretValue; DescribeSecret to find the current version).
var secretReadActions = []string{"secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"}

// otherAccount says whether grantee may be in another account than the
// construct's stack: its account differs, or one of the two is known only
// at deploy (an environment-agnostic stack and a literal account). Then an
// identity statement alone would grant nothing, and the resource's own
// policy must name the grantee.
func (l *Localeflow) otherAccount(grantee awsiam.IGrantable) (string, bool) {
	account := grantee.GrantPrincipal().PrincipalAccount()
	if account == nil {
		return "", false
	}
	cmp := awscdk.Token_CompareStrings(account, l.Stack().Account())
	return *account, cmp == awscdk.TokenComparison_DIFFERENT() || cmp == awscdk.TokenComparison_ONE_UNRESOLVED()
}

// refuse makes synth fail with msg (a grant the construct cannot write:
// failing is better than a grant that silently adds nothing).
func (l *Localeflow) refuse(msg string) {
	l.Node().AddValidation(&refusal{msg: msg})
}

// refusal is a validation that always fails with its message (a struct:
// jsii passes only structs and pointers to Go implementations).
type refusal struct{ msg string }

// Validate is constructs.IValidation.
func (r *refusal) Validate() *[]*string { return &[]*string{jsii.String(r.msg)} }

// nextSid numbers the cross-account statements of one construct.
func (l *Localeflow) nextSid(stem string) string {
	l.crossAccount++
	return fmt.Sprintf("%s%d", stem, l.crossAccount)
}

// grantPublishInputs is GrantPublishInputs. In the construct's account it
// is an identity statement on the grantee; for a grantee in another
// account it is a statement in the bus's resource policy (an
// AWS::Events::EventBusPolicy) with the same conditions, and the other
// account allows its principal events:PutEvents on the bus ARN itself. An
// imported host bus cannot take a policy from here: synth fails.
func (l *Localeflow) grantPublishInputs(grantee awsiam.IGrantable) awsiam.Grant {
	conds := map[string]any{"StringEquals": map[string]any{
		"events:source":      contract.EventSource,
		"events:detail-type": contract.InputDetailTypes,
	}}
	opts := &awsiam.GrantOnPrincipalOptions{
		Grantee: grantee, Actions: jsii.Strings(putEvents...),
		ResourceArns: &[]*string{l.EventBus.EventBusArn()}, Conditions: conditions(conds),
	}
	account, other := l.otherAccount(grantee)
	if !other {
		return awsiam.Grant_AddToPrincipal(opts)
	}
	bus, ok := l.EventBus.(awsevents.EventBus)
	if !ok {
		l.refuse(fmt.Sprintf("%s: GrantPublishInputs for account %s: the host bus %s is imported, so its resource policy cannot be written here; "+
			"add a statement allowing that account events:PutEvents with events:source = %s and events:detail-type in %v to the bus's policy "+
			"where the bus is defined (docs/integrating.md \"Producers and providers in another account\")",
			ErrCrossAccountUnsupported, account, *l.EventBus.EventBusName(), contract.EventSource, contract.InputDetailTypes))
		return awsiam.Grant_AddToPrincipal(opts)
	}
	statement := awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String(l.nextSid("LocaleflowPublishInputs")),
		Principals: &[]awsiam.IPrincipal{grantee.GrantPrincipal()},
		Actions:    jsii.Strings(putEvents...), Resources: &[]*string{bus.EventBusArn()}, Conditions: &conds,
	})
	return awsiam.Grant_AddStatementToResourcePolicy(&awsiam.GrantPolicyWithResourceOptions{
		Grantee: grantee, Actions: jsii.Strings(putEvents...), ResourceArns: &[]*string{bus.EventBusArn()},
		Resource: bus, Statement: statement,
	})
}

// GrantSecretRead lets grantee (the CMS, the event producer, the evidence
// provider) read one key secret, named by its logical id (CMSKeySecret,
// EventKeySecret, EvidenceKeySecret, ApprovalKeySecret,
// PublicationKeySecret), and decrypt it with the data key through Secrets
// Manager only.
//
// In the construct's account both are identity statements on the grantee.
// For a grantee in another account they go where that account's principal
// can be named: the secret's resource policy (AWS::SecretsManager::
// ResourcePolicy, public policies blocked) and a statement in the data
// key's policy (kms:Decrypt via secretsmanager, for this secret only); the
// other account then allows its principal secretsmanager:GetSecretValue on
// the secret ARN and kms:Decrypt on the key ARN (docs/integrating.md
// "Producers and providers in another account"). A secret encrypted with
// the AWS-managed key cannot be shared across accounts, nor can an
// imported host key take a statement from here: GrantSecretRead then
// returns an error starting with ErrCrossAccountUnsupported and grants
// nothing.
func (l *Localeflow) GrantSecretRead(secret string, grantee awsiam.IGrantable) error {
	i := slices.IndexFunc(secretSpecs, func(s secretSpec) bool { return s.Logical == secret })
	if i < 0 {
		return fmt.Errorf("infra: GrantSecretRead: no key secret %q (CMSKeySecret, EventKeySecret, EvidenceKeySecret, ApprovalKeySecret, PublicationKeySecret)", secret)
	}
	spec := secretSpecs[i]
	cfn := l.cfnSecret(secret)
	key := l.DataKeyL2()
	account, other := l.otherAccount(grantee)
	if !other {
		awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
			Grantee: grantee, Actions: jsii.Strings(secretReadActions...), ResourceArns: &[]*string{cfn.Ref()},
		})
		if key != nil {
			awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
				Grantee: grantee, Actions: jsii.Strings(secretKeyActions...), ResourceArns: &[]*string{key.KeyArn()},
				Conditions: conditions(kmsVia("secretsmanager")),
			})
		}
		return nil
	}
	if key == nil {
		return fmt.Errorf("%s: GrantSecretRead %s for account %s: the secret is encrypted with the AWS-managed key, which no other account may use; "+
			"leave CustomerManagedKey on (the default) or give HostProps.DataKey", ErrCrossAccountUnsupported, secret, account)
	}
	keyStatement := awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String(l.nextSid("CrossAccountReadsSecret")),
		Principals: &[]awsiam.IPrincipal{grantee.GrantPrincipal()},
		Actions:    jsii.Strings(secretKeyActions...), Resources: jsii.Strings("*"),
		Conditions: &map[string]any{
			"StringEquals": map[string]any{"kms:ViaService": "secretsmanager." + *awscdk.Aws_REGION() + ".amazonaws.com"},
			// The secret's ARN by pattern (its suffix is random): naming
			// the secret itself would make the key depend on the secret
			// it encrypts.
			"StringLike": map[string]any{"kms:EncryptionContext:SecretARN": "arn:" + *awscdk.Aws_PARTITION() + ":secretsmanager:" +
				*awscdk.Aws_REGION() + ":" + *l.Stack().Account() + ":secret:" + l.Topology.Prefix + "/" + spec.Stem + "-??????"},
		},
	})
	switch {
	case l.keyPolicy != nil:
		l.keyPolicy.AddStatements(keyStatement)
	case !*key.AddToResourcePolicy(keyStatement, jsii.Bool(true)).StatementAdded:
		return fmt.Errorf("%s: GrantSecretRead %s for account %s: HostProps.DataKey is imported, so its key policy cannot be written here; "+
			"add kms:Decrypt for that account with kms:ViaService = secretsmanager and kms:EncryptionContext:SecretARN = the secret's ARN where the key is defined",
			ErrCrossAccountUnsupported, secret, account)
	}
	l.secretPolicy(secret, cfn).AddStatements(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String(l.nextSid("CrossAccountReads")),
		Principals: &[]awsiam.IPrincipal{grantee.GrantPrincipal()},
		Actions:    jsii.Strings(secretReadActions...), Resources: jsii.Strings("*"),
	}))
	return nil
}

// secretPolicy is the resource policy of one secret, created on first use
// (a secret has at most one).
func (l *Localeflow) secretPolicy(logical string, secret awssecretsmanager.CfnSecret) awsiam.PolicyDocument {
	if l.secretPolicies == nil {
		l.secretPolicies = map[string]awsiam.PolicyDocument{}
	}
	if doc, ok := l.secretPolicies[logical]; ok {
		return doc
	}
	doc := awsiam.NewPolicyDocument(nil)
	awssecretsmanager.NewCfnResourcePolicy(l.Construct, jsii.String(logical+"Policy"), &awssecretsmanager.CfnResourcePolicyProps{
		SecretId: secret.Ref(), ResourcePolicy: doc, BlockPublicPolicy: jsii.Bool(true),
	})
	l.secretPolicies[logical] = doc
	return doc
}
