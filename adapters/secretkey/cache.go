package secretkey

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/internal/emf"
)

// CodeReloadFailed is logged (ERROR) when a key set's secret cannot be
// read again or holds a malformed set (e.g. "NEW,OLD,"): the previous set
// stays in use.
const CodeReloadFailed = "secretkey.reload_failed"

// DefaultTTL is how long a loaded key set is used before its secret is
// read again (LOCALEFLOW_KEY_TTL).
const DefaultTTL = 5 * time.Minute

// retryAfterFailure is how long a cached set is kept after a failed
// re-read before the next attempt.
const retryAfterFailure = 30 * time.Second

// Cache re-reads a key set from its source once TTL has passed, so a
// rotated secret reaches running functions without a cold start. A failed
// re-read keeps the last good set (and retries 30 s later): a Secrets
// Manager hiccup never turns into refused signatures. The failure is loud
// once Alarm is set: one ERROR line naming the key and its secret (never
// the value) and one KeyReloadFailures metric per failed read. Safe for
// concurrent use.
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
	read   time.Time // the last read of the source, good or not
	good   time.Time // the last good read (keys)

	log        *slog.Logger
	metrics    io.Writer
	deployment string
	function   string
}

// Alarm makes a failed re-read loud: an ERROR line on log (code
// CodeReloadFailed, the key's label, its variable and secret ARN, the
// error) and one MetricLine on metrics (os.Stdout in Lambda). Call it
// before the cache is shared.
func (c *Cache) Alarm(log *slog.Logger, metrics io.Writer, deployment, function string) *Cache {
	c.log, c.metrics, c.deployment, c.function = log, metrics, deployment, function
	return c
}

// MetricLine is the EMF document of one failed re-read:
// contract.MetricKeyReloadFailures = 1 under [Deployment, Function] and
// [Deployment, Function, Key].
func MetricLine(deployment, function, key string, now time.Time) []byte {
	return emf.Line(deployment, now.UnixMilli(), map[string]string{contract.MetricFunctionDimension: function, contract.MetricKeyDimension: key},
		emf.Group{
			Dimensions: [][]string{{contract.MetricFunctionDimension}, {contract.MetricFunctionDimension, contract.MetricKeyDimension}},
			Metrics:    []emf.Metric{{Name: contract.MetricKeyReloadFailures, Value: 1}},
		})
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
	now := clock.Now()
	c.keys, c.expiry, c.read, c.good = keys, now.Add(ttl), now, now
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
	return c.reload(ctx, now), nil
}

// RefreshAfter is the shortest time between two reads forced by Refresh.
const RefreshAfter = 10 * time.Second

// Refresh re-reads the set now, unless it was read less than RefreshAfter
// ago, and returns the set in use. A verifier calls it when a stored
// record names (or needs) a key its set lacks: another execution
// environment may already run with a newer set (a rotation step whose TTL
// has not passed here yet).
func (c *Cache) Refresh(ctx context.Context) ([][]byte, error) {
	keys, _, err := c.RefreshRead(ctx)
	return keys, err
}

// RefreshRead is Refresh also returning when the set it returns was read
// from the secret (readAt: its last good read). When the rate limit
// refused the re-read (the set was read less than RefreshAfter ago) or
// the re-read failed, readAt is older than this call: the set may predate
// a record another environment made with a newer set since, and a
// verifier must not call a record under none of its keys final on it
// (docs/design.md "Plan seal").
func (c *Cache) RefreshRead(ctx context.Context) (keys [][]byte, readAt time.Time, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	if now.Sub(c.read) < RefreshAfter {
		return c.keys, c.good, nil
	}
	return c.reload(ctx, now), c.good, nil
}

// reload reads the source; on failure it keeps the set, says so (Alarm)
// and retries after retryAfterFailure. Called with mu held.
func (c *Cache) reload(ctx context.Context, now time.Time) [][]byte {
	c.read = now
	keys, err := c.src.LoadSet(ctx, c.sm, c.label, c.check)
	if err != nil {
		c.expiry = now.Add(retryAfterFailure)
		c.alarm(ctx, err)
		return c.keys
	}
	c.keys, c.expiry, c.good = keys, now.Add(c.ttl), now
	return c.keys
}

// alarm reports a failed re-read. The error names the key and what is
// wrong with the set ("key 3: key must have at least 16 bytes"), never key
// material.
func (c *Cache) alarm(ctx context.Context, err error) {
	if c.log != nil {
		c.log.ErrorContext(ctx, "key set re-read failed: the previous set stays in use",
			"code", CodeReloadFailed, "key", c.label, "variable", c.src.ARNVar(), "secret", c.src.SecretARN,
			"keys_in_use", len(c.keys), "retry_in_s", int(retryAfterFailure/time.Second), "error", err.Error())
	}
	if c.metrics != nil {
		_, _ = c.metrics.Write(append(MetricLine(c.deployment, c.function, strings.ToLower(c.label), c.clock.Now()), '\n'))
	}
}
