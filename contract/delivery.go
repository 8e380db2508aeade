package contract

// Delivery schemas: the bundle the publication authority signs and the
// request that carries it to the CMS delivery API.
const (
	DeliveryBundleSchema  = "localeflow.delivery-bundle.v1"
	DeliveryRequestSchema = "localeflow.delivery-request.v1"
)

// BundleLocale is one approved locale of a delivery bundle.
type BundleLocale struct {
	JobID        string `json:"job_id"`
	SourceLocale string `json:"source_locale"`
	TargetLocale string `json:"target_locale"`
	ContentType  string `json:"content_type"`
	SourceSHA256 string `json:"source_sha256"`
	TargetSHA256 string `json:"target_sha256"`
	ResultSHA256 string `json:"result_sha256"`
	Text         string `json:"text"`
	ApprovalID   string `json:"approval_id"`
	Approval     string `json:"approval"`
}

// Bundle is the delivery the publication authority signs.
type Bundle struct {
	Schema         string         `json:"schema"`
	DeliveryID     string         `json:"delivery_id"`
	EventID        string         `json:"event_id"`
	SiteID         string         `json:"site_id"`
	PlanID         string         `json:"plan_id"`
	WebsiteVersion string         `json:"website_version,omitempty"`
	PreparedAtMS   int64          `json:"prepared_at_ms"`
	Locales        []BundleLocale `json:"locales"`
}

// DeliveryRequest is the body POSTed to the CMS delivery API: the signed
// bundle token plus its routing identities.
type DeliveryRequest struct {
	Schema     string `json:"schema"`
	DeliveryID string `json:"delivery_id"`
	EventID    string `json:"event_id"`
	SiteID     string `json:"site_id"`
	Bundle     string `json:"bundle"`
}
