package monitor

import (
	"time"

	"github.com/localeflow/localeflow/core"
)

// Defaults and limits (docs/design.md "Defaults").
const (
	DefaultPollInterval           = 30 * time.Second
	DefaultBaseDelay              = 5 * time.Second
	DefaultMaxDelay               = 300 * time.Second
	DefaultLease                  = 600 * time.Second
	DefaultMaxConsecutiveFailures = 5
	DefaultWorkerID               = "worker"
	DefaultHintMinGap             = 5 * time.Second
	// DefaultSweepGrace is how long past its wake time a change is left to
	// its queued message before a sweep polls it (docs/design.md "The
	// sweep's grace period"). MaxSweepGrace is the SQS DelaySeconds cap.
	DefaultSweepGrace = 30 * time.Second
	MaxSweepGrace     = 900 * time.Second

	MaxDelay    = 86_400 * time.Second
	MaxLease    = 86_400 * time.Second
	MaxFailures = 20
	minDuration = time.Millisecond
)

// Config tunes a Service. Zero fields take the defaults (WithDefaults).
type Config struct {
	// WorkerID names the lease owner (a token of at most 128 characters).
	WorkerID string
	// PollInterval is the wait after a non-terminal answer.
	PollInterval time.Duration
	// BaseDelay and MaxDelay bound the retry backoff.
	BaseDelay time.Duration
	MaxDelay  time.Duration
	// Lease is how long a claim is held; it must outlast the CMS client's
	// timeout.
	Lease time.Duration
	// MaxConsecutiveFailures is bound into each registration (1..20).
	MaxConsecutiveFailures int
	// OutboxGrace is how long an owed outcome is left to the path that
	// finished the change before a sweep re-publishes it (OutboxGrace
	// below, when zero).
	OutboxGrace time.Duration
	// HintMinGap is the least time between two hints that move one
	// change's next poll forward (DefaultHintMinGap when zero): a burst of
	// hints for one change costs at most one extra poll per gap.
	HintMinGap time.Duration
	// SweepGrace is how long a due change is left to its queued SQS
	// message before a sweep claims it: a sweep lists only wake times at
	// or before now − SweepGrace (DefaultSweepGrace when zero; whole
	// milliseconds in (0, MaxSweepGrace]). A message due at T is visible
	// by T + 1 s (whole DelaySeconds) and claimed at once; the grace
	// keeps the sweep from polling ahead of it (the message's claim would
	// then be refused, a billed write), and a change whose message was
	// lost is still polled, one grace later.
	SweepGrace time.Duration
}

// DefaultConfig is the configuration with every default.
func DefaultConfig() Config { return Config{}.WithDefaults() }

// WithDefaults fills zero fields with the defaults.
func (c Config) WithDefaults() Config {
	if c.WorkerID == "" {
		c.WorkerID = DefaultWorkerID
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.BaseDelay == 0 {
		c.BaseDelay = DefaultBaseDelay
	}
	if c.MaxDelay == 0 {
		c.MaxDelay = DefaultMaxDelay
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.MaxConsecutiveFailures == 0 {
		c.MaxConsecutiveFailures = DefaultMaxConsecutiveFailures
	}
	if c.OutboxGrace == 0 {
		c.OutboxGrace = OutboxGrace
	}
	if c.HintMinGap == 0 {
		c.HintMinGap = DefaultHintMinGap
	}
	if c.SweepGrace == 0 {
		c.SweepGrace = DefaultSweepGrace
	}
	return c
}

// Validate checks every limit: delays in (0, 86,400 s]
// with base ≤ max, the sweep grace in (0, 900 s], lease in (0, 86,400 s], hint gap in (0, 86,400 s]
// (lifecycle_monitor.hint_gap_invalid), failures in 1..20, a worker
// id token. Durations are whole milliseconds (storage is integer ms).
func (c Config) Validate() error {
	for _, d := range []time.Duration{c.PollInterval, c.BaseDelay, c.MaxDelay} {
		if !validDuration(d, MaxDelay) {
			return core.Fail(CodeDelayInvalid)
		}
	}
	if c.BaseDelay > c.MaxDelay {
		return core.Fail(CodeDelayInvalid)
	}
	if !validDuration(c.Lease, MaxLease) {
		return core.Fail(CodeLeaseInvalid)
	}
	if !validDuration(c.OutboxGrace, MaxDelay) {
		return core.Fail(CodeDelayInvalid)
	}
	if !validDuration(c.SweepGrace, MaxSweepGrace) {
		return core.Fail(CodeDelayInvalid)
	}
	if !validDuration(c.HintMinGap, MaxDelay) {
		return core.Fail(CodeHintGapInvalid)
	}
	if c.MaxConsecutiveFailures < 1 || c.MaxConsecutiveFailures > MaxFailures {
		return core.Fail(CodeMaxFailuresInvalid)
	}
	if !core.ValidTokenN(c.WorkerID, core.MaxWorkerIDLength) {
		return core.Fail(CodeWorkerInvalid)
	}
	return nil
}

func validDuration(d, maximum time.Duration) bool {
	return d >= minDuration && d <= maximum && d%time.Millisecond == 0
}

// RetryDelay is the backoff after failures consecutive failed polls, d =
// min(MaxDelay, BaseDelay·2^(failures-1)), failures below 1 counting as 1
// (core.Backoff): the lower bound of the jittered delay.
func (c Config) RetryDelay(failures int) time.Duration {
	return core.Backoff(failures, c.BaseDelay, c.MaxDelay)
}

// RetryDelayFor is the delay the change eventID waits after failures
// consecutive failed polls: RetryDelay spread over [d, d + d/2] by
// core.Jitter, deterministic per change and failure count (a run replays
// exactly; changes that failed together retry apart). A server's
// Retry-After stays a floor on it (Service.failure).
func (c Config) RetryDelayFor(eventID string, failures int) time.Duration {
	return core.Jitter(c.RetryDelay(failures), eventID, max(1, failures))
}

// LongestWait is the furthest ahead a poll is scheduled with c, a server's
// Retry-After aside: the poll interval, the lease, or a retry's backoff at
// its jittered ceiling (core.JitterCeil(MaxDelay), up to 1.5 × MaxDelay).
// A queue consumer that refuses messages due too far ahead must accept
// at least this.
func (c Config) LongestWait() time.Duration {
	return max(c.PollInterval, core.JitterCeil(c.MaxDelay), c.Lease)
}
