package monitor

import (
	"time"

	"github.com/localeflow/localeflow/core"
)

// OutageTolerance is the longest CMS outage a change is guaranteed to
// survive with c (defaults applied): the sum of the least backoffs between
// its MaxConsecutiveFailures consecutive failed polls,
// Σ_{k=1}^{F-1} min(MaxDelay, BaseDelay·2^(k-1)). Each backoff is
// jittered over [d, d + d/2] (Config.RetryDelayFor): jitter only lengthens
// a wait, so the guarantee is the unjittered sum. An outage shorter than
// this always leaves a poll after it ends (its request timeouts and the
// servers' Retry-After only lengthen it). With the defaults (5 failures,
// 5 s base, 300 s max) it is 75 s.
func OutageTolerance(c Config) time.Duration {
	var total time.Duration
	for k := 1; k < c.MaxConsecutiveFailures; k++ {
		total += c.RetryDelay(k)
	}
	return total
}

// OutageToleranceUpTo is Σ_{k=1}^{F-1} core.JitterCeil(RetryDelay(k)): the
// outage a change survives when every jittered backoff lands on its upper
// bound (112.5 s with the defaults), the most a change can survive.
func OutageToleranceUpTo(c Config) time.Duration {
	var total time.Duration
	for k := 1; k < c.MaxConsecutiveFailures; k++ {
		total += core.JitterCeil(c.RetryDelay(k))
	}
	return total
}
