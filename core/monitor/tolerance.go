package monitor

import (
	"time"

	"github.com/localeflow/localeflow/core"
)

// OutageTolerance is the longest CMS outage a change is guaranteed to
// survive with c (defaults applied): the sum of the least backoffs between
// its MaxConsecutiveFailures consecutive failed polls. Each backoff is
// jittered over [d/2, d] (Config.RetryDelayFor), so the guarantee is
// Σ_{k=1}^{F-1} ⌈min(MaxDelay, BaseDelay·2^(k-1))/2⌉ (core.JitterFloor).
// An outage shorter than this always leaves a poll after it ends (its
// request timeouts and the servers' Retry-After only lengthen it). With
// the defaults (5 failures, 5 s base, 300 s max) it is 37.5 s; without
// jitter it was 75 s (UnjitteredOutageTolerance), which is now the most a
// change can survive, not the least.
func OutageTolerance(c Config) time.Duration {
	var total time.Duration
	for k := 1; k < c.MaxConsecutiveFailures; k++ {
		total += core.JitterFloor(c.RetryDelay(k))
	}
	return total
}

// UnjitteredOutageTolerance is Σ_{k=1}^{F-1} RetryDelay(k): the outage a
// change survives when every jittered backoff lands on its upper bound.
func UnjitteredOutageTolerance(c Config) time.Duration {
	var total time.Duration
	for k := 1; k < c.MaxConsecutiveFailures; k++ {
		total += c.RetryDelay(k)
	}
	return total
}
