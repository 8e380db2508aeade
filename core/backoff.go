package core

import "time"

// maxBackoffShifts bounds the doubling: past it every delay is the cap.
const maxBackoffShifts = 40

// Backoff is the delay after failed attempt number attempt (1, 2, …):
// min(maximum, base·2^(attempt−1)); an attempt below 1 counts as 1, and a
// product that would overflow is maximum.
//
// It is pure (a function of its arguments only) and has no jitter: every
// caller's schedule is deterministic. The monitor's retry schedule and the
// evidence and delivery schedule are documented contracts (docs/design.md
// "Monitor states and transitions", "Evidence and delivery leases") that
// the outage tolerance and the tests compute exactly, and the one
// in-process retry (health's BatchGetItem of unprocessed keys) never had
// jitter either.
func Backoff(attempt int, base, maximum time.Duration) time.Duration {
	shift := max(0, attempt-1)
	if shift > maxBackoffShifts {
		return maximum
	}
	d := base << shift
	if d <= 0 || d > maximum || d>>shift != base {
		return maximum
	}
	return d
}
