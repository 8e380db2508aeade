package releasetest

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"sync"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/signing"
)

// Fixture holds deterministic test keys and builds signed input events,
// receipts and evidence responses. Each receipt kind has its own issuer and
// key, as deployed: Issuer/IssuerKey sign quality receipts, HumanIssuer and
// ReviewIssuer the human-review and independent-review receipts.
type Fixture struct {
	EventKey        []byte
	Issuer          string
	IssuerKey       ed25519.PrivateKey
	HumanIssuer     string
	HumanIssuerKey  ed25519.PrivateKey
	ReviewIssuer    string
	ReviewIssuerKey ed25519.PrivateKey
	ApprovalSeed    []byte
	PublicationKey  []byte
}

// DefaultReviewer is the independent reviewer's provider id when none is
// given.
const DefaultReviewer = "review-beta"

func seed(label string) []byte {
	s := sha256.Sum256([]byte("localeflow-test-" + label))
	return s[:]
}

// NewFixture returns the fixture with keys derived from fixed labels.
func NewFixture() Fixture {
	return Fixture{
		EventKey:        seed("event-key"),
		Issuer:          "evidence-test",
		IssuerKey:       ed25519.NewKeyFromSeed(seed("issuer")),
		HumanIssuer:     "human-review-test",
		HumanIssuerKey:  ed25519.NewKeyFromSeed(seed("human-review-issuer")),
		ReviewIssuer:    "independent-review-test",
		ReviewIssuerKey: ed25519.NewKeyFromSeed(seed("independent-review-issuer")),
		ApprovalSeed:    seed("approval"),
		PublicationKey:  seed("publication"),
	}
}

// IssuerFor returns the issuer and key that sign receipts of kind. A kind
// without its own issuer falls back to the quality issuer (which per-kind
// verifiers then refuse).
func (f Fixture) IssuerFor(kind string) (string, ed25519.PrivateKey) {
	switch {
	case kind == release.KindHumanReview && f.HumanIssuerKey != nil:
		return f.HumanIssuer, f.HumanIssuerKey
	case kind == release.KindIndependentModelReview && f.ReviewIssuerKey != nil:
		return f.ReviewIssuer, f.ReviewIssuerKey
	}
	return f.Issuer, f.IssuerKey
}

// TrustedIssuers trusts each kind's issuer for that kind only.
func (f Fixture) TrustedIssuers() release.TrustedIssuers {
	set := func(kind string) map[string]ed25519.PublicKey {
		name, key := f.IssuerFor(kind)
		return map[string]ed25519.PublicKey{name: key.Public().(ed25519.PublicKey)}
	}
	return release.TrustedIssuers{
		Quality:           set(release.KindQuality),
		HumanReview:       set(release.KindHumanReview),
		IndependentReview: set(release.KindIndependentModelReview),
	}
}

// Verifiers returns receipt verifiers trusting each kind's issuer for that
// kind only.
func (f Fixture) Verifiers() release.Verifiers { return f.TrustedIssuers().Verifiers() }

// Authorities returns the approval and publication authorities.
func (f Fixture) Authorities() (*release.Authority, *release.Authority) {
	a, err := release.NewApprovalAuthority(f.ApprovalSeed)
	if err != nil {
		panic(err)
	}
	p, err := release.NewPublicationAuthority(f.PublicationKey)
	if err != nil {
		panic(err)
	}
	return a, p
}

// JobSpec is one job of a test plan.
type JobSpec struct {
	JobID        string
	SourceLocale string
	SourceText   string
	TargetLocale string
	ContentType  string
}

// PlanSpec is a test plan.
type PlanSpec struct {
	EventID string
	SiteID  string
	PlanID  string
	Jobs    []JobSpec
}

// NewPlan returns a plan with one job per target locale, given in order.
func NewPlan(eventID string, locales ...string) PlanSpec {
	p := PlanSpec{EventID: eventID, SiteID: "site-berlin", PlanID: "plan-" + eventID}
	for _, l := range locales {
		p.Jobs = append(p.Jobs, JobSpec{
			JobID: "job-" + l, SourceLocale: "en-US", SourceText: "SECRET-SOURCE Welcome to our shop <" + l + ">",
			TargetLocale: l, ContentType: "page",
		})
	}
	return p
}

// Job returns the spec's job for a target locale.
func (p PlanSpec) Job(locale string) JobSpec {
	for _, j := range p.Jobs {
		if j.TargetLocale == locale {
			return j
		}
	}
	panic("no job for " + locale)
}

