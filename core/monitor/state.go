package monitor

// State is the monitor state of one registered change.
//
// Transitions (every one is a single conditional write):
//
//	Register          → pending       (dispatch remote_status enqueued)
//	Register          → terminal      (dispatch remote_status superseded|cancelled)
//	pending|watching|retry_wait → leased     (claim: due, lease token issued)
//	leased → watching   (complete: non-terminal CMS status; next poll after PollInterval)
//	leased → terminal   (complete: terminal CMS status)
//	leased → retry_wait (retry: failures+1 < max; next poll after RetryDelay)
//	leased → failed     (retry at the failure limit, or fail)
//	leased → retry_wait|failed (lease expired: reclaimed as a failure, code "lease_expired")
//	leased → watching   (a hinted poll failed retryably before the regular poll time: not counted)
//	any    → failed     (record fails validation: lifecycle_monitor.state_invalid)
//
// terminal and failed are final.
type State string

// The states (docs/design.md "Monitor states and transitions"); the
// stored state attribute holds exactly these strings.
const (
	StatePending   State = "pending"
	StateLeased    State = "leased"
	StateWatching  State = "watching"
	StateRetryWait State = "retry_wait"
	StateTerminal  State = "terminal"
	StateFailed    State = "failed"
)

// States lists every state in lifecycle order (pending, leased, watching,
// retry_wait, terminal, failed), the order in which counts are reported.
func States() []State {
	return []State{StatePending, StateLeased, StateWatching, StateRetryWait, StateTerminal, StateFailed}
}

// Valid reports whether s is a known state.
func (s State) Valid() bool {
	switch s {
	case StatePending, StateLeased, StateWatching, StateRetryWait, StateTerminal, StateFailed:
		return true
	}
	return false
}

// Claimable reports whether a record in state s may be claimed once due.
func (s State) Claimable() bool {
	return s == StatePending || s == StateWatching || s == StateRetryWait
}

// Final reports whether s ends monitoring.
func (s State) Final() bool { return s == StateTerminal || s == StateFailed }

// CanWake reports whether a record in state s sits in the wake index (at
// next_poll_ms: claimable, or leased with the wake key the claim left).
func (s State) CanWake() bool { return s.Claimable() || s == StateLeased }
