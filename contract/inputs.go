package contract

import "encoding/json"

// The signed payloads of the input events (the JSON text in
// SignedDetail.Payload). Their parsers (core/monitor.ParseDispatched,
// core/release.ParseSignedEvent) are strict: exactly these keys, the types
// given, integers spelled as integers.

// ChangeDispatched is the payload of localeflow.change.dispatched: the
// change as sent to the CMS (any JSON object; it is hashed canonically)
// and the dispatch that accepted it.
type ChangeDispatched struct {
	Change   json.RawMessage `json:"change"`
	Dispatch Dispatch        `json:"dispatch"`
}

// Dispatch is the dispatcher's success record for one change.
type Dispatch struct {
	EventID string `json:"event_id"`
	// PayloadSHA256 is the SHA-256 hex of the change's canonical JSON.
	PayloadSHA256  string `json:"payload_sha256"`
	Status         string `json:"status"`
	RemotePlanID   string `json:"remote_plan_id"`
	RemoteJobCount int64  `json:"remote_job_count"`
	RemoteStatus   string `json:"remote_status"`
	ResponseSHA256 string `json:"response_sha256"`
}

// PlanAccepted is the payload of localeflow.plan.accepted.
type PlanAccepted struct {
	Event PlanEvent `json:"event"`
	Plan  Plan      `json:"plan"`
}

// PlanEvent is the accepted change a plan belongs to.
type PlanEvent struct {
	EventID        string `json:"event_id"`
	SiteID         string `json:"site_id"`
	WebsiteVersion string `json:"website_version,omitempty"`
	SourceSequence int64  `json:"source_sequence,omitempty"`
}

// Plan is the plan of one change: 1..100 locale jobs, one per target
// locale.
type Plan struct {
	PlanID string    `json:"plan_id"`
	Jobs   []PlanJob `json:"jobs"`
}

// PlanJob is one locale job with its source text.
type PlanJob struct {
	JobID       string     `json:"job_id"`
	Source      LocaleText `json:"source"`
	Target      Locale     `json:"target"`
	ContentType string     `json:"content_type"`
	// CommercialProfile is a JSON object or null (optional).
	CommercialProfile json.RawMessage `json:"commercial_profile,omitempty"`
}

// LocaleText is a text in a locale.
type LocaleText struct {
	Locale string `json:"locale"`
	Text   string `json:"text"`
}

// Locale names a locale.
type Locale struct {
	Locale string `json:"locale"`
}

// Job statuses of localeflow.job.completed.
const (
	JobSucceeded = "succeeded"
	JobFailed    = "failed"
)

// JobCompleted is the payload of localeflow.job.completed: a failed job
// (Status JobFailed, optional ErrorCode, no result) or a succeeded one
// (Status JobSucceeded and every JobResult field).
type JobCompleted struct {
	EventID   string `json:"event_id"`
	PlanID    string `json:"plan_id"`
	JobID     string `json:"job_id"`
	Status    string `json:"status"`
	ErrorCode string `json:"error_code,omitempty"`
	*JobResult
}

// JobResult is a succeeded job's result: exactly these 15 fields. Its
// canonical JSON hash is the result_sha256 every receipt and approval
// binds to.
type JobResult struct {
	SourceSHA256              string            `json:"source_sha256"`
	TargetSHA256              string            `json:"target_sha256"`
	SourceLocale              string            `json:"source_locale"`
	TargetLocale              string            `json:"target_locale"`
	ContentType               string            `json:"content_type"`
	GlossaryVersion           string            `json:"glossary_version"`
	PolicyVersion             string            `json:"policy_version"`
	Provider                  Provider          `json:"provider"`
	SoftwareVersion           string            `json:"software_version"`
	ReviewConfidence          map[string]string `json:"review_confidence"`
	QualityProfile            map[string]string `json:"quality_profile"`
	CommercialReview          json.RawMessage   `json:"commercial_review"`
	HumanReviewRequired       bool              `json:"human_review_required"`
	IndependentReviewRequired bool              `json:"independent_review_required"`
	Candidate                 string            `json:"candidate"`
}

// Provider identifies a translation or review model.
type Provider struct {
	ID           string `json:"id"`
	ModelID      string `json:"model_id"`
	ModelVersion string `json:"model_version"`
}
