package health

import (
	"sort"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/release"
)

// Schema is the schema string of the health document.
const Schema = "localeflow.health.v1"

// Statuses of the document.
const (
	StatusOK      = "ok"
	StatusBlocked = "blocked"
)

// Reasons why health is blocked (besides the validation codes of invalid
// records). Stable, content-free codes.
const (
	ReasonMonitorExpiredLeases  = "health.monitor.expired_leases"
	ReasonMonitorFailed         = "health.monitor.failed"
	ReasonMonitorRemoteFailures = "health.monitor.remote_failures"
	ReasonEvidenceExpiredLeases = "health.evidence.expired_leases"
	ReasonEvidenceFailed        = "health.evidence.failed"
	ReasonDeliveryExpiredLeases = "health.delivery.expired_leases"
	ReasonDeliveryFailed        = "health.delivery.failed"
	// ReasonReleaseBlocked: a release is blocked for good (its blocked
	// record names the code).
	ReasonReleaseBlocked = "health.release.blocked"
	// ReasonJobFailed: a job of a release failed; the release waits for it
	// to be run again upstream.
	ReasonJobFailed = "health.release.job_failed"
)

// Codes of the checker itself.
const (
	// CodeUnavailable: a table could not be read; no document was made.
	CodeUnavailable = "health.unavailable"
	// CodeTerminalCountUnavailable is logged when DescribeTable fails and
	// counts.terminal falls back to a lower bound.
	CodeTerminalCountUnavailable = "health.terminal_count_unavailable"
	// Validation codes of release records (the release coordinator's).
	CodeEvidenceInvalid = release.CodeEvidenceStateInvalid
	CodeDeliveryInvalid = release.CodeDeliveryInvalid
)

// Report is the health document. Its JSON form is exactly the contract;
// the fields tagged "-" are for people and logs.
type Report struct {
	Schema      string                 `json:"schema"`
	Status      string                 `json:"status"`
	CheckedAtMS int64                  `json:"checked_at_ms"`
	Monitor     contract.MonitorHealth `json:"monitor"`
	Release     contract.ReleaseHealth `json:"release"`

	// Reasons lists, sorted and unique, why Status is blocked.
	Reasons []string `json:"-"`
	// Items are the records read, attention first (see Item.Attention),
	// then by next due time.
	Items []Item `json:"-"`
	// TerminalApproximate is false when the table's item count was not
	// available and counts.terminal is only a lower bound.
	TerminalApproximate bool `json:"-"`
	// Ages are the age signals (the oldest open change and release, the
	// records about to expire unfinished).
	Ages Ages `json:"-"`
}

// Item kinds.
const (
	KindMonitor  = "monitor"
	KindEvidence = "evidence"
	KindDelivery = "delivery"
	// KindRelease items are release-level entries: a blocked release, or a
	// job or approval that wakes the release (Key is its sort key).
	KindRelease = "release"
)

// States of release-level items.
const (
	StateBlocked          = "blocked"
	StateJobFailed        = "job_failed"
	StateAwaitingClaim    = "awaiting_claim"
	StateAwaitingDelivery = "awaiting_delivery"
)

// Item is one record as health saw it: identities, state, codes and times
// only (content-free).
type Item struct {
	Kind    string `json:"kind"`
	EventID string `json:"event_id"`
	// Key is the evidence request id, "delivery", or "" for the monitor.
	Key   string `json:"key,omitempty"`
	State string `json:"state"`
	// ErrorCode is the record's last error code, or the validation code
	// of an invalid record.
	ErrorCode    string `json:"error_code,omitempty"`
	RemoteStatus string `json:"remote_status,omitempty"`
	// NextDueMS is when the record next needs a worker: the next poll or
	// attempt when waiting, the lease expiry when leased, 0 when it needs
	// a person (failed, remote failure, invalid).
	NextDueMS int64 `json:"next_due_ms,omitempty"`
	Attempts  int   `json:"attempts"`
	UpdatedMS int64 `json:"updated_ms,omitempty"`
	// Attention: this item blocks health (failed, remote failure, expired
	// lease or invalid).
	Attention bool `json:"attention"`
	// Timeline is a monitor record's last transitions (content-free).
	Timeline []monitor.TimelineEntry `json:"timeline,omitempty"`
	Invalid  bool                    `json:"invalid,omitempty"`
	// Due: waiting and due now; LeaseExpired: leased past its expiry.
	Due          bool `json:"due,omitempty"`
	LeaseExpired bool `json:"lease_expired,omitempty"`
}

// Attention returns the items that block health.
func (r Report) Attention() []Item {
	var out []Item
	for _, it := range r.Items {
		if it.Attention {
			out = append(out, it)
		}
	}
	return out
}

func newMonitorHealth() contract.MonitorHealth {
	m := contract.MonitorHealth{Counts: map[string]int{}}
	for _, st := range monitor.States() {
		m.Counts[string(st)] = 0
	}
	return m
}

// leaseStates are the counted states of evidence and delivery records.
var leaseStates = []release.State{release.StatePending, release.StateLeased, release.StateRetryWait, release.StateFailed}

func newLeaseHealth() contract.LeaseHealth {
	l := contract.LeaseHealth{Counts: map[string]int{}}
	for _, st := range leaseStates {
		l.Counts[string(st)] = 0
	}
	return l
}

func sortItems(items []Item) {
	sort.SliceStable(items, func(i, j int) bool {
		a, b := items[i], items[j]
		if a.Attention != b.Attention {
			return a.Attention
		}
		if a.NextDueMS != b.NextDueMS {
			return a.NextDueMS < b.NextDueMS
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.EventID != b.EventID {
			return a.EventID < b.EventID
		}
		return a.Key < b.Key
	})
}

func uniqueSorted(codes []string) []string {
	seen := map[string]bool{}
	out := []string{}
	for _, c := range codes {
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return out
}
