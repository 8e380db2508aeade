package release

import (
	"crypto/rand"
	"encoding/base64"
	"time"

	"github.com/localeflow/localeflow/core"
)

// Lease bounds: at most 20 attempts and a lease of at most one hour
// (docs/design.md "Defaults"); lease_expired is the last error code of a
// lease that ran out.
const (
	MaxAttempts      = 20
	MaxLease         = 3600 * time.Second
	codeLeaseExpired = "lease_expired"
)

// Defaults of the evidence lease, attempts, approval TTL and delivery
// attempts (docs/design.md "Defaults"): the deployed coordinator's. The
// lease is below the function's 120 s timeout because the operation guard
// refuses evidence work when the invocation has less time left than the
// lease (plus its margin).
const (
	DefaultEvidenceLease       = 90 * time.Second
	DefaultEvidenceMaxAttempts = 5
	DefaultApprovalTTL         = 30 * 24 * time.Hour
	DefaultDeliveryMaxAttempts = 5
)

// newLeaseToken returns a random URL-safe token (a valid core token).
func newLeaseToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", core.Wrap("release.lease_token.unavailable", true, err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// expired applies lease expiry (docs/design.md "Evidence and delivery
// leases"): a leased record whose lease has run out becomes retry_wait (due
// now) or, with no attempts left, failed, with last error "lease_expired".
func (l Lease) expired(nowMS int64) (Lease, bool) {
	if l.Status != StateLeased || l.LeaseExpiresMS > nowMS {
		return l, false
	}
	n := l.cleared(nowMS)
	n.Status = StateRetryWait
	if l.Attempts >= l.MaxAttempts {
		n.Status = StateFailed
	}
	n.NextAttemptMS = nowMS
	n.LastErrorCode = codeLeaseExpired
	return n, true
}

func (l Lease) cleared(nowMS int64) Lease {
	l.LeaseOwner, l.LeaseToken, l.LeaseExpiresMS = "", "", 0
	l.UpdatedMS = nowMS
	return l
}

// claimable reports whether a worker may take the lease now.
func (l Lease) claimable(nowMS int64) bool {
	return l.Status.Claimable() &&
		l.NextAttemptMS <= nowMS && l.Attempts < l.MaxAttempts
}

func (l Lease) claimed(owner, token string, nowMS, leaseMS int64) Lease {
	l.Status = StateLeased
	l.Parked = false
	l.Attempts++
	l.LeaseOwner, l.LeaseToken = owner, token
	l.LeaseExpiresMS = nowMS + leaseMS
	l.LastErrorCode = ""
	l.UpdatedMS = nowMS
	return l
}

func (l Lease) succeeded(nowMS int64) Lease {
	n := l.cleared(nowMS)
	n.Status = StateSucceeded
	n.NextAttemptMS = nowMS
	n.LastErrorCode = ""
	return n
}

// The evidence and delivery backoff is min(BackoffMax, 5 s·2^(attempts-1)).
const (
	backoffBase = 5 * time.Second
	BackoffMax  = time.Hour
)

// backoff is the evidence and delivery retry delay after `attempts`
// attempts, in milliseconds (core.Backoff; attempts below 1 count as 1).
// It is deterministic, without jitter: the schedule is documented in
// docs/design.md "Evidence and delivery leases".
func backoff(attempts int) int64 {
	return core.Backoff(attempts, backoffBase, BackoffMax).Milliseconds()
}

// MaxRetryAfter caps an honoured Retry-After, as the poller's (a server
// asking for longer is retried after this; the attempt still counts).
const MaxRetryAfter = time.Hour

// failed records a failed attempt: final when the error is not retryable
// or no attempts are left, else retry_wait after the longer of the backoff
// and the server's Retry-After (retryAfter, capped at MaxRetryAfter; 0
// when the server named none).
func (l Lease) failed(code string, retryable bool, nowMS int64, retryAfter time.Duration) Lease {
	n := l.cleared(nowMS)
	if !retryable || l.Attempts >= l.MaxAttempts {
		n.Status = StateFailed
		n.NextAttemptMS = nowMS
	} else {
		n.Status = StateRetryWait
		n.NextAttemptMS = nowMS + max(backoff(l.Attempts), min(max(retryAfter, 0), MaxRetryAfter).Milliseconds())
	}
	n.LastErrorCode = code
	return n
}

// holds reports whether the lease is still held by owner/token at now.
// lostCode and expiredCode are the caller's domain codes.
func (l Lease) holds(owner, token string, nowMS int64, lostCode, expiredCode string) error {
	if l.Status != StateLeased || l.LeaseOwner != owner || l.LeaseToken != token {
		return core.Fail(lostCode)
	}
	if l.LeaseExpiresMS <= nowMS {
		return core.Fail(expiredCode)
	}
	return nil
}

// valid checks a stored lease against the lease field rules of
// docs/design.md "Release records": a known status, 1 <= max_attempts <= 20,
// 0 <= attempts <= max_attempts, valid times, owner, token and expiry only
// while leased (expiry after next_attempt_ms), a last error code only in
// retry_wait and failed, and an acknowledgement only on a failed record.
func (l Lease) valid() bool {
	if !l.Status.Valid() {
		return false
	}
	if l.MaxAttempts < 1 || l.MaxAttempts > MaxAttempts || l.Attempts < 0 || l.Attempts > l.MaxAttempts {
		return false
	}
	if !core.ValidMillis(l.NextAttemptMS) || !core.ValidMillis(l.CreatedMS) || !core.ValidMillis(l.UpdatedMS) {
		return false
	}
	if l.Status == StateLeased {
		if !core.ValidToken(l.LeaseOwner) || !core.ValidToken(l.LeaseToken) ||
			!core.ValidMillis(l.LeaseExpiresMS) || l.LeaseExpiresMS <= l.NextAttemptMS {
			return false
		}
	} else if l.LeaseOwner != "" || l.LeaseToken != "" || l.LeaseExpiresMS != 0 {
		return false
	}
	if l.LastErrorCode != "" {
		if !core.ValidErrorCode(l.LastErrorCode) {
			return false
		}
		if l.Status == StatePending || l.Status == StateLeased || l.Status == StateSucceeded {
			return false
		}
	}
	// Only a failed record is acknowledged, at or after its last write.
	if l.AcknowledgedMS != 0 && (l.Status != StateFailed || !core.ValidMillis(l.AcknowledgedMS) || l.AcknowledgedMS < l.UpdatedMS) {
		return false
	}
	return true
}
