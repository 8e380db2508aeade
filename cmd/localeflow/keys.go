package main

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"

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
	// codeSecretInvalid: a public-key secret holds no Ed25519 public key
	// set.
	codeSecretInvalid = "cli.secret_invalid"
	// codeKeysUnpublished: a public-key secret still holds the stack's
	// placeholder: the coordinator writes it at its first cold start.
	codeKeysUnpublished = "cli.keys.unpublished"
)

// maxPublicKeys is the largest key set (adapters/secretkey).
const maxPublicKeys = 4

// SecretsManagerAPI is what `keys` calls.
type SecretsManagerAPI interface {
	DescribeSecret(ctx context.Context, in *secretsmanager.DescribeSecretInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.DescribeSecretOutput, error)
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// keyView is one key as `keys` prints it: HMAC keys by reference (the
// secret's name and ARN), Ed25519 keys by their public keys in hex, read
// from the public-key secret (Secret, SecretARN) the coordinator writes:
// `keys` never reads a seed. Key material is never printed.
type keyView struct {
	Holder    string `json:"holder"`
	Key       string `json:"key"`
	Kind      string `json:"kind"`
	Secret    string `json:"secret"`
	SecretARN string `json:"secret_arn"`
	// PublicKey is the signing key's public key; PublicKeys the whole set
	// (a rotation in progress: the peer trusts every one until it ends).
	PublicKey  string          `json:"public_key,omitempty"`
	PublicKeys []publicKeyView `json:"public_keys,omitempty"`
}

// publicKeyView is one public key of an Ed25519 set.
type publicKeyView struct {
	PublicKey string `json:"public_key"`
	// KeyID is the key_id stored approvals and deliveries name
	// (release.KeyID).
	KeyID string `json:"key_id"`
	// Signs is true for the first key of the set, which signs new tokens.
	Signs bool `json:"signs"`
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
				fmt.Fprintf(c.out, "  %s public keys (Ed25519; trust every one until a rotation ends): from %s\n", v.Key, v.Secret)
				for _, k := range v.PublicKeys {
					role := "verifies its older signatures"
					if k.Signs {
						role = "signs"
					}
					fmt.Fprintf(c.out, "    %s  key id %s  (%s)\n", k.PublicKey, k.KeyID, role)
				}
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

// readKey describes an HMAC secret, or reads the public-key secret of an
// Ed25519 one (never the seed).
func readKey(ctx context.Context, sm SecretsManagerAPI, topo topology.Topology, s topology.Secret) (keyView, error) {
	v := keyView{Holder: s.Holder, Key: s.Key, Kind: s.Kind, Secret: topo.SecretName(s)}
	if s.Kind != topology.KeyEd25519 {
		desc, err := sm.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: aws.String(v.Secret)})
		if err != nil {
			return keyView{}, secretError(v.Secret, err)
		}
		v.SecretARN = aws.ToString(desc.ARN)
		return v, nil
	}
	v.Secret = topo.PublicKeySecretName(s)
	out, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(v.Secret)})
	if err != nil {
		return keyView{}, secretError(v.Secret, err)
	}
	v.SecretARN = aws.ToString(out.ARN)
	value := strings.TrimSpace(aws.ToString(out.SecretString))
	if value == topology.PublicKeysUnpublished {
		return keyView{}, core.Wrap(codeKeysUnpublished, false, fmt.Errorf("secret %s: the coordinator has not published the public keys yet: it does at cold start (the release sweep runs it every %d minutes; to force one: aws lambda update-function-configuration --function-name %s-coordinator --description \"keys $(date -u +%%FT%%TZ)\")",
			v.Secret, releaseSweepMinutes(topo), topo.Prefix))
	}
	parts := strings.Split(value, ",")
	if len(parts) > maxPublicKeys {
		return keyView{}, core.Wrap(codeSecretInvalid, false, fmt.Errorf("secret %s holds more than %d public keys", v.Secret, maxPublicKeys))
	}
	for i, part := range parts {
		pub, err := hex.DecodeString(part)
		if err != nil || len(pub) != ed25519.PublicKeySize || part != strings.ToLower(part) {
			return keyView{}, core.Wrap(codeSecretInvalid, false, fmt.Errorf("secret %s holds no Ed25519 public key set (64 hex digits each, comma separated)", v.Secret))
		}
		v.PublicKeys = append(v.PublicKeys, publicKeyView{PublicKey: part, KeyID: release.KeyID(pub), Signs: i == 0})
	}
	v.PublicKey = v.PublicKeys[0].PublicKey
	return v, nil
}

// releaseSweepMinutes is the coordinator's schedule (how soon it cold
// starts after a deploy).
func releaseSweepMinutes(topo topology.Topology) int {
	for _, s := range topo.Schedules {
		if s.Function == "coordinator" {
			return s.RateMinutes
		}
	}
	return 0
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
