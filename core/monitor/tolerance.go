package monitor

import "time"

// OutageTolerance is the longest CMS outage a change is guaranteed to
// survive with c (defaults applied): the sum of the backoffs between its
// MaxConsecutiveFailures consecutive failed polls,
// Σ_{k=1}^{F-1} min(MaxDelay, BaseDelay·2^(k-1)). An outage shorter than
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
