package core

import (
	"errors"
	"time"
)

// retryAfterError carries a server's Retry-After with an error.
type retryAfterError struct {
	err   error
	after time.Duration
}

func (r retryAfterError) Error() string { return r.err.Error() }
func (r retryAfterError) Unwrap() error { return r.err }

// WithRetryAfter attaches a server's Retry-After (after > 0) to err; the
// code, retryability and errors.Is/As of err are unchanged.
func WithRetryAfter(err error, after time.Duration) error {
	if err == nil || after <= 0 {
		return err
	}
	return retryAfterError{err: err, after: after}
}

// RetryAfterOf is the Retry-After attached to err (0 when none): the
// caller must not retry earlier.
func RetryAfterOf(err error) time.Duration {
	var r retryAfterError
	if errors.As(err, &r) {
		return r.after
	}
	return 0
}
