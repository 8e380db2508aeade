package main

import (
	"context"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"

	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/topology"
)

// codePublishFailed: the public keys could not be written (logged; the
// cold start goes on: signing does not depend on it).
const codePublishFailed = "coordinator.public_keys.publish_failed"

// publishTimeout bounds the cold start's publication.
const publishTimeout = 3 * time.Second

// PublicKeySecretsAPI is what publishing the public keys calls.
type PublicKeySecretsAPI interface {
	GetSecretValue(ctx context.Context, params *secretsmanager.GetSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
	PutSecretValue(ctx context.Context, params *secretsmanager.PutSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.PutSecretValueOutput, error)
}

var _ PublicKeySecretsAPI = (*secretsmanager.Client)(nil)

// publicKeySet is an authority's public keys as a key set: lowercase hex,
// the signing key first, comma separated (the seed secret's format).
func publicKeySet(a *release.Authority) string {
	var parts []string
	for _, pub := range a.PublicKeys() {
		parts = append(parts, hex.EncodeToString(pub))
	}
	return strings.Join(parts, ",")
}

// publishPublicKeys writes the public keys of the approval and publication
// sets this environment loaded to the deployment's public-key secrets
// (topology.PublicKeySecretName: <prefix>/approval-ed25519-public-key,
// ...), so that `localeflow keys` prints them without reading a seed. Each
// secret is read first and written only when it differs (a cold start
// after a rotation step, or the first after deploy, which finds the
// stack's placeholder). A failure is logged and never fails the cold
// start: the published copy is for people, the functions never read it.
func publishPublicKeys(ctx context.Context, sm PublicKeySecretsAPI, deployment string, sets map[string]*release.Authority, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	topo := topology.New(deployment)
	for _, s := range topology.Secrets {
		a, ok := sets[s.Key]
		if s.Kind != topology.KeyEd25519 || !ok {
			continue
		}
		name, want := topo.PublicKeySecretName(s), publicKeySet(a)
		cur, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(name)})
		if err == nil && aws.ToString(cur.SecretString) == want {
			continue
		}
		var missing *smtypes.ResourceNotFoundException
		if errors.As(err, &missing) {
			// A stack from before the public-key secrets: nothing to write to.
			log.WarnContext(ctx, "public keys not published", "code", codePublishFailed, "secret", name, "cause", "secret_missing")
			continue
		}
		if err == nil {
			_, err = sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: aws.String(name), SecretString: aws.String(want)})
		}
		if err != nil {
			log.WarnContext(ctx, "public keys not published", "code", codePublishFailed, "secret", name, "error", firstLine(err.Error()))
			continue
		}
		log.InfoContext(ctx, "public keys published", "secret", name, "keys", len(a.PublicKeys()), "signing_key_id", a.KeyID())
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
