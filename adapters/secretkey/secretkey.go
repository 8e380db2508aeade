package secretkey

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

// SecretsManagerAPI is the one Secrets Manager method used, with the SDK's
// exact signature.
type SecretsManagerAPI interface {
	GetSecretValue(ctx context.Context, params *secretsmanager.GetSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

var _ SecretsManagerAPI = (*secretsmanager.Client)(nil)

// Check accepts or refuses decoded key material.
type Check func(key []byte) error

// MinBytes accepts keys of at least n bytes (HMAC keys).
func MinBytes(n int) Check {
	return func(key []byte) error {
		if len(key) < n {
			return fmt.Errorf("key must have at least %d bytes", n)
		}
		return nil
	}
}

// Ed25519 accepts a 32-byte seed or a 64-byte private key.
func Ed25519(key []byte) error {
	if len(key) != ed25519.SeedSize && len(key) != ed25519.PrivateKeySize {
		return errors.New("Ed25519 key must be a 32-byte seed or a 64-byte private key")
	}
	return nil
}

// Source is where one key comes from.
type Source struct {
	// Stem names the variables: <Stem>_SECRET_ARN and <Stem>_HEX.
	Stem      string
	SecretARN string
	Hex       string
}

// FromEnv reads the two variables of stem through getenv.
func FromEnv(getenv func(string) string, stem string) Source {
	return Source{
		Stem:      stem,
		SecretARN: strings.TrimSpace(getenv(stem + "_SECRET_ARN")),
		Hex:       strings.TrimSpace(getenv(stem + "_HEX")),
	}
}

// ARNVar is the name of the secret ARN variable.
func (s Source) ARNVar() string { return s.Stem + "_SECRET_ARN" }

// HexVar is the name of the hex variable.
func (s Source) HexVar() string { return s.Stem + "_HEX" }

// Validate checks what can be checked without AWS: exactly one of the two
// variables is set, the secret is named by an ARN, and hex key material
// decodes and passes check.
func (s Source) Validate(check Check) error {
	switch {
	case (s.SecretARN == "") == (s.Hex == ""):
		return fmt.Errorf("set exactly one of %s and %s", s.ARNVar(), s.HexVar())
	case s.SecretARN != "" && !strings.HasPrefix(s.SecretARN, "arn:"):
		return fmt.Errorf("%s must be an ARN", s.ARNVar())
	case s.Hex != "":
		if _, err := DecodeHexSet(s.Hex, check); err != nil {
			return fmt.Errorf("%s: %w", s.HexVar(), err)
		}
	}
	return nil
}

// Load returns the current key: the first of LoadSet.
func (s Source) Load(ctx context.Context, sm SecretsManagerAPI, label string, check Check) ([]byte, error) {
	keys, err := s.LoadSet(ctx, sm, label, check)
	if err != nil {
		return nil, err
	}
	return keys[0], nil
}

// LoadSet returns the key set: decoded from Hex, or read from the secret
// (SecretString = hex, SecretBinary = raw bytes), each key passed through
// check. A key set is "current,previous,…" (hex keys separated by commas,
// at most MaxKeys): the first key signs, every key verifies, so a key can
// be rotated without refusing what the other side still signs with the
// previous one. label names the key in errors ("cms" gives "read cms key
// secret: …").
func (s Source) LoadSet(ctx context.Context, sm SecretsManagerAPI, label string, check Check) ([][]byte, error) {
	if s.Hex != "" {
		return DecodeHexSet(s.Hex, check)
	}
	if sm == nil {
		return nil, fmt.Errorf("%s key: no Secrets Manager client", label)
	}
	out, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(s.SecretARN)})
	if err != nil {
		return nil, fmt.Errorf("read %s key secret: %w", label, err)
	}
	var keys [][]byte
	switch {
	case len(out.SecretBinary) > 0:
		keys, err = [][]byte{out.SecretBinary}, check(out.SecretBinary)
	case out.SecretString != nil:
		keys, err = DecodeHexSet(*out.SecretString, check)
	default:
		return nil, fmt.Errorf("%s key secret is empty", label)
	}
	if err != nil {
		return nil, fmt.Errorf("%s key secret: %w", label, err)
	}
	return keys, nil
}

// MaxKeys bounds a key set (current plus previous keys).
const MaxKeys = 4

// DecodeHexSet decodes "hex[,hex…]" (space around each key ignored), each
// key passed through check; duplicates and more than MaxKeys keys are
// refused.
func DecodeHexSet(s string, check Check) ([][]byte, error) {
	parts := strings.Split(s, ",")
	if len(parts) > MaxKeys {
		return nil, fmt.Errorf("a key set has at most %d keys", MaxKeys)
	}
	seen := map[string]bool{}
	keys := make([][]byte, 0, len(parts))
	for i, p := range parts {
		key, err := DecodeHex(p, check)
		if err != nil && len(parts) == 1 {
			return nil, err
		}
		if err != nil {
			return nil, fmt.Errorf("key %d: %w", i+1, err)
		}
		if seen[string(key)] {
			return nil, fmt.Errorf("key %d repeats an earlier key", i+1)
		}
		seen[string(key)] = true
		keys = append(keys, key)
	}
	return keys, nil
}

// DecodeHex decodes hex key material (surrounding space ignored) and
// passes it through check.
func DecodeHex(s string, check Check) ([]byte, error) {
	key, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, errors.New("key is not hex")
	}
	if err := check(key); err != nil {
		return nil, err
	}
	return key, nil
}
