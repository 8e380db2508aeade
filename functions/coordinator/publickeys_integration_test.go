package main

import (
	"context"
	"encoding/hex"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/localeflow/localeflow/adapters/awsconfig"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/dev/localtest"
	"github.com/localeflow/localeflow/topology"
)

// TestIntegrationColdStartPublishesThePublicKeys: on the local stack's
// Secrets Manager, a coordinator built from its environment with its keys
// in secrets (the approval set mid-rotation: NEW,OLD) replaces the
// placeholder of the deployment's public-key secrets with the public keys
// of the sets it loaded, signing key first; a second cold start with the
// same sets writes nothing (the version stays).
func TestIntegrationColdStartPublishesThePublicKeys(t *testing.T) {
	localtest.Require(t)
	_, res := localtest.Stack(t)
	cfg, err := awsconfig.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sm := secretsmanager.NewFromConfig(cfg)
	ctx := context.Background()
	topo := topology.New(res.Prefix)
	env := baseEnv()
	env[envReleaseTable], env[envReleaseQueueURL], env[envEventBus] = res.ReleaseTable, res.ReleaseQueue.URL, res.BusName
	env[contract.EnvDeployment] = res.Prefix
	values := map[string]string{
		contract.KeyEvent: env["LOCALEFLOW_EVENT_KEY_HEX"], contract.KeyCMS: env["LOCALEFLOW_CMS_KEY_HEX"],
		contract.KeyEvidence:    env["LOCALEFLOW_EVIDENCE_KEY_HEX"],
		contract.KeyApproval:    hex.EncodeToString(pubSeed(7)) + "," + env["LOCALEFLOW_APPROVAL_KEY_HEX"],
		contract.KeyPublication: env["LOCALEFLOW_PUBLICATION_KEY_HEX"],
	}
	create := func(name, value string) string {
		out, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(name), SecretString: aws.String(value)})
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		t.Cleanup(func() {
			_, _ = sm.DeleteSecret(context.Background(), &secretsmanager.DeleteSecretInput{SecretId: aws.String(name), ForceDeleteWithoutRecovery: aws.Bool(true)})
		})
		return aws.ToString(out.ARN)
	}
	for _, s := range topology.Secrets {
		delete(env, s.Key+"_HEX")
		env[s.Key+"_SECRET_ARN"] = create(topo.SecretName(s), values[s.Key])
		if s.PublicStem != "" {
			create(topo.PublicKeySecretName(s), topology.PublicKeysUnpublished)
		}
	}
	read := func(s topology.Secret) (string, string) {
		out, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(topo.PublicKeySecretName(s))})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.SecretString), aws.ToString(out.VersionId)
	}
	if _, err := build(ctx, func(k string) string { return env[k] }, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("cold start: %v", err)
	}
	versions := map[string]string{}
	for _, s := range topology.Secrets {
		if s.PublicStem == "" {
			continue
		}
		got, version := read(s)
		versions[s.Key] = version
		var want []string
		for _, seedHex := range strings.Split(values[s.Key], ",") {
			b, _ := hex.DecodeString(seedHex)
			want = append(want, pubHexOf(b))
		}
		if got != strings.Join(want, ",") {
			t.Errorf("%s: published %q, want %q", s.Key, got, strings.Join(want, ","))
		}
	}
	if _, err := build(ctx, func(k string) string { return env[k] }, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("second cold start: %v", err)
	}
	for _, s := range topology.Secrets {
		if s.PublicStem == "" {
			continue
		}
		if _, version := read(s); version != versions[s.Key] {
			t.Errorf("%s: an unchanged set was written again", s.Key)
		}
	}
}
