package main

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/localeflow/localeflow/adapters/secretkey"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

// issuerEnv is the issuer variable value trusting the fixture's issuer of
// kind.
func issuerEnv(fx releasetest.Fixture, kind string) string {
	name, key := fx.IssuerFor(kind)
	return name + "=" + hex.EncodeToString(key.Public().(ed25519.PublicKey))
}

func baseEnv() map[string]string {
	fx := releasetest.NewFixture()
	return map[string]string{
		envReleaseTable:                  "t-release",
		envReleaseQueueURL:               "http://127.0.0.1:4566/000000000000/t-release",
		envEventBus:                      "t-bus",
		envEvidenceBaseURL:               "https://127.0.0.1:9001",
		envCMSBaseURL:                    "https://127.0.0.1:9002",
		envIssuersQuality:                issuerEnv(fx, release.KindQuality),
		envIssuersHumanReview:            issuerEnv(fx, release.KindHumanReview),
		envIssuersIndependent:            issuerEnv(fx, release.KindIndependentModelReview),
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
		{"no quality issuers", map[string]string{envIssuersQuality: ""}, envIssuersQuality},
		{"no human review issuers", map[string]string{envIssuersHumanReview: ""}, envIssuersHumanReview},
		{"no independent review issuers", map[string]string{envIssuersIndependent: ""}, envIssuersIndependent},
		{"bad issuer", map[string]string{envIssuersHumanReview: "x=zz"}, envIssuersHumanReview},
		{"repeated issuer key", map[string]string{envIssuersQuality: issuerEnv(releasetest.NewFixture(), release.KindQuality) + "," + issuerEnv(releasetest.NewFixture(), release.KindQuality)}, "repeats a key"},
		{"issuer with five keys", map[string]string{envIssuersQuality: issuerEnv(releasetest.NewFixture(), release.KindQuality) + "," + rotatingIssuer("a", "b", "c", "d")}, "more than 4 keys"},
		{"quality key trusted for human review", map[string]string{envIssuersHumanReview: "desk=" + strings.Split(issuerEnv(releasetest.NewFixture(), release.KindQuality), "=")[1]}, release.CodeIssuersKeyShared},
		{"retired shared issuers alone", map[string]string{envReceiptIssuersShared: issuerEnv(releasetest.NewFixture(), release.KindQuality), envIssuersQuality: "", envIssuersHumanReview: "", envIssuersIndependent: ""}, "split it into " + envIssuersQuality},
		{"retired shared issuers beside the new ones", map[string]string{envReceiptIssuersShared: issuerEnv(releasetest.NewFixture(), release.KindQuality)}, envReceiptIssuersShared + " is no longer read"},
		{"lease over 3600s", map[string]string{envEvidenceLease: "2h"}, envEvidenceLease},
		{"lease not over timeout", map[string]string{envEvidenceLease: "20s"}, "lease_too_short"},
		{"bad duration", map[string]string{envApprovalTTL: "soon"}, envApprovalTTL + ` ("soon") is not a Go duration`},
		{"attempts 21", map[string]string{envEvidenceAttempts: "21"}, envEvidenceAttempts},
		{"delivery attempts 0", map[string]string{envDeliveryAttempts: "0"}, envDeliveryAttempts},
		{"bad revision", map[string]string{envRevision: "rev 1"}, envRevision},
		{"bad level", map[string]string{envLogLevel: "loud"}, envLogLevel},
		{"record retention under 1h", map[string]string{envRecordRetention: "30m"}, envRecordRetention + " (30m0s) must be at least 1h"},
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
					c.Release.EvidenceRevision != defaultRevision || !strings.HasPrefix(c.Release.WorkerID, "coordinator-") ||
					len(c.Issuers.Quality) != 1 || len(c.Issuers.HumanReview) != 1 || len(c.Issuers.IndependentReview) != 1 ||
					c.RecordRetention != release.DefaultRetention {
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
	key, err := c.Key(context.Background(), fakeSecrets{&secretsmanager.GetSecretValueOutput{SecretString: &seed}}, keyApproval)
	if err != nil || len(key) != 32 {
		t.Fatalf("%v %d", err, len(key))
	}
	key, err = c.Key(context.Background(), fakeSecrets{&secretsmanager.GetSecretValueOutput{SecretBinary: []byte("0123456789abcdef")}}, keyEvent)
	if err != nil || string(key) != "0123456789abcdef" {
		t.Fatalf("%v %q", err, key)
	}
	if _, err := c.Key(context.Background(), fakeSecrets{&secretsmanager.GetSecretValueOutput{}}, keyEvent); err == nil {
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

// TestDeployedVerifiersRefuseQualityIssuerAsHumanReview: the function used
// to give all three verifiers one shared issuer set, so the evidence
// provider's quality key could sign a human-review receipt.
func TestDeployedVerifiersRefuseQualityIssuerAsHumanReview(t *testing.T) {
	env := baseEnv()
	c, err := loadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	v := c.Issuers.Verifiers()
	fx := releasetest.NewFixture()
	qualityOnly := releasetest.Fixture{Issuer: fx.Issuer, IssuerKey: fx.IssuerKey}
	now := time.Now()
	req, sha := "blun-l10n-evidence-x", strings.Repeat("a", 64)
	forged := qualityOnly.Receipt(release.KindHumanReview, req, sha, now, time.Hour)
	if _, err := v.HumanReview.Verify(forged, req, sha, now); !core.HasCode(err, release.CodeReceiptIssuerUntrusted) {
		t.Fatalf("quality-signed human-review receipt: err = %v, want %s", err, release.CodeReceiptIssuerUntrusted)
	}
	if _, err := v.HumanReview.Verify(fx.Receipt(release.KindHumanReview, req, sha, now, time.Hour), req, sha, now); err != nil {
		t.Fatalf("human-review issuer's receipt: %v", err)
	}
	if _, err := v.Quality.Verify(fx.Receipt(release.KindQuality, req, sha, now, time.Hour), req, sha, now); err != nil {
		t.Fatalf("quality issuer's receipt: %v", err)
	}
}

// rotatingIssuer is the quality issuer entries for further keys made from
// labels.
func rotatingIssuer(labels ...string) string {
	name := releasetest.NewFixture().Issuer
	var parts []string
	for _, l := range labels {
		seed := make([]byte, ed25519.SeedSize)
		copy(seed, l)
		parts = append(parts, name+"="+hex.EncodeToString(ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)))
	}
	return strings.Join(parts, ",")
}

// TestReceiptIssuerRotationConfig: finding 8. An issuer name could appear
// once only, so an issuer's new key needed a new name (and receipts in
// flight under the old name were refused once it was removed). Named
// again, the issuer is trusted under each of its keys, for its kind only.
func TestReceiptIssuerRotationConfig(t *testing.T) {
	env := baseEnv()
	env[envIssuersQuality] = issuerEnv(releasetest.NewFixture(), release.KindQuality) + "," + rotatingIssuer("new")
	cfg, err := loadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("an issuer rotating its key was refused: %v", err)
	}
	fx := releasetest.NewFixture()
	seed := make([]byte, ed25519.SeedSize)
	copy(seed, "new")
	v := cfg.Issuers.Verifiers()
	now := time.Now()
	sha := core.SHA256Hex([]byte("text"))
	for _, key := range []ed25519.PrivateKey{fx.IssuerKey, ed25519.NewKeyFromSeed(seed)} {
		f := fx
		f.IssuerKey = key
		if _, err := v.Quality.Verify(f.Receipt(release.KindQuality, "req-1", sha, now, time.Hour), "req-1", sha, now); err != nil {
			t.Fatalf("receipt of the rotating issuer refused: %v", err)
		}
	}
}
