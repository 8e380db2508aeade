package release

// State is the lease state of one evidence or delivery record.
//
// Transitions (each one a versioned conditional write; docs/design.md
// "Evidence and delivery leases"):
//
//	create            → pending     (evidence: the job is first selected; delivery: prepared)
//	pending|retry_wait → leased     (claim: due and attempts < max; attempts+1, owner, token)
//	leased → succeeded  (the attempt succeeded; evidence also when the job was approved meanwhile)
//	leased → retry_wait (retryable failure with attempts left; next attempt after the backoff)
//	leased → failed     (a failure that is not retryable, or no attempts left)
//	leased → retry_wait|failed (lease expired, seen by the next claim: last error "lease_expired")
//
// succeeded and failed are final (a failed record may be acknowledged).
type State string

// The states; the stored status attribute holds exactly these strings.
const (
	StatePending   State = "pending"
	StateLeased    State = "leased"
	StateRetryWait State = "retry_wait"
	StateSucceeded State = "succeeded"
	StateFailed    State = "failed"
)

// States lists every state in lifecycle order (pending, leased,
// retry_wait, succeeded, failed).
func States() []State {
	return []State{StatePending, StateLeased, StateRetryWait, StateSucceeded, StateFailed}
}

// Valid reports whether s is a known state.
func (s State) Valid() bool {
	switch s {
	case StatePending, StateLeased, StateRetryWait, StateSucceeded, StateFailed:
		return true
	}
	return false
}

// Claimable reports whether a record in state s may be claimed once due
// (pending or retry_wait).
func (s State) Claimable() bool { return s == StatePending || s == StateRetryWait }

// Open reports whether s still needs a worker (pending, leased or
// retry_wait).
func (s State) Open() bool {
	return s == StatePending || s == StateLeased || s == StateRetryWait
}

// Final reports whether s ends the record's attempts.
func (s State) Final() bool { return s == StateSucceeded || s == StateFailed }
