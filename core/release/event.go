package release

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"time"
	"unicode/utf8"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/signing"
)

// Codes of the signed-event parser. None of them is retryable: a forged or
// malformed event does not become valid by waiting.
const (
	CodeEventInvalid          = "coordinator.event.invalid"
	CodeEventDetailType       = "coordinator.event.detail_type_unknown"
	CodeEventSignatureInvalid = "coordinator.event.signature_invalid"
	CodeEventStale            = "coordinator.event.stale"
	CodePlanInvalid           = "coordinator.plan.invalid"
	CodePlanJobsInvalid       = "coordinator.plan.jobs_invalid"
	CodePlanSourceTooLarge    = "coordinator.plan.source_too_large"
	CodeJobInvalid            = "coordinator.job.invalid"
	CodeJobTargetMismatch     = "coordinator.job.target_sha256_mismatch"
	CodeResultInvalid         = "coordinator.result.invalid"
	CodeResultTooLarge        = "coordinator.result.too_large"
	CodeEventIDInvalid        = "coordinator.event_id.invalid"
)

// Limits of stored items. DynamoDB refuses items over 400 KB; the text
// records keep a margin for their keys and attribute names.
const (
	MaxItemBytes     = 400 * 1024
	itemOverhead     = 2 * 1024
	MaxTextBytes     = MaxItemBytes - itemOverhead
	MaxJobsPerPlan   = 100
	MaxPayloadBytes  = 1 << 20
	maxProfileFields = 32
	maxCommercialLen = 16 * 1024
)

// Event is the accepted change a plan belongs to.
type Event struct {
	EventID        string `json:"event_id" dynamodbav:"event_id"`
	SiteID         string `json:"site_id" dynamodbav:"site_id"`
	WebsiteVersion string `json:"website_version,omitempty" dynamodbav:"website_version,omitempty"`
	SourceSequence int64  `json:"source_sequence,omitempty" dynamodbav:"source_sequence,omitempty"`
}

// PlanJob is one locale job of a plan, without its source text (which is a
// SourceText record).
type PlanJob struct {
	JobID             string `json:"job_id" dynamodbav:"job_id"`
	SourceLocale      string `json:"source_locale" dynamodbav:"source_locale"`
	SourceSHA256      string `json:"source_sha256" dynamodbav:"source_sha256"`
	TargetLocale      string `json:"target_locale" dynamodbav:"target_locale"`
	ContentType       string `json:"content_type" dynamodbav:"content_type"`
	CommercialProfile string `json:"commercial_profile,omitempty" dynamodbav:"commercial_profile,omitempty"`
}

// Plan is a verified `localeflow.plan.accepted` payload. SourceTexts maps
// job id to source text; it is never stored in the plan record.
type Plan struct {
	Event         Event
	PlanID        string
	Jobs          []PlanJob
	SourceTexts   map[string]string
	PayloadSHA256 string
}

// Provider identifies a translation or review model (the contract's
// type: results and evidence requests carry it).
type Provider = contract.Provider

// Result is a succeeded job's result, the contract's JobResult: exactly
// the 15 result fields of docs/design.md "localeflow.job.completed". Its
// canonical JSON hash (ResultHash) is the result_sha256 every receipt and
// approval binds to.
type Result = contract.JobResult

// ResultHash is the SHA-256 of the result's canonical JSON.
func ResultHash(r Result) (string, error) {
	h, err := core.HashCanonical(r)
	if err != nil {
		return "", core.Wrap(CodeJSONInvalid, false, err)
	}
	return h, nil
}

// Job statuses reported by `localeflow.job.completed`.
const (
	JobSucceeded = "succeeded"
	JobFailed    = "failed"
)

// JobCompletion is a verified `localeflow.job.completed` payload. Result is
// set only when Status is JobSucceeded.
type JobCompletion struct {
	EventID       string
	PlanID        string
	JobID         string
	Status        string
	ErrorCode     string
	Result        *Result
	ResultJSON    []byte // canonical JSON of Result
	PayloadSHA256 string
}

// SignedEvent is a parsed, verified input event: exactly one of Plan and Job
// is set.
type SignedEvent struct {
	DetailType string
	Plan       *Plan
	Job        *JobCompletion
}

// EventID is the event the input belongs to.
func (e SignedEvent) EventID() string {
	if e.Plan != nil {
		return e.Plan.Event.EventID
	}
	return e.Job.EventID
}

