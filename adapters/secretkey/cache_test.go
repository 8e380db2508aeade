package secretkey_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/localeflow/localeflow/adapters/secretkey"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/internal/emf"
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

// TestMalformedRereadIsLoud: finding 7. A secret changed to a malformed
// set ("NEW,OLD,": a trailing comma makes an empty third key) was kept
// silently, so rotation step 2 looked done while the old set stayed in
// use. The re-read keeps the old set and says so: one ERROR line naming
// the key and its secret (never a key) and one KeyReloadFailures metric
// line, again on each retry, until the secret is fixed.
func TestMalformedRereadIsLoud(t *testing.T) {
	old, next := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	sm := &mutableSecret{value: hex.EncodeToString(old)}
	now := time.Unix(1764460800, 0)
	clock := core.ClockFunc(func() time.Time { return now })
	c, err := secretkey.NewCache(context.Background(), secretkey.Source{Stem: stem, SecretARN: arn}, sm, "event", secretkey.MinBytes(16), time.Minute, clock)
	if err != nil {
		t.Fatal(err)
	}
	var logs, metrics bytes.Buffer
	c.Alarm(slog.New(slog.NewJSONHandler(&logs, nil)), &metrics, "dep-a", "coordinator")
	sm.set(hex.EncodeToString(next)+","+hex.EncodeToString(old)+",", nil)
	now = now.Add(time.Minute)
	keys, err := c.Keys(context.Background())
	if err != nil || len(keys) != 1 || !bytes.Equal(keys[0], old) {
		t.Fatalf("keys %x, %v: want the old set kept", keys, err)
	}
	line := logs.String()
	for _, want := range []string{`"level":"ERROR"`, secretkey.CodeReloadFailed, arn, stem + "_SECRET_ARN", `"key":"event"`, "key 3"} {
		if !strings.Contains(line, want) {
			t.Errorf("log lacks %s: %s", want, line)
		}
	}
	if strings.Contains(line, hex.EncodeToString(old)) || strings.Contains(line, hex.EncodeToString(next)) {
		t.Fatalf("a key is in the log: %s", line)
	}
	names, err := emf.Names(bytes.TrimSpace(metrics.Bytes()))
	if err != nil || len(names) != 1 || names[0] != contract.MetricKeyReloadFailures {
		t.Fatalf("metric names %v, %v: %s", names, err, metrics.String())
	}
	for _, want := range []string{`"Function":"coordinator"`, `"Key":"event"`, `"Deployment":"dep-a"`} {
		if !strings.Contains(metrics.String(), want) {
			t.Errorf("metric lacks %s: %s", want, metrics.String())
		}
	}
	// Retried 30 s later, loud again; fixed, the new set is used.
	now = now.Add(31 * time.Second)
	_, _ = c.Keys(context.Background())
	if n := strings.Count(logs.String(), secretkey.CodeReloadFailed); n != 2 {
		t.Fatalf("%d error lines after the retry, want 2", n)
	}
	sm.set(hex.EncodeToString(next)+","+hex.EncodeToString(old), nil)
	now = now.Add(31 * time.Second)
	if keys, _ := c.Keys(context.Background()); len(keys) != 2 || !bytes.Equal(keys[0], next) {
		t.Fatalf("fixed secret not used: %x", keys)
	}
}

// TestRefreshRereadsAtMostEvery10s: Refresh (a verifier met a key its set
// lacks) reads the secret before the TTL, but not more often than
// RefreshAfter.
func TestRefreshRereadsAtMostEvery10s(t *testing.T) {
	old, next := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	sm := &mutableSecret{value: hex.EncodeToString(old)}
	now := time.Unix(1764460800, 0)
	clock := core.ClockFunc(func() time.Time { return now })
	c, err := secretkey.NewCache(context.Background(), secretkey.Source{Stem: stem, SecretARN: arn}, sm, "event", secretkey.MinBytes(16), time.Hour, clock)
	if err != nil {
		t.Fatal(err)
	}
	sm.set(hex.EncodeToString(next)+","+hex.EncodeToString(old), nil)
	if keys, _ := c.Refresh(context.Background()); len(keys) != 1 {
		t.Fatalf("refresh right after the read re-read the secret: %x", keys)
	}
	now = now.Add(secretkey.RefreshAfter)
	if keys, _ := c.Refresh(context.Background()); len(keys) != 2 || !bytes.Equal(keys[0], next) {
		t.Fatalf("refresh after 10 s: %x", keys)
	}
	if sm.reads != 2 {
		t.Fatalf("%d reads, want 2", sm.reads)
	}
}

// TestRefreshReadSaysWhenItRead: a verifier calls a record under none of
// the keys final only under a set read after it met the record
// (docs/design.md "Plan seal"): RefreshRead returns when the set it
// returns was read, the earlier read when the 10 s limit refused the
// re-read or the re-read failed.
func TestRefreshReadSaysWhenItRead(t *testing.T) {
	old, next := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	sm := &mutableSecret{value: hex.EncodeToString(old)}
	start := time.Unix(1764460800, 0)
	now := start
	clock := core.ClockFunc(func() time.Time { return now })
	c, err := secretkey.NewCache(context.Background(), secretkey.Source{Stem: stem, SecretARN: arn}, sm, "event", secretkey.MinBytes(16), time.Hour, clock)
	if err != nil {
		t.Fatal(err)
	}
	sm.set(hex.EncodeToString(next)+","+hex.EncodeToString(old), nil)
	now = now.Add(secretkey.RefreshAfter - time.Millisecond)
	if keys, at, err := c.RefreshRead(context.Background()); err != nil || !at.Equal(start) || len(keys) != 1 {
		t.Fatalf("refused re-read = %x, %v, %v; want the set read at the start", keys, at, err)
	}
	now = now.Add(time.Millisecond)
	read := now
	if keys, at, err := c.RefreshRead(context.Background()); err != nil || !at.Equal(read) || len(keys) != 2 || !bytes.Equal(keys[0], next) {
		t.Fatalf("re-read after 10 s = %x, %v, %v", keys, at, err)
	}
	sm.set("", errors.New("unavailable"))
	now = now.Add(secretkey.RefreshAfter)
	if keys, at, err := c.RefreshRead(context.Background()); err != nil || !at.Equal(read) || len(keys) != 2 {
		t.Fatalf("failed re-read = %x, %v, %v; want the set in use, read before", keys, at, err)
	}
	sm.set(hex.EncodeToString(next)+","+hex.EncodeToString(old)+",", nil) // malformed
	now = now.Add(secretkey.RefreshAfter)
	if _, at, _ := c.RefreshRead(context.Background()); !at.Equal(read) {
		t.Fatalf("a malformed set counts as read at %v", at)
	}
	if sm.reads != 4 {
		t.Fatalf("%d reads, want 4", sm.reads)
	}
}
