// Package secretkeytest is a stand-in for Secrets Manager in tests that
// wire a real secretkey.Cache: one secret an operator edits (a rotation),
// answered as it is at each read. It keeps the AWS SDK types out of the
// tests of core packages.
package secretkeytest

import (
	"context"
	"encoding/hex"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/localeflow/localeflow/adapters/secretkey"
)

// Secret is one key secret; its zero value answers an empty string.
type Secret struct {
	mu    sync.Mutex
	value string
	err   error
}

var _ secretkey.SecretsManagerAPI = (*Secret)(nil)

// Set makes the secret hold keys (hex, comma separated, as the runbooks
// write them), or makes every read fail with err when err is not nil.
func (s *Secret) Set(err error, keys ...[]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	hexes := make([]string, len(keys))
	for i, k := range keys {
		hexes[i] = hex.EncodeToString(k)
	}
	s.value, s.err = strings.Join(hexes, ","), err
}

// GetSecretValue answers the secret as it is now.
func (s *Secret) GetSecretValue(context.Context, *secretsmanager.GetSecretValueInput, ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	return &secretsmanager.GetSecretValueOutput{SecretString: aws.String(s.value)}, nil
}
