package core

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"time"
)

// maxBackoffShifts bounds the doubling: past it every delay is the cap.
const maxBackoffShifts = 40

// Backoff is the delay after failed attempt number attempt (1, 2, …):
// min(maximum, base·2^(attempt−1)); an attempt below 1 counts as 1, and a
// product that would overflow is maximum.
//
// It is pure (a function of its arguments only) and has no jitter itself:
// the monitor's retry schedule spreads it with Jitter (deterministic per
// change, docs/design.md "Monitor states and transitions"); the evidence
// and delivery schedule ("Evidence and delivery leases") and the one
// in-process retry (health's BatchGetItem of unprocessed keys) use it as
// is.
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

// Jitter spreads a backoff delay d over [d, d + d/2], deterministically:
// the point in that range is a function of key (a change's event id) and
// attempt only, so a run (and a simulation seed) replays exactly while
// changes that failed at the same instant retry at different ones. The
// documented delay d stays a floor: jitter only ever lengthens a wait, so
// the outage a change is guaranteed to survive is the one without jitter.
//
// It works in whole milliseconds (storage is integer ms): the result lies
// in [d_ms, d_ms + ⌊d_ms/2⌋] ms, JitterCeil(d) is its largest value. A
// delay below 2 ms is returned unchanged.
func Jitter(d time.Duration, key string, attempt int) time.Duration {
	ms := d.Milliseconds()
	if ms < 2 {
		return d
	}
	hi := JitterCeil(d).Milliseconds()
	sum := sha256.Sum256([]byte(fmt.Sprintf("localeflow.backoff.v1\n%s\n%d", key, attempt)))
	span := uint64(hi - ms + 1)
	return time.Duration(ms+int64(binary.BigEndian.Uint64(sum[:8])%span)) * time.Millisecond
}

// JitterCeil is the largest delay Jitter(d, …) returns: d_ms + ⌊d_ms/2⌋ ms
// (d itself below 2 ms).
func JitterCeil(d time.Duration) time.Duration {
	ms := d.Milliseconds()
	if ms < 2 {
		return d
	}
	return time.Duration(ms+ms/2) * time.Millisecond
}
