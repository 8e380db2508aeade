package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/topology"
)

// fakePublicSecrets holds secret values by name and counts the writes.
type fakePublicSecrets struct {
	values map[string]string
	puts   int
	getErr error
}

func (f *fakePublicSecrets) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	if f.getErr != nil {
		return nil, f.getErr
	}
	v, ok := f.values[aws.ToString(in.SecretId)]
	if !ok {
		return nil, &smtypes.ResourceNotFoundException{Message: aws.String("no such secret")}
	}
	return &secretsmanager.GetSecretValueOutput{SecretString: aws.String(v)}, nil
}

func (f *fakePublicSecrets) PutSecretValue(_ context.Context, in *secretsmanager.PutSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.PutSecretValueOutput, error) {
	f.puts++
	f.values[aws.ToString(in.SecretId)] = aws.ToString(in.SecretString)
	return &secretsmanager.PutSecretValueOutput{}, nil
}

func pubSeed(b byte) []byte { return bytes.Repeat([]byte{b}, ed25519.SeedSize) }

func pubHex(b byte) string { return pubHexOf(pubSeed(b)) }

// pubHexOf is the public key of a 32-byte seed (or 64-byte private key).
func pubHexOf(key []byte) string {
	priv := ed25519.PrivateKey(key)
	if len(key) == ed25519.SeedSize {
		priv = ed25519.NewKeyFromSeed(key)
	}
	return hex.EncodeToString(priv.Public().(ed25519.PublicKey))
}

// TestPublishPublicKeysWithoutTheSeeds: `localeflow keys` had to read the
// private seeds to print two public keys. The coordinator, which holds the
// seeds, writes the public key sets (signing key first, every key of a
// rotation's set) to the deployment's public-key secrets at cold start:
// over the stack's placeholder, again only when the set changed, and a
// missing secret or a failed read is logged and never fails the start.
func TestPublishPublicKeysWithoutTheSeeds(t *testing.T) {
	approval, err := release.NewApprovalAuthority(pubSeed(1), pubSeed(2))
	if err != nil {
		t.Fatal(err)
	}
	publication, err := release.NewPublicationAuthority(pubSeed(3))
	if err != nil {
		t.Fatal(err)
	}
	topo := topology.New("acme")
	names := map[string]string{}
	for _, s := range topology.Secrets {
		names[s.Key] = topo.PublicKeySecretName(s)
	}
	sm := &fakePublicSecrets{values: map[string]string{
		names[contract.KeyApproval]: topology.PublicKeysUnpublished, names[contract.KeyPublication]: topology.PublicKeysUnpublished,
	}}
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	sets := map[string]*release.Authority{contract.KeyApproval: approval, contract.KeyPublication: publication}
	publishPublicKeys(context.Background(), sm, "acme", sets, log)
	if got, want := sm.values["acme/approval-ed25519-public-key"], pubHex(1)+","+pubHex(2); got != want {
		t.Errorf("approval public keys %q, want %q", got, want)
	}
	if got, want := sm.values["acme/publication-ed25519-public-key"], pubHex(3); got != want {
		t.Errorf("publication public keys %q, want %q", got, want)
	}
	if sm.puts != 2 {
		t.Fatalf("%d writes, want 2", sm.puts)
	}
	for _, secret := range [][]byte{pubSeed(1), pubSeed(2), pubSeed(3)} {
		if strings.Contains(strings.Join([]string{sm.values[names[contract.KeyApproval]], sm.values[names[contract.KeyPublication]], logs.String()}, " "), hex.EncodeToString(secret)) {
			t.Fatal("a seed was published or logged")
		}
	}
	publishPublicKeys(context.Background(), sm, "acme", sets, log)
	if sm.puts != 2 {
		t.Errorf("an unchanged set was written again (%d writes)", sm.puts)
	}
	missing := &fakePublicSecrets{values: map[string]string{}}
	publishPublicKeys(context.Background(), missing, "acme", sets, log)
	failing := &fakePublicSecrets{values: map[string]string{}, getErr: errors.New("AccessDeniedException")}
	publishPublicKeys(context.Background(), failing, "acme", sets, log)
	if missing.puts+failing.puts != 0 || strings.Count(logs.String(), codePublishFailed) != 4 {
		t.Errorf("missing or unreadable secrets: %d writes, logs:\n%s", missing.puts+failing.puts, logs.String())
	}
}
