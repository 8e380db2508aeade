package reference

import (
	"encoding/hex"
	"flag"
	"fmt"
	"strings"
	"time"
)

// FaultFlags registers -latency, -jitter, -failure-rate and -seed on fs.
func FaultFlags(fs *flag.FlagSet, f *Faults) {
	fs.DurationVar(&f.Latency, "latency", 0, "fixed latency added to every answer (e.g. 50ms)")
	fs.DurationVar(&f.Jitter, "jitter", 0, "random extra latency, uniform in [0, jitter)")
	fs.Float64Var(&f.FailureRate, "failure-rate", 0, "share of requests answered HTTP 503 (0..1)")
	fs.Uint64Var(&f.Seed, "seed", 0, "seed of the random latency and failures (0: random)")
}

// HexKey reads a hex key from a flag value or, when empty, from the
// environment variable env; it needs at least minBytes bytes.
func HexKey(value, env string, getenv func(string) string, minBytes int) ([]byte, error) {
	v := strings.TrimSpace(value)
	if v == "" {
		v = strings.TrimSpace(getenv(env))
	}
	if v == "" {
		return nil, fmt.Errorf("missing key: pass the flag or set %s", env)
	}
	key, err := hex.DecodeString(v)
	if err != nil || len(key) < minBytes {
		return nil, fmt.Errorf("key (%s) must be hex of at least %d bytes", env, minBytes)
	}
	return key, nil
}

// DefaultWait bounds how long a stopping server waits.
const DefaultWait = 5 * time.Second