// ParseSignedEvent verifies and validates the detail of a signed input
// event under key at the system time; see ParseSignedEventWith.
func ParseSignedEvent(key []byte, detailType string, detail []byte) (SignedEvent, error) {
	return ParseSignedEventWith(signing.EventCheck{Keys: [][]byte{key}, Now: time.Now()}, detailType, detail)
}

// ParseSignedEventWith verifies and validates the detail of a signed input
// event: v1 `{"payload": "<JSON text>", "signature": "v1=<hex>"}` (HMAC
// over the exact payload bytes; refused when check.RefuseV1) or v2
// `{"payload": …, "timestamp": "<unix s>", "signature": "v2=<hex>"}` (HMAC
// over "localeflow.event.v2\n" + detail-type + "\n" + timestamp + "\n" +
// payload, refused outside check's age window), under any of check.Keys.
// Nothing about the payload is trusted before the signature verifies.
func ParseSignedEventWith(check signing.EventCheck, detailType string, detail []byte) (SignedEvent, error) {
	if detailType != contract.DetailPlanAccepted && detailType != contract.DetailJobCompleted {
		return SignedEvent{}, core.Fail(CodeEventDetailType)
	}
	if len(detail) > 2*MaxPayloadBytes {
		return SignedEvent{}, core.Fail(CodeEventInvalid)
	}
	payload, _, err := signing.OpenEvent(check, detailType, detail)
	switch {
	case errors.Is(err, signing.ErrEventSignature):
		return SignedEvent{}, core.Fail(CodeEventSignatureInvalid)
	case errors.Is(err, signing.ErrEventStale):
		return SignedEvent{}, core.Fail(CodeEventStale)
	case err != nil:
		return SignedEvent{}, core.Fail(CodeEventInvalid)
	}
	if len(payload) > MaxPayloadBytes {
		return SignedEvent{}, core.Fail(CodeEventInvalid)
	}
	payloadHash := core.SHA256Hex([]byte(payload))
	if detailType == contract.DetailPlanAccepted {
		plan, err := parsePlan([]byte(payload))
		if err != nil {
			return SignedEvent{}, err
		}
		plan.PayloadSHA256 = payloadHash
		return SignedEvent{DetailType: detailType, Plan: plan}, nil
	}
	job, err := parseJob([]byte(payload))
	if err != nil {
		return SignedEvent{}, err
	}
	job.PayloadSHA256 = payloadHash
	return SignedEvent{DetailType: detailType, Job: job}, nil
}

func parsePlan(payload []byte) (*Plan, error) {
	top, err := object(payload, CodePlanInvalid, []string{"event", "plan"})
	if err != nil {
		return nil, err
	}
	ev, err := object(top["event"], CodePlanInvalid, []string{"event_id", "site_id"}, "website_version", "source_sequence")
	if err != nil {
		return nil, err
	}
	var p Plan
	if p.Event.EventID, err = ev.token("event_id", CodeEventIDInvalid); err != nil {
		return nil, err
	}
	if p.Event.SiteID, err = ev.token("site_id", CodePlanInvalid); err != nil {
		return nil, err
	}
	if ev.has("website_version") {
		if p.Event.WebsiteVersion, err = ev.token("website_version", CodePlanInvalid); err != nil {
			return nil, err
		}
	}
	if ev.has("source_sequence") {
		if p.Event.SourceSequence, err = ev.integer("source_sequence", CodePlanInvalid, 1, 1<<53); err != nil {
			return nil, err
		}
	}
	pl, err := object(top["plan"], CodePlanInvalid, []string{"plan_id", "jobs"})
	if err != nil {
		return nil, err
	}
	if p.PlanID, err = pl.token("plan_id", CodePlanInvalid); err != nil {
		return nil, err
	}
	var rawJobs []json.RawMessage
	if err := json.Unmarshal(pl["jobs"], &rawJobs); err != nil || rawJobs == nil {
		return nil, core.Fail(CodePlanJobsInvalid)
	}
	if len(rawJobs) == 0 || len(rawJobs) > MaxJobsPerPlan {
		return nil, core.Fail(CodePlanJobsInvalid)
	}
	p.SourceTexts = make(map[string]string, len(rawJobs))
	locales := make(map[string]bool, len(rawJobs))
	for _, raw := range rawJobs {
		job, text, err := parsePlanJob(raw)
		if err != nil {
			return nil, err
		}
		if _, dup := p.SourceTexts[job.JobID]; dup || locales[job.TargetLocale] {
			return nil, core.Fail(CodePlanJobsInvalid)
		}
		locales[job.TargetLocale] = true
		p.SourceTexts[job.JobID] = text
		p.Jobs = append(p.Jobs, job)
	}
	sort.Slice(p.Jobs, func(i, j int) bool { return p.Jobs[i].TargetLocale < p.Jobs[j].TargetLocale })
	return &p, nil
}

