package secretkey_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/localeflow/localeflow/adapters/secretkey"
	"github.com/localeflow/localeflow/core"
)

// mutableSecret is a secret whose value an operator changes.
type mutableSecret struct {
	mu    sync.Mutex
	value string
	err   error
	reads int
}

func (m *mutableSecret) set(v string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.value, m.err = v, err
}

func (m *mutableSecret) GetSecretValue(context.Context, *secretsmanager.GetSecretValueInput, ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	if m.err != nil {
		return nil, m.err
	}
	return &secretsmanager.GetSecretValueOutput{SecretString: aws.String(m.value)}, nil
}

// TestCacheRereadsTheSecretOnItsTTL: keys were read once per cold start,
// so a rotated secret reached a running function only after a redeploy;
// the cache re-reads it once the TTL has passed, and keeps the last good
// set when a re-read fails.
func TestCacheRereadsTheSecretOnItsTTL(t *testing.T) {
	old, next := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	sm := &mutableSecret{value: hex.EncodeToString(old)}
	now := time.Unix(1764460800, 0)
	clock := core.ClockFunc(func() time.Time { return now })
	c, err := secretkey.NewCache(context.Background(), secretkey.Source{Stem: stem, SecretARN: arn}, sm, "event", secretkey.MinBytes(16), time.Minute, clock)
	if err != nil {
		t.Fatal(err)
	}
	first := func() []byte {
		keys, err := c.Keys(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return keys[0]
	}
	sm.set(hex.EncodeToString(next)+","+hex.EncodeToString(old), nil)
	now = now.Add(59 * time.Second)
	if !bytes.Equal(first(), old) || sm.reads != 1 {
		t.Fatalf("re-read before the TTL (%d reads)", sm.reads)
	}
	now = now.Add(time.Second)
	if !bytes.Equal(first(), next) || sm.reads != 2 {
		t.Fatalf("not re-read after the TTL (%d reads)", sm.reads)
	}
	sm.set("", errors.New("throttled"))
	now = now.Add(time.Minute)
	if !bytes.Equal(first(), next) {
		t.Fatal("a failed re-read dropped the keys")
	}
}
