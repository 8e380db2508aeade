package contract

// MonitorHealth is the "monitor" object of the health document (core/health
// builds it) and of localeflow.health.blocked.
type MonitorHealth struct {
	// Counts has every monitor state; "terminal" is approximate (core/health).
	Counts         map[string]int `json:"counts"`
	Due            int            `json:"due"`
	ExpiredLeases  int            `json:"expired_leases"`
	Failed         int            `json:"failed"`
	RemoteFailures int            `json:"remote_failures"`
}

// ReleaseHealth is the "release" object: the evidence and delivery
// counterparts of the monitor's counts.
type ReleaseHealth struct {
	Evidence LeaseHealth `json:"evidence"`
	Delivery LeaseHealth `json:"delivery"`
}

// LeaseHealth counts the open and failed records of one kind of leased
// release record. Succeeded records are finished and not counted.
type LeaseHealth struct {
	// Counts has pending, leased, retry_wait and failed.
	Counts map[string]int `json:"counts"`
	// Open is pending + leased + retry_wait (for deliveries: not yet
	// delivered).
	Open int `json:"open"`
	// Due is pending or retry_wait records whose next attempt is due.
	Due           int `json:"due"`
	ExpiredLeases int `json:"expired_leases"`
	Failed        int `json:"failed"`
}
