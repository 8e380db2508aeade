package core

import "time"

// Clock supplies the current time. Every core operation takes its `now` from
// an injected Clock so that tests and the fault suite can step time,
// including backwards.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// ClockFunc adapts a function to Clock.
type ClockFunc func() time.Time

// Now calls f.
func (f ClockFunc) Now() time.Time { return f() }

// Millis is t as integer milliseconds since the Unix epoch, the only time
// representation in storage (`*_ms` attributes).
func Millis(t time.Time) int64 { return t.UnixMilli() }

// FromMillis converts stored milliseconds to time.Time (UTC).
func FromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// ValidMillis reports whether ms is a plausible stored timestamp: not
// negative and before year 10000.
func ValidMillis(ms int64) bool { return ms >= 0 && ms < 253402300800000 }