// PlanPayload is the plan's JSON payload.
func (p PlanSpec) PlanPayload() []byte {
	jobs := make([]map[string]any, 0, len(p.Jobs))
	for _, j := range p.Jobs {
		jobs = append(jobs, map[string]any{
			"job_id": j.JobID, "source": map[string]any{"locale": j.SourceLocale, "text": j.SourceText},
			"target": map[string]any{"locale": j.TargetLocale}, "content_type": j.ContentType,
			"commercial_profile": nil,
		})
	}
	raw, _ := json.Marshal(map[string]any{
		"event": map[string]any{"event_id": p.EventID, "site_id": p.SiteID, "website_version": "v2026.11.29", "source_sequence": 7},
		"plan":  map[string]any{"plan_id": p.PlanID, "jobs": jobs},
	})
	return raw
}

// ResultOptions vary a job's result.
type ResultOptions struct {
	Candidate                 string
	ProviderID                string
	HumanReviewRequired       bool
	IndependentReviewRequired bool
}

// ResultPayload is a succeeded job's payload.
func (p PlanSpec) ResultPayload(locale string, o ResultOptions) []byte {
	j := p.Job(locale)
	if o.Candidate == "" {
		o.Candidate = "SECRET-TARGET translated for " + locale
	}
	if o.ProviderID == "" {
		o.ProviderID = "mt-alpha"
	}
	raw, _ := json.Marshal(map[string]any{
		"event_id": p.EventID, "plan_id": p.PlanID, "job_id": j.JobID, "status": "succeeded",
		"source_sha256": core.SHA256Hex([]byte(j.SourceText)), "target_sha256": core.SHA256Hex([]byte(o.Candidate)),
		"source_locale": j.SourceLocale, "target_locale": j.TargetLocale, "content_type": j.ContentType,
		"glossary_version": "gl-3", "policy_version": "pol-2",
		"provider":         map[string]any{"id": o.ProviderID, "model_id": "m-1", "model_version": "2026-10"},
		"software_version": "sw-1.4.0", "review_confidence": map[string]any{"level": "high"},
		"quality_profile": map[string]any{"tier": "standard"}, "commercial_review": nil,
		"human_review_required": o.HumanReviewRequired, "independent_review_required": o.IndependentReviewRequired,
		"candidate": o.Candidate,
	})
	return raw
}

// FailedPayload is a failed job's payload.
func (p PlanSpec) FailedPayload(locale string) []byte {
	raw, _ := json.Marshal(map[string]any{"event_id": p.EventID, "plan_id": p.PlanID, "job_id": p.Job(locale).JobID, "status": "failed", "error_code": "provider.unavailable"})
	return raw
}

// Detail wraps payload in a signed event detail.
func (f Fixture) Detail(payload []byte) []byte {
	raw, _ := json.Marshal(map[string]string{"payload": string(payload), "signature": signing.SignEvent(f.EventKey, payload)})
	return raw
}

// Receipt signs a receipt of kind with the kind's issuer. An independent
// model review receipt names DefaultReviewer.
func (f Fixture) Receipt(kind, requestID, resultSHA string, issued time.Time, ttl time.Duration) string {
	p := contract.ReceiptPayload{
		Kind: kind, RequestID: requestID, ResultSHA256: resultSHA,
		IssuedAtMS: core.Millis(issued), ExpiresAtMS: core.Millis(issued.Add(ttl)),
	}
	if kind == release.KindIndependentModelReview {
		p.ReviewerID = DefaultReviewer
	}
	return f.SignReceipt(p)
}

// IndependentReceipt signs an independent model review receipt naming
// reviewer.
func (f Fixture) IndependentReceipt(reviewer, requestID, resultSHA string, issued time.Time, ttl time.Duration) string {
	return f.SignReceipt(contract.ReceiptPayload{
		Kind: release.KindIndependentModelReview, RequestID: requestID, ResultSHA256: resultSHA,
		IssuedAtMS: core.Millis(issued), ExpiresAtMS: core.Millis(issued.Add(ttl)), ReviewerID: reviewer,
	})
}

// SignReceipt signs p with the issuer of p.Kind, setting p.Issuer.
func (f Fixture) SignReceipt(p contract.ReceiptPayload) string {
	issuer, key := f.IssuerFor(p.Kind)
	p.Issuer = issuer
	payload, _ := json.Marshal(p)
	return signing.SignReceipt(key, payload)
}

// Review selects how a Responder answers escalations.
type Review int

