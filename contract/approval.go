package contract

// ApprovalSchema is the schema of a signed approval's payload.
const ApprovalSchema = "localeflow.approval.v1"

// ApprovalPayload is what the approval authority signs.
type ApprovalPayload struct {
	Schema                    string `json:"schema"`
	ApprovalID                string `json:"approval_id"`
	EventID                   string `json:"event_id"`
	SiteID                    string `json:"site_id"`
	PlanID                    string `json:"plan_id"`
	JobID                     string `json:"job_id"`
	TargetLocale              string `json:"target_locale"`
	ResultSHA256              string `json:"result_sha256"`
	EvidenceRequestID         string `json:"evidence_request_id"`
	QualityReceiptSHA256      string `json:"quality_receipt_sha256"`
	HumanReviewReceiptSHA256  string `json:"human_review_receipt_sha256,omitempty"`
	IndependentReviewSHA256   string `json:"independent_model_review_sha256,omitempty"`
	IndependentReviewProvider string `json:"independent_model_review_provider,omitempty"`
	ApprovedAtMS              int64  `json:"approved_at_ms"`
	ExpiresAtMS               int64  `json:"expires_at_ms"`
}