func parsePlanJob(raw []byte) (PlanJob, string, error) {
	f, err := object(raw, CodePlanJobsInvalid, []string{"job_id", "source", "target", "content_type"}, "commercial_profile")
	if err != nil {
		return PlanJob{}, "", err
	}
	var j PlanJob
	if j.JobID, err = f.token("job_id", CodePlanJobsInvalid); err != nil {
		return PlanJob{}, "", err
	}
	if j.ContentType, err = f.token("content_type", CodePlanJobsInvalid); err != nil {
		return PlanJob{}, "", err
	}
	if f.has("commercial_profile") && !f.isNull("commercial_profile") {
		if j.CommercialProfile, err = f.token("commercial_profile", CodePlanJobsInvalid); err != nil {
			return PlanJob{}, "", err
		}
	}
	src, err := object(f["source"], CodePlanJobsInvalid, []string{"locale", "text"})
	if err != nil {
		return PlanJob{}, "", err
	}
	if j.SourceLocale, err = src.token("locale", CodePlanJobsInvalid); err != nil {
		return PlanJob{}, "", err
	}
	text, err := src.str("text", CodePlanJobsInvalid)
	if err != nil {
		return PlanJob{}, "", err
	}
	if text == "" || !utf8.ValidString(text) {
		return PlanJob{}, "", core.Fail(CodePlanJobsInvalid)
	}
	if len(text) > MaxTextBytes {
		return PlanJob{}, "", core.Fail(CodePlanSourceTooLarge)
	}
	j.SourceSHA256 = core.SHA256Hex([]byte(text))
	tgt, err := object(f["target"], CodePlanJobsInvalid, []string{"locale"})
	if err != nil {
		return PlanJob{}, "", err
	}
	if j.TargetLocale, err = tgt.token("locale", CodePlanJobsInvalid); err != nil {
		return PlanJob{}, "", err
	}
	if j.TargetLocale == j.SourceLocale {
		return PlanJob{}, "", core.Fail(CodePlanJobsInvalid)
	}
	return j, text, nil
}

var resultKeys = []string{
	"source_sha256", "target_sha256", "source_locale", "target_locale", "content_type",
	"glossary_version", "policy_version", "provider", "software_version",
	"review_confidence", "quality_profile", "commercial_review",
	"human_review_required", "independent_review_required", "candidate",
}

func parseJob(payload []byte) (*JobCompletion, error) {
	head, err := object(payload, CodeJobInvalid, nil, append([]string{"event_id", "plan_id", "job_id", "status", "error_code"}, resultKeys...)...)
	if err != nil {
		return nil, err
	}
	for _, k := range []string{"event_id", "plan_id", "job_id", "status"} {
		if !head.has(k) {
			return nil, core.Fail(CodeJobInvalid)
		}
	}
	var j JobCompletion
	if j.EventID, err = head.token("event_id", CodeEventIDInvalid); err != nil {
		return nil, err
	}
	if j.PlanID, err = head.token("plan_id", CodeJobInvalid); err != nil {
		return nil, err
	}
	if j.JobID, err = head.token("job_id", CodeJobInvalid); err != nil {
		return nil, err
	}
	if j.Status, err = head.str("status", CodeJobInvalid); err != nil {
		return nil, err
	}
	switch j.Status {
	case JobFailed:
		if _, err := object(payload, CodeJobInvalid, []string{"event_id", "plan_id", "job_id", "status"}, "error_code"); err != nil {
			return nil, err
		}
		if head.has("error_code") {
			code, err := head.str("error_code", CodeJobInvalid)
			if err != nil || !core.ValidErrorCode(code) {
				return nil, core.Fail(CodeJobInvalid)
			}
			j.ErrorCode = code
		}
		return &j, nil
	case JobSucceeded:
		if _, err := object(payload, CodeJobInvalid, append([]string{"event_id", "plan_id", "job_id", "status"}, resultKeys...)); err != nil {
			return nil, err
		}
	default:
		return nil, core.Fail(CodeJobInvalid)
	}
	r, err := parseResult(head)
	if err != nil {
		return nil, err
	}
	raw, err := core.Canonical(r)
	if err != nil {
		return nil, core.Wrap(CodeResultInvalid, false, err)
	}
	if len(raw) > MaxTextBytes {
		return nil, core.Fail(CodeResultTooLarge)
	}
	j.Result, j.ResultJSON = r, raw
	return &j, nil
}

