package localeflow

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/localeflow/localeflow/topology"
)

// publicKeyActions: the coordinator reads its public-key secret and writes
// it when the set it loaded differs (functions/coordinator publickeys.go).
var publicKeyActions = []string{"secretsmanager:GetSecretValue", "secretsmanager:PutSecretValue"}

// reasonPublicKeyRotation: the public-key secrets follow the seeds.
const reasonPublicKeyRotation = "public keys, no secret: the coordinator rewrites them from the seed set it loads at each cold start"

// addPublicKeySecrets adds, for each Ed25519 seed secret, the secret
// <prefix>/<stem>-public-key that holds its public keys (hex, the signing
// key first: topology.Secret.PublicStem), created with the placeholder
// topology.PublicKeysUnpublished and written by the coordinator at cold
// start, so that an operator reads the public keys (`localeflow keys`)
// without access to the seeds. They hold no key material: AWS-managed
// encryption, no SecretString of a key in the template. The coordinator
// may read and write them (and nothing else of them).
func (b *builder) addPublicKeySecrets() map[string]awssecretsmanager.CfnSecret {
	out := map[string]awssecretsmanager.CfnSecret{}
	for _, s := range topology.Secrets {
		if s.PublicStem == "" {
			continue
		}
		secret := awssecretsmanager.NewCfnSecret(b.scope, jsii.String(s.PublicLogical), &awssecretsmanager.CfnSecretProps{
			Name: jsii.String(b.cfg.topo.PublicKeySecretName(s)),
			Description: jsii.String(fmt.Sprintf("Ed25519 public keys of %s (hex, signing key first; no key material), written by the coordinator at cold start",
				b.cfg.topo.SecretName(s))),
			SecretString: jsii.String(topology.PublicKeysUnpublished),
		})
		secret.ApplyRemovalPolicy(b.removal, nil)
		b.allow("coordinator", "Publish"+s.PublicLogical, publicKeyActions, secret.Ref())
		cdknag.NagSuppressions_AddResourceSuppressions(secret, &[]*cdknag.NagPackSuppression{
			{Id: jsii.String("AwsSolutions-SMG4"), Reason: jsii.String(reasonPublicKeyRotation)},
		}, jsii.Bool(false))
		if b.cfg.outputs {
			awscdk.NewCfnOutput(b.scope, jsii.String(s.PublicLogical+"Arn"), &awscdk.CfnOutputProps{Value: secret.Ref()})
		}
		out[s.PublicLogical] = secret
	}
	return out
}
