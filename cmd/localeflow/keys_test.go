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
	"github.com/localeflow/localeflow/core/release"
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

// TestKeysOnLocalStack: `keys` prints what each party needs: the HMAC keys
// by reference (name and ARN, never the material) and the approval and
// publication public keys — without reading the private seeds (which this
// deployment does not even have: reading one would fail), from the
// public-key secrets the coordinator writes. With an Ed25519 set NEW,OLD
// (a rotation) it printed only NEW's public key; it now prints both,
// labelled, with their key ids. A wrong prefix exits 1 with
// cli.secret_missing.
func TestKeysOnLocalStack(t *testing.T) {
	sm := localSecrets(t)
	ctx := context.Background()
	topo := topology.New(fmt.Sprintf("keys-%d", time.Now().UnixNano()%1_000_000_000))
	values := map[string]string{}
	arns := map[string]string{}
	public := map[string][]string{}
	create := func(name, value string) string {
		out, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(name), SecretString: aws.String(value)})
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		return aws.ToString(out.ARN)
	}
	for i, s := range topology.Secrets {
		seed := func(n int) []byte {
			b := make([]byte, 32)
			for j := range b {
				b[j] = byte(i*37 + n*11 + j + 1)
			}
			return b
		}
		if s.Kind == topology.KeyHMAC {
			values[s.Stem] = hex.EncodeToString(seed(0))
			arns[s.Key] = create(topo.SecretName(s), values[s.Stem])
			continue
		}
		// The signing key first, the one being retired second.
		for n := range 2 {
			public[s.Key] = append(public[s.Key], hex.EncodeToString(ed25519.NewKeyFromSeed(seed(n)).Public().(ed25519.PublicKey)))
		}
		arns[s.Key] = create(topo.PublicKeySecretName(s), strings.Join(public[s.Key], ","))
	}
	r := runCLI(map[string]string{}, "--prefix="+topo.Prefix, "keys")
	if r.code != exitOK {
		t.Fatalf("keys: %+v", r)
	}
	t.Logf("localeflow keys:\n%s", r.out)
	for _, s := range topology.Secrets {
		if !strings.Contains(r.out, arns[s.Key]) && s.Kind == topology.KeyHMAC {
			t.Errorf("no secret ARN %s in\n%s", arns[s.Key], r.out)
		}
	}
	for key, pubs := range public {
		for n, role := range []string{"(signs)", "(verifies its older signatures)"} {
			id := releaseKeyID(t, pubs[n])
			if !strings.Contains(r.out, "    "+pubs[n]+"  key id "+id+"  "+role) {
				t.Errorf("no public key %s %s of %s", pubs[n], role, key)
			}
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
		if v.SecretARN != arns[v.Key] {
			t.Errorf("keys --json: %+v", v)
		}
		if v.Kind != topology.KeyEd25519 {
			continue
		}
		if v.PublicKey != public[v.Key][0] || len(v.PublicKeys) != 2 || !v.PublicKeys[0].Signs || v.PublicKeys[1].Signs ||
			v.PublicKeys[1].PublicKey != public[v.Key][1] || v.PublicKeys[1].KeyID != releaseKeyID(t, public[v.Key][1]) {
			t.Errorf("keys --json: %+v", v)
		}
	}
	// The deployment from the variables, as every command.
	if r := runCLI(map[string]string{"LOCALEFLOW_DEPLOYMENT": topo.Prefix}, "keys"); r.code != exitOK {
		t.Fatalf("keys with LOCALEFLOW_DEPLOYMENT: %+v", r)
	}

	r = runCLI(map[string]string{}, "--prefix=keys-not-deployed", "keys")
	if r.code != exitBad || !strings.Contains(r.err, codeSecretMissing) || !strings.Contains(r.err, "keys-not-deployed/cms-hmac-key") {
		t.Fatalf("keys of a prefix without secrets: %+v", r)
	}
}

func releaseKeyID(t *testing.T, pubHex string) string {
	t.Helper()
	b, err := hex.DecodeString(pubHex)
	if err != nil {
		t.Fatal(err)
	}
	return release.KeyID(b)
}

// TestKeysRefusesANonKeySecret: a public-key secret that holds no public
// key set is reported (cli.secret_invalid), never printed; one that still
// holds the stack's placeholder is cli.keys.unpublished, naming how to
// have the coordinator publish.
func TestKeysRefusesANonKeySecret(t *testing.T) {
	sm := localSecrets(t)
	ctx := context.Background()
	for _, c := range []struct{ value, code string }{{"not-a-key", codeSecretInvalid}, {topology.PublicKeysUnpublished, codeKeysUnpublished}} {
		topo := topology.New(fmt.Sprintf("keysbad-%d", time.Now().UnixNano()%1_000_000_000))
		for _, s := range topology.Secrets {
			name, v := topo.SecretName(s), strings.Repeat("ab", 32)
			if s.Kind == topology.KeyEd25519 {
				name, v = topo.PublicKeySecretName(s), c.value
			}
			if _, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(name), SecretString: aws.String(v)}); err != nil {
				t.Fatal(err)
			}
		}
		r := runCLI(map[string]string{}, "--prefix="+topo.Prefix, "keys")
		if r.code != exitBad || !strings.Contains(r.err, c.code) || strings.Contains(r.out+r.err, "not-a-key") {
			t.Fatalf("keys with %q: %+v", c.value, r)
		}
	}
}
