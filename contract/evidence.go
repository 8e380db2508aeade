package contract

import "encoding/json"

// Evidence provider contract (docs/design.md "Evidence provider API"). The
// schema names and the request id prefix are fixed by the provider's
// contract and must not change.
const (
	EvidenceRequestSchema        = "blun.localization-quality-evidence-request.v5"
	EvidenceResponseSchema       = "blun.localization-quality-evidence-response.v2"
	IndependentModelReviewSchema = "blun.independent-model-review.v1"
	EvidenceRequestIDPrefix      = "blun-l10n-evidence-"
)

// EvidenceRequest is the quality evidence request sent to the provider
// (docs/design.md "Evidence provider API", request body). It carries the
// texts; it is never stored.
type EvidenceRequest struct {
	RequestID string `json:"request_id"`
	EvidenceBinding
	SourceText string `json:"source_text"`
	TargetText string `json:"target_text"`
}

// EvidenceBinding is everything the request id commits to: the request
// without its id and texts (the texts are bound through their hashes).
type EvidenceBinding struct {
	Schema                    string            `json:"schema"`
	EvidenceRevision          string            `json:"evidence_revision"`
	EventID                   string            `json:"event_id"`
	PlanID                    string            `json:"plan_id"`
	JobID                     string            `json:"job_id"`
	ResultSHA256              string            `json:"result_sha256"`
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
	CommercialProfile         *string           `json:"commercial_profile"`
	CommercialReview          json.RawMessage   `json:"commercial_review"`
	HumanReviewRequired       bool              `json:"human_review_required"`
	IndependentReviewRequired bool              `json:"independent_review_required"`
}

// IndependentModelReview is the independent_model_review object of an
// evidence response: the reviewing model and its signed receipt.
type IndependentModelReview struct {
	Schema   string   `json:"schema"`
	Provider Provider `json:"provider"`
	Receipt  string   `json:"receipt"`
}

// ReceiptPayload is the signed content of a receipt.
type ReceiptPayload struct {
	Kind         string `json:"kind"`
	Issuer       string `json:"issuer"`
	RequestID    string `json:"request_id"`
	ResultSHA256 string `json:"result_sha256"`
	IssuedAtMS   int64  `json:"issued_at_ms"`
	ExpiresAtMS  int64  `json:"expires_at_ms"`
	// ReviewerID is the independent reviewer's provider id. It is present
	// in (and only in) independent_model_review receipts, so the reviewer
	// is a signed fact rather than a claim of the evidence response.
	ReviewerID string `json:"reviewer_id,omitempty"`
}
