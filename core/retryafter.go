package core

import (
	"errors"
	"time"
)

// retryAfter carries a server's Retry-After with an error.
type retryAfter struct {
	err   error
	after time.Duration
}

func (r retryAfter) Error() string { return r.err.Error() }
func (r retryAfter) Unwrap() error { return r.err }

// WithRetryAfter attaches a server's Retry-After (after > 0) to err; the
// code, retryability and errors.Is/As of err are unchanged.
func WithRetryAfter(err error, after time.Duration) error {
	if err == nil || after <= 0 {
		return err
	}
	return retryAfter{err: err, after: after}
}

// RetryAfterOf is the Retry-After attached to err (0 when none): the
// caller must not retry earlier.
func RetryAfterOf(err error) time.Duration {
	var r retryAfter
	if errors.As(err, &r) {
		return r.after
	}
	return 0
}