func parseResult(f fields) (*Result, error) {
	const code = CodeResultInvalid
	var r Result
	var err error
	if r.SourceSHA256, err = f.sha("source_sha256", code); err != nil {
		return nil, err
	}
	if r.TargetSHA256, err = f.sha("target_sha256", code); err != nil {
		return nil, err
	}
	tokens := []struct {
		name string
		dst  *string
	}{
		{"source_locale", &r.SourceLocale}, {"target_locale", &r.TargetLocale},
		{"content_type", &r.ContentType}, {"glossary_version", &r.GlossaryVersion},
		{"policy_version", &r.PolicyVersion}, {"software_version", &r.SoftwareVersion},
	}
	for _, t := range tokens {
		if *t.dst, err = f.token(t.name, code); err != nil {
			return nil, err
		}
	}
	pv, err := object(f["provider"], code, []string{"id", "model_id", "model_version"})
	if err != nil {
		return nil, err
	}
	if r.Provider.ID, err = pv.token("id", code); err != nil {
		return nil, err
	}
	if r.Provider.ModelID, err = pv.token("model_id", code); err != nil {
		return nil, err
	}
	if r.Provider.ModelVersion, err = pv.token("model_version", code); err != nil {
		return nil, err
	}
	if r.ReviewConfidence, err = f.tokenMap("review_confidence", code, maxProfileFields); err != nil {
		return nil, err
	}
	if r.QualityProfile, err = f.tokenMap("quality_profile", code, maxProfileFields); err != nil {
		return nil, err
	}
	if r.CommercialReview, err = f.nullableObject("commercial_review", code, maxCommercialLen); err != nil {
		return nil, err
	}
	if r.HumanReviewRequired, err = f.boolean("human_review_required", code); err != nil {
		return nil, err
	}
	if r.IndependentReviewRequired, err = f.boolean("independent_review_required", code); err != nil {
		return nil, err
	}
	if r.Candidate, err = f.str("candidate", code); err != nil {
		return nil, err
	}
	if r.Candidate == "" || !utf8.ValidString(r.Candidate) {
		return nil, core.Fail(code)
	}
	if len(r.Candidate) > MaxTextBytes {
		return nil, core.Fail(CodeResultTooLarge)
	}
	if core.SHA256Hex([]byte(r.Candidate)) != r.TargetSHA256 {
		return nil, core.Fail(CodeJobTargetMismatch)
	}
	return &r, nil
}

// EventSettings are the optional settings of the coordinator's signed input
// events; the zero value accepts v1 and v2 under EventKey alone, v2 within
// signing.DefaultEventMaxAge.
type EventSettings struct {
	// PreviousKeys are accepted after EventKey during a key rotation.
	PreviousKeys [][]byte
	// MaxAge is the oldest v2 event accepted; 0 means
	// signing.DefaultEventMaxAge.
	MaxAge time.Duration
	// RefuseV1 refuses v1 signatures once every producer signs v2.
	RefuseV1 bool
	// KeySet, when set, replaces EventKey and PreviousKeys: the secret is
	// re-read on a TTL, so a rotation needs no cold start.
	KeySet interface {
		Keys(ctx context.Context) ([][]byte, error)
	}
}

// CodeEventKeysUnavailable: the event key set could not be read
// (retryable).
const CodeEventKeysUnavailable = "coordinator.event.keys_unavailable"

// eventKeys is the event key set in use, the current key first: the
// KeySet when set (re-read on its TTL), else EventKey and PreviousKeys.
// The current key seals plans; every key verifies events and seals.
func (c *Coordinator) eventKeys(ctx context.Context) ([][]byte, error) {
	if c.events.KeySet == nil {
		return append([][]byte{c.eventKey}, c.events.PreviousKeys...), nil
	}
	set, err := c.events.KeySet.Keys(ctx)
	if err != nil || len(set) == 0 || len(set[0]) == 0 {
		return nil, core.Wrap(CodeEventKeysUnavailable, true, err)
	}
	return set, nil
}

// parseEvent verifies an input event under the coordinator's keys at its
// clock's time.
func (c *Coordinator) parseEvent(ctx context.Context, detailType string, detail []byte) (SignedEvent, error) {
	keys, err := c.eventKeys(ctx)
	if err != nil {
		return SignedEvent{}, err
	}
	return ParseSignedEventWith(signing.EventCheck{
		Keys: keys, Now: c.clock.Now(), MaxAge: c.events.MaxAge, RefuseV1: c.events.RefuseV1,
	}, detailType, detail)
}
