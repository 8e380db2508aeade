package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"

	"github.com/localeflow/localeflow/adapters/secretkey"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/topology"
)

// Codes of `localeflow keys`.
const (
	// codeSecretMissing: a key secret of the deployment does not exist
	// (wrong --prefix, or not deployed yet).
	codeSecretMissing = "cli.secret_missing"
	// codeSecretUnavailable: Secrets Manager could not be read (access
	// denied, network).
	codeSecretUnavailable = "cli.secret_unavailable"
	// codeSecretInvalid: an Ed25519 secret holds no seed or private key.
	codeSecretInvalid = "cli.secret_invalid"
)

// SecretsManagerAPI is what `keys` calls.
type SecretsManagerAPI interface {
	DescribeSecret(ctx context.Context, in *secretsmanager.DescribeSecretInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.DescribeSecretOutput, error)
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// keyView is one key as `keys` prints it: HMAC keys by reference (the
// secret's name and ARN), Ed25519 keys by their public key in hex. Key
// material is never printed.
type keyView struct {
	Holder    string `json:"holder"`
	Key       string `json:"key"`
	Kind      string `json:"kind"`
	Secret    string `json:"secret"`
	SecretARN string `json:"secret_arn"`
	PublicKey string `json:"public_key,omitempty"`
}

// holderText says what each party does with its keys.
var holderText = []struct{ holder, title string }{
	{topology.HolderCMS, "CMS (lifecycle and delivery APIs)"},
	{topology.HolderProducer, "event producer (change.dispatched, plan.accepted, job.completed, change.hint)"},
	{topology.HolderEvidence, "evidence provider"},
}

// keys prints, from the deployed secrets of --prefix, what to hand to the
// CMS, the event producer and the evidence provider.
func (c *cli) keys(ctx context.Context, prefix string) error {
	if c.sm == nil {
		cfg, err := c.loadAWS(ctx)
		if err != nil {
			return err
		}
		c.sm = secretsmanager.NewFromConfig(cfg)
	}
	topo := topology.New(prefix)
	var views []keyView
	for _, s := range topology.Secrets {
		v, err := readKey(ctx, c.sm, topo, s)
		if err != nil {
			return err
		}
		views = append(views, v)
	}
	if c.jsonOut {
		return c.printJSON(views)
	}
	fmt.Fprintf(c.out, "keys of deployment %s (HMAC keys by reference: hand them over from Secrets Manager, never by copy in chat or e-mail)\n", topo.Prefix)
	for _, h := range holderText {
		fmt.Fprintf(c.out, "\n%s:\n", h.title)
		for _, v := range views {
			if v.Holder != h.holder {
				continue
			}
			if v.Kind == topology.KeyEd25519 {
				fmt.Fprintf(c.out, "  %s public key (Ed25519, verifies its signatures): %s\n", v.Key, v.PublicKey)
				continue
			}
			fmt.Fprintf(c.out, "  %s (HMAC key set, current first): secret %s\n    %s\n", v.Key, v.Secret, v.SecretARN)
		}
	}
	fmt.Fprint(c.out, `
HMAC keys: give the party read access to the secret (or replace the value with
theirs: aws secretsmanager put-secret-value --secret-id ARN --secret-string HEX).
Receipt issuers' public keys are not secrets of this deployment: they come from
the evidence provider and reviewers and are set at deploy (RECEIPT_ISSUERS_*).
`)
	return nil
}

// readKey describes one secret and, for an Ed25519 seed, derives its
// public key.
func readKey(ctx context.Context, sm SecretsManagerAPI, topo topology.Topology, s topology.Secret) (keyView, error) {
	name := topo.SecretName(s)
	v := keyView{Holder: s.Holder, Key: s.Key, Kind: s.Kind, Secret: name}
	desc, err := sm.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: aws.String(name)})
	if err != nil {
		return keyView{}, secretError(name, err)
	}
	v.SecretARN = aws.ToString(desc.ARN)
	if s.Kind != topology.KeyEd25519 {
		return v, nil
	}
	out, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(name)})
	if err != nil {
		return keyView{}, secretError(name, err)
	}
	raw := out.SecretBinary
	if out.SecretString != nil {
		set, err := secretkey.DecodeHexSet(*out.SecretString, secretkey.Ed25519)
		if err != nil {
			return keyView{}, core.Wrap(codeSecretInvalid, false, fmt.Errorf("secret %s: %w", name, err))
		}
		raw = set[0]
	}
	auth, err := release.NewApprovalAuthority(raw)
	if err != nil {
		return keyView{}, core.Wrap(codeSecretInvalid, false, fmt.Errorf("secret %s holds no Ed25519 seed or private key", name))
	}
	v.PublicKey = hex.EncodeToString(auth.PublicKey())
	return v, nil
}

// secretError tells a missing secret (wrong prefix, not deployed) from
// Secrets Manager being unavailable.
func secretError(name string, err error) error {
	var missing *smtypes.ResourceNotFoundException
	if errors.As(err, &missing) {
		return core.Wrap(codeSecretMissing, false, fmt.Errorf("secret %s does not exist: deploy first, or give the deployment's --prefix", name))
	}
	msg := err.Error()
	if i := strings.Index(msg, "api error "); i >= 0 {
		msg = msg[i+len("api error "):]
	}
	return core.Wrap(codeSecretUnavailable, true, fmt.Errorf("secret %s: %s", name, msg))
}
