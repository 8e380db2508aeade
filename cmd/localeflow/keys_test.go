package main

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/localeflow/localeflow/adapters/awsconfig"
	"github.com/localeflow/localeflow/dev/localtest"
	"github.com/localeflow/localeflow/topology"
)

// localSecrets is Secrets Manager of the local stack (kumo).
func localSecrets(t *testing.T) *secretsmanager.Client {
	t.Helper()
	localtest.Require(t)
	cfg, err := awsconfig.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return secretsmanager.NewFromConfig(cfg)
}

// TestKeysOnLocalStack: `keys` reads a deployment's five secrets and prints
// what each party needs: the HMAC keys by reference (name and ARN, never
// the material), the approval and publication public keys derived from
// the seeds. A wrong prefix exits 1 with cli.secret_missing.
func TestKeysOnLocalStack(t *testing.T) {
	sm := localSecrets(t)
	ctx := context.Background()
	topo := topology.New(fmt.Sprintf("keys-%d", time.Now().UnixNano()%1_000_000_000))
	values := map[string]string{}
	arns := map[string]string{}
	public := map[string]string{}
	for i, s := range topology.Secrets {
		seed := make([]byte, 32)
		for j := range seed {
			seed[j] = byte(i*37 + j + 1)
		}
		values[s.Stem] = hex.EncodeToString(seed)
		if s.Kind == topology.KeyEd25519 {
			public[s.Key] = hex.EncodeToString(ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey))
		}
		out, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{
			Name: aws.String(topo.SecretName(s)), SecretString: aws.String(values[s.Stem]),
		})
		if err != nil {
			t.Fatalf("create %s: %v", topo.SecretName(s), err)
		}
		arns[s.Key] = aws.ToString(out.ARN)
	}
	r := runCLI(map[string]string{}, "--prefix="+topo.Prefix, "keys")
	if r.code != exitOK {
		t.Fatalf("keys: %+v", r)
	}
	t.Logf("localeflow keys:\n%s", r.out)
	for _, s := range topology.Secrets {
		if s.Kind == topology.KeyHMAC && !strings.Contains(r.out, arns[s.Key]) {
			t.Errorf("no secret ARN %s in\n%s", arns[s.Key], r.out)
		}
	}
	for key, pub := range public {
		if !strings.Contains(r.out, key+" public key (Ed25519, verifies its signatures): "+pub) {
			t.Errorf("no public key %s of %s", pub, key)
		}
	}
	for stem, v := range values {
		if strings.Contains(r.out, v) {
			t.Errorf("key material of %s printed", stem)
		}
	}
	r = runCLI(map[string]string{}, "--prefix="+topo.Prefix, "--json", "keys")
	var views []keyView
	if err := json.Unmarshal([]byte(r.out), &views); err != nil || r.code != exitOK || len(views) != len(topology.Secrets) {
		t.Fatalf("keys --json: %v %+v", err, r)
	}
	for _, v := range views {
		if v.SecretARN != arns[v.Key] || v.PublicKey != public[v.Key] {
			t.Errorf("keys --json: %+v", v)
		}
	}

	r = runCLI(map[string]string{}, "--prefix=keys-not-deployed", "keys")
	if r.code != exitBad || !strings.Contains(r.err, codeSecretMissing) || !strings.Contains(r.err, "keys-not-deployed/cms-hmac-key") {
		t.Fatalf("keys of a prefix without secrets: %+v", r)
	}
}

// TestKeysRefusesANonKeySecret: an Ed25519 secret that holds no seed is
// reported (cli.secret_invalid), never printed.
func TestKeysRefusesANonKeySecret(t *testing.T) {
	sm := localSecrets(t)
	ctx := context.Background()
	topo := topology.New(fmt.Sprintf("keysbad-%d", time.Now().UnixNano()%1_000_000_000))
	for _, s := range topology.Secrets {
		v := strings.Repeat("ab", 32)
		if s.Kind == topology.KeyEd25519 {
			v = "not-a-key"
		}
		if _, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(topo.SecretName(s)), SecretString: aws.String(v)}); err != nil {
			t.Fatal(err)
		}
	}
	r := runCLI(map[string]string{}, "--prefix="+topo.Prefix, "keys")
	if r.code != exitBad || !strings.Contains(r.err, codeSecretInvalid) || strings.Contains(r.err, "not-a-key") {
		t.Fatalf("keys with a bad seed: %+v", r)
	}
}
