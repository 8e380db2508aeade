package secretkey

import (
	"context"
	"sync"
	"time"

	"github.com/localeflow/localeflow/core"
)

// DefaultTTL is how long a loaded key set is used before its secret is
// read again (LOCALEFLOW_KEY_TTL).
const DefaultTTL = 5 * time.Minute

// retryAfterFailure is how long a cached set is kept after a failed
// re-read before the next attempt.
const retryAfterFailure = 30 * time.Second

// Cache re-reads a key set from its source once TTL has passed, so a
// rotated secret reaches running functions without a cold start. A failed
// re-read keeps the last good set (and retries 30 s later): a Secrets
// Manager hiccup never turns into refused signatures. Safe for concurrent
// use.
type Cache struct {
	src   Source
	sm    SecretsManagerAPI
	label string
	check Check
	ttl   time.Duration
	clock core.Clock

	mu     sync.Mutex
	keys   [][]byte
	expiry time.Time
}

// NewCache loads the set once (an error here is a cold-start error) and
// returns a cache that re-reads it every ttl (0 means DefaultTTL).
func NewCache(ctx context.Context, src Source, sm SecretsManagerAPI, label string, check Check, ttl time.Duration, clock core.Clock) (*Cache, error) {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if clock == nil {
		clock = core.SystemClock{}
	}
	c := &Cache{src: src, sm: sm, label: label, check: check, ttl: ttl, clock: clock}
	keys, err := src.LoadSet(ctx, sm, label, check)
	if err != nil {
		return nil, err
	}
	c.keys, c.expiry = keys, clock.Now().Add(ttl)
	return c, nil
}

// Keys returns the current set (current key first), re-reading the secret
// when the TTL has passed.
func (c *Cache) Keys(ctx context.Context) ([][]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	if now.Before(c.expiry) {
		return c.keys, nil
	}
	keys, err := c.src.LoadSet(ctx, c.sm, c.label, c.check)
	if err != nil {
		c.expiry = now.Add(retryAfterFailure)
		return c.keys, nil
	}
	c.keys, c.expiry = keys, now.Add(c.ttl)
	return c.keys, nil
}
