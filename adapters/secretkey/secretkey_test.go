package secretkey_test

import (
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/localeflow/localeflow/adapters/secretkey"
)

const (
	stem = "LOCALEFLOW_TEST_KEY"
	arn  = "arn:aws:secretsmanager:us-east-1:1:secret:test"
)

var raw = []byte("localeflow-test-key-00000001")

func TestFromEnvAndValidate(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string // substring of the error; "" = valid
	}{
		{"hex", map[string]string{stem + "_HEX": " " + hex.EncodeToString(raw) + "\n"}, ""},
		{"arn", map[string]string{stem + "_SECRET_ARN": arn}, ""},
		{"neither", map[string]string{}, "set exactly one of LOCALEFLOW_TEST_KEY_SECRET_ARN and LOCALEFLOW_TEST_KEY_HEX"},
		{"both", map[string]string{stem + "_SECRET_ARN": arn, stem + "_HEX": hex.EncodeToString(raw)}, "exactly one"},
		{"not an arn", map[string]string{stem + "_SECRET_ARN": "name"}, "LOCALEFLOW_TEST_KEY_SECRET_ARN must be an ARN"},
		{"not hex", map[string]string{stem + "_HEX": "zz"}, "LOCALEFLOW_TEST_KEY_HEX: key is not hex"},
		{"short", map[string]string{stem + "_HEX": "abcd"}, "at least 16 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := secretkey.FromEnv(func(k string) string { return tt.env[k] }, stem)
			err := src.Validate(secretkey.MinBytes(16))
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
			if strings.Contains(err.Error(), hex.EncodeToString(raw)) {
				t.Fatal("error carries the key")
			}
		})
	}
}

func TestEd25519(t *testing.T) {
	for _, n := range []int{32, 64} {
		if err := secretkey.Ed25519(make([]byte, n)); err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
	}
	for _, n := range []int{0, 16, 31, 33, 63, 65} {
		if err := secretkey.Ed25519(make([]byte, n)); err == nil {
			t.Fatalf("%d bytes accepted", n)
		}
	}
}

type fakeSecrets struct {
	out *secretsmanager.GetSecretValueOutput
	err error
}

func (f fakeSecrets) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	if aws.ToString(in.SecretId) != arn {
		return nil, errors.New("wrong secret id")
	}
	return f.out, f.err
}

func TestLoad(t *testing.T) {
	fromSecret := secretkey.Source{Stem: stem, SecretARN: arn}
	tests := []struct {
		name string
		src  secretkey.Source
		sm   secretkey.SecretsManagerAPI
		want string // substring of the error; "" = the key
	}{
		{"hex", secretkey.Source{Stem: stem, Hex: hex.EncodeToString(raw)}, nil, ""},
		{"hex string", fromSecret, fakeSecrets{out: &secretsmanager.GetSecretValueOutput{SecretString: aws.String(hex.EncodeToString(raw) + "\n")}}, ""},
		{"binary", fromSecret, fakeSecrets{out: &secretsmanager.GetSecretValueOutput{SecretBinary: raw}}, ""},
		{"short binary", fromSecret, fakeSecrets{out: &secretsmanager.GetSecretValueOutput{SecretBinary: []byte("x")}}, "test key secret: key must have at least 16 bytes"},
		{"not hex", fromSecret, fakeSecrets{out: &secretsmanager.GetSecretValueOutput{SecretString: aws.String("plain words")}}, "test key secret: key is not hex"},
		{"empty", fromSecret, fakeSecrets{out: &secretsmanager.GetSecretValueOutput{}}, "test key secret is empty"},
		{"api error", fromSecret, fakeSecrets{err: errors.New("denied")}, "read test key secret: denied"},
		{"no client", fromSecret, nil, "no Secrets Manager client"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, err := tt.src.Load(context.Background(), tt.sm, "test", secretkey.MinBytes(16))
			if tt.want == "" {
				if err != nil || string(key) != string(raw) {
					t.Fatalf("key %q, %v", key, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}
