package main

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/localeflow/localeflow/adapters/secretkey"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

func baseEnv() map[string]string {
	fx := releasetest.NewFixture()
	return map[string]string{
		envReleaseTable:                  "t-release",
		envReleaseQueueURL:               "http://127.0.0.1:4566/000000000000/t-release",
		envEventBus:                      "t-bus",
		envEvidenceBaseURL:               "https://127.0.0.1:9001",
		envCMSBaseURL:                    "https://127.0.0.1:9002",
		envReceiptIssuers:                fx.Issuer + "=" + hex.EncodeToString(fx.IssuerKey.Public().(ed25519.PublicKey)),
		"LOCALEFLOW_EVENT_KEY_HEX":       hex.EncodeToString(fx.EventKey),
		"LOCALEFLOW_CMS_KEY_HEX":         hex.EncodeToString([]byte("cms-key-0123456789")),
		"LOCALEFLOW_EVIDENCE_KEY_HEX":    hex.EncodeToString([]byte("evidence-key-0123456789")),
		"LOCALEFLOW_APPROVAL_KEY_HEX":    hex.EncodeToString(fx.ApprovalSeed),
		"LOCALEFLOW_PUBLICATION_KEY_HEX": hex.EncodeToString(fx.PublicationKey),
	}
}

func TestLoadConfig(t *testing.T) {
	tests := []struct {
		name   string
		change map[string]string
		want   string // substring of the error; "" = valid
	}{
		{"defaults", nil, ""},
		{"missing table", map[string]string{envReleaseTable: ""}, envReleaseTable},
		{"queue not url", map[string]string{envReleaseQueueURL: "queue"}, envReleaseQueueURL},
		{"both key sources", map[string]string{"LOCALEFLOW_EVENT_KEY_SECRET_ARN": "arn:aws:secretsmanager:x"}, "exactly one of LOCALEFLOW_EVENT_KEY_SECRET_ARN"},
		{"no key source", map[string]string{"LOCALEFLOW_CMS_KEY_HEX": ""}, "exactly one of LOCALEFLOW_CMS_KEY_SECRET_ARN"},
		{"secret not arn", map[string]string{"LOCALEFLOW_CMS_KEY_HEX": "", "LOCALEFLOW_CMS_KEY_SECRET_ARN": "name"}, "must be an ARN"},
		{"short hmac key", map[string]string{"LOCALEFLOW_EVIDENCE_KEY_HEX": "abcd"}, "at least 16 bytes"},
		{"bad ed25519 key", map[string]string{"LOCALEFLOW_APPROVAL_KEY_HEX": strings.Repeat("ab", 20)}, "Ed25519"},
		{"no issuers", map[string]string{envReceiptIssuers: ""}, envReceiptIssuers},
		{"bad issuer", map[string]string{envReceiptIssuers: "x=zz"}, envReceiptIssuers},
		{"lease over 3600s", map[string]string{envEvidenceLease: "2h"}, envEvidenceLease},
		{"lease not over timeout", map[string]string{envEvidenceLease: "20s"}, "lease_too_short"},
		{"bad duration", map[string]string{envApprovalTTL: "soon"}, "not a duration"},
		{"attempts 21", map[string]string{envEvidenceAttempts: "21"}, envEvidenceAttempts},
		{"delivery attempts 0", map[string]string{envDeliveryAttempts: "0"}, envDeliveryAttempts},
		{"bad revision", map[string]string{envRevision: "rev 1"}, envRevision},
		{"bad level", map[string]string{envLogLevel: "loud"}, envLogLevel},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := baseEnv()
			for k, v := range tt.change {
				env[k] = v
			}
			c, err := loadConfig(func(k string) string { return env[k] })
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if c.Release.EvidenceLease != defaultEvidenceLease || c.Release.EvidenceMaxAttempts != 5 || c.Release.DeliveryMaxAttempts != 5 ||
					c.Release.EvidenceRevision != defaultRevision || !strings.HasPrefix(c.Release.WorkerID, "coordinator-") || len(c.Issuers) != 1 {
					t.Fatalf("%+v", c.Release)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

type fakeSecrets struct {
	out *secretsmanager.GetSecretValueOutput
}

func (f fakeSecrets) GetSecretValue(context.Context, *secretsmanager.GetSecretValueInput, ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	return f.out, nil
}

func TestKeyFromSecret(t *testing.T) {
	c := config{Keys: map[string]secretkey.Source{keyApproval: {SecretARN: "arn:x"}, keyEvent: {SecretARN: "arn:y"}}}
	seed := strings.Repeat("ab", 32)
	key, err := c.key(context.Background(), fakeSecrets{&secretsmanager.GetSecretValueOutput{SecretString: &seed}}, keyApproval)
	if err != nil || len(key) != 32 {
		t.Fatalf("%v %d", err, len(key))
	}
	key, err = c.key(context.Background(), fakeSecrets{&secretsmanager.GetSecretValueOutput{SecretBinary: []byte("0123456789abcdef")}}, keyEvent)
	if err != nil || string(key) != "0123456789abcdef" {
		t.Fatalf("%v %q", err, key)
	}
	if _, err := c.key(context.Background(), fakeSecrets{&secretsmanager.GetSecretValueOutput{}}, keyEvent); err == nil {
		t.Fatal("empty secret accepted")
	}
}

func TestBuildWiresHandler(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	env := baseEnv()
	h, err := build(context.Background(), func(k string) string { return env[k] }, slog.New(slog.DiscardHandler))
	if err != nil || h == nil {
		t.Fatalf("build: %v", err)
	}
	env[envEvidenceLease] = "10s"
	if _, err := build(context.Background(), func(k string) string { return env[k] }, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("built with a lease shorter than the client timeouts")
	}
}