// Review modes.
const (
	// ReviewAuto answers human review with a human receipt and an
	// independent-review request with an independent model review.
	ReviewAuto Review = iota
	// ReviewIndependent always returns an independent model review.
	ReviewIndependent
	// ReviewSameProvider returns an independent review by the translator.
	ReviewSameProvider
	// ReviewHuman always returns a human review receipt.
	ReviewHuman
)

// Responder builds evidence responses the way a provider would; the
// in-process provider and the HTTP test server share it.
type Responder struct {
	Fixture  Fixture
	Review   Review
	Reviewer string // independent reviewer id; default DefaultReviewer
	// SignedReviewer, when set, is the reviewer named inside the signed
	// independent review receipt instead of Reviewer (a provider whose
	// response misstates who reviewed).
	SignedReviewer string
	// FailFirst makes the first FailFirst calls fail with FailCode.
	FailFirst int
	FailCode  string
	// RetryAfter, when set, travels with each configured failure (as the
	// HTTP client attaches a 429/503 Retry-After header).
	RetryAfter time.Duration
	Clock      core.Clock

	mu    sync.Mutex
	calls int
}

// Calls returns how many requests the responder saw.
func (r *Responder) Calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// Respond returns the response body for req, or a *core.Error when the
// responder is configured to fail this call.
func (r *Responder) Respond(req *contract.EvidenceRequest) ([]byte, error) {
	r.mu.Lock()
	r.calls++
	n := r.calls
	r.mu.Unlock()
	if n <= r.FailFirst {
		code := r.FailCode
		if code == "" {
			code = "http_503"
		}
		return nil, core.WithRetryAfter(core.Retry(code), r.RetryAfter)
	}
	now := time.Now()
	if r.Clock != nil {
		now = r.Clock.Now()
	}
	ttl := 24 * time.Hour
	resp := map[string]any{
		"schema": contract.EvidenceResponseSchema, "request_id": req.RequestID, "result_sha256": req.ResultSHA256,
		"quality_receipt":      r.Fixture.Receipt(release.KindQuality, req.RequestID, req.ResultSHA256, now, ttl),
		"human_review_receipt": nil, "independent_model_review": nil,
	}
	reviewer := r.Reviewer
	if reviewer == "" {
		reviewer = DefaultReviewer
	}
	independent := func(id string) map[string]any {
		signed := id
		if r.SignedReviewer != "" {
			signed = r.SignedReviewer
		}
		return map[string]any{
			"schema":   contract.IndependentModelReviewSchema,
			"provider": map[string]any{"id": id, "model_id": "rv-1", "model_version": "2026-09"},
			"receipt":  r.Fixture.IndependentReceipt(signed, req.RequestID, req.ResultSHA256, now, ttl),
		}
	}
	human := r.Fixture.Receipt(release.KindHumanReview, req.RequestID, req.ResultSHA256, now, ttl)
	switch r.Review {
	case ReviewIndependent:
		resp["independent_model_review"] = independent(reviewer)
	case ReviewSameProvider:
		resp["independent_model_review"] = independent(req.Provider.ID)
	case ReviewHuman:
		resp["human_review_receipt"] = human
	default:
		if req.HumanReviewRequired {
			resp["human_review_receipt"] = human
		} else if req.IndependentReviewRequired {
			resp["independent_model_review"] = independent(reviewer)
		}
	}
	raw, err := json.Marshal(resp)
	return raw, err
}

// Provider is an in-process release.EvidenceProvider backed by a Responder.
type Provider struct{ *Responder }

var _ release.EvidenceProvider = Provider{}

// Obtain implements release.EvidenceProvider.
func (p Provider) Obtain(_ context.Context, req *contract.EvidenceRequest) ([]byte, error) {
	return p.Respond(req)
}

// CMS is an in-process release.DeliveryClient that verifies and records
// deliveries.
type CMS struct {
	mu         sync.Mutex
	Deliveries map[string][]byte // by delivery id
	Sends      int
	FailFirst  int
	// RetryAfter, when set, travels with each configured failure.
	RetryAfter time.Duration
}

var _ release.DeliveryClient = (*CMS)(nil)

// Deliver implements release.DeliveryClient.
func (c *CMS) Deliver(_ context.Context, _, _ string, body []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.Sends++
	if c.Sends <= c.FailFirst {
		return core.WithRetryAfter(core.Retry("http_503"), c.RetryAfter)
	}
	var req contract.DeliveryRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return core.Fail("http_400")
	}
	if c.Deliveries == nil {
		c.Deliveries = map[string][]byte{}
	}
	c.Deliveries[req.DeliveryID] = append([]byte(nil), body...)
	return nil
}
