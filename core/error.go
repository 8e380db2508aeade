package core

import (
	"errors"
	"fmt"
)

// Error is a failure with a stable, content-free code. Codes match
// ErrorCodePattern and are part of the contract: operators alert on them and
// other systems branch on them, so they never change meaning.
type Error struct {
	// Code is the stable code, for example "lifecycle_monitor.claim_lost".
	Code string
	// Retryable says whether the same operation may succeed later.
	Retryable bool
	// Err is the underlying cause, if any. It is for logs and errors.Is; it
	// must never carry translation text or secrets.
	Err error
}

// Error implements error; the message is the code, optionally with the cause.
func (e *Error) Error() string {
	if e.Err != nil {
		return e.Code + ": " + e.Err.Error()
	}
	return e.Code
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is matches another *Error with the same code, so errors.Is(err,
// core.Fail("x")) works as a code comparison.
func (e *Error) Is(target error) bool {
	var other *Error
	if errors.As(target, &other) {
		return other.Code == e.Code
	}
	return false
}

// Fail returns a non-retryable error with code. An invalid code panics: codes
// are constants chosen by programmers, never outside input.
func Fail(code string) *Error {
	mustCode(code)
	return &Error{Code: code}
}

// Retry returns a retryable error with code.
func Retry(code string) *Error {
	mustCode(code)
	return &Error{Code: code, Retryable: true}
}

// Wrap returns an error with code whose cause is err.
func Wrap(code string, retryable bool, err error) *Error {
	mustCode(code)
	return &Error{Code: code, Retryable: retryable, Err: err}
}

func mustCode(code string) {
	if !ValidErrorCode(code) {
		panic(fmt.Sprintf("core: invalid error code %q", code))
	}
}

// CodeOf returns the code of the first *Error in err's chain, or "" when
// there is none.
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// IsRetryable reports whether err's first *Error is retryable. An error
// without a code is not retryable: unknown failures are not retried blindly.
func IsRetryable(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		return e.Retryable
	}
	return false
}

// HasCode reports whether err carries code.
func HasCode(err error, code string) bool { return CodeOf(err) == code }
