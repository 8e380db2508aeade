package release

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
)

// Evidence provider codes (docs/design.md "Evidence provider API"); the
// schemas and the request id prefix are in contract.
const (
	MaxReceiptLength              = 16_384
	CodeEvidenceUnavailable       = "evidence.unavailable"
	CodeEvidenceRequestMutated    = "evidence.request_mutated"
	CodeEvidenceResponseInvalid   = "evidence.response.invalid"
	CodeEvidenceBindingMismatch   = "evidence.response.binding_mismatch"
	CodeQualityReceiptInvalid     = "evidence.quality_receipt.invalid"
	CodeEscalationUnexpected      = "evidence.review_escalation.unexpected"
	CodeEscalationRequired        = "evidence.review_escalation.required"
	CodeIndependentLegalForbidden = "evidence.independent_model_review.legal_forbidden"
	CodeHumanReceiptRequired      = "evidence.human_receipt.required"
	CodeIndependentInvalid        = "evidence.independent_model_review.invalid"
	CodeIndependentProvider       = "evidence.independent_model_review.provider.invalid"
	CodeIndependentNotIndependent = "evidence.independent_model_review.not_independent"
	CodeIndependentReceipt        = "evidence.independent_model_review.receipt.required"
)

// EvidenceBody is the request's canonical JSON, the body sent to the
// provider.
func EvidenceBody(r *contract.EvidenceRequest) ([]byte, error) {
	b, err := core.Canonical(r)
	if err != nil {
		return nil, core.Wrap(CodeJSONInvalid, false, err)
	}
	return b, nil
}

// BuildEvidenceRequest builds the request for a validated result. The
// request id is EvidenceRequestIDPrefix + sha256(JCS(binding)), so the same
// result under the same evidence revision always has the same id.
func BuildEvidenceRequest(eventID, planID string, job PlanJob, sourceText string, r *Result, resultSHA256, revision string) (*contract.EvidenceRequest, error) {
	var profile *string
	if job.CommercialProfile != "" {
		p := job.CommercialProfile
		profile = &p
	}
	b := contract.EvidenceBinding{
		Schema: contract.EvidenceRequestSchema, EvidenceRevision: revision,
		EventID: eventID, PlanID: planID, JobID: job.JobID, ResultSHA256: resultSHA256,
		SourceSHA256: r.SourceSHA256, TargetSHA256: r.TargetSHA256,
		SourceLocale: r.SourceLocale, TargetLocale: r.TargetLocale, ContentType: r.ContentType,
		GlossaryVersion: r.GlossaryVersion, PolicyVersion: r.PolicyVersion, Provider: r.Provider,
		SoftwareVersion: r.SoftwareVersion, ReviewConfidence: r.ReviewConfidence,
		QualityProfile: r.QualityProfile, CommercialProfile: profile, CommercialReview: r.CommercialReview,
		HumanReviewRequired: r.HumanReviewRequired, IndependentReviewRequired: r.IndependentReviewRequired,
	}
	h, err := core.HashCanonical(b)
	if err != nil {
		return nil, core.Wrap(CodeJSONInvalid, false, err)
	}
	// The request owns its maps and review (the result keeps its own).
	b.ReviewConfidence, b.QualityProfile = cloneMap(b.ReviewConfidence), cloneMap(b.QualityProfile)
	b.CommercialReview = bytes.Clone(b.CommercialReview)
	return &contract.EvidenceRequest{RequestID: contract.EvidenceRequestIDPrefix + h, EvidenceBinding: b, SourceText: sourceText, TargetText: r.Candidate}, nil
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// EvidenceProvider obtains quality evidence. It returns the raw response
// body; the coordinator validates it. Failures are *core.Error values whose
// codes say what went wrong ("http_503", "timeout", the provider's own
// code) and whether it is retryable; any other error is
// "evidence.unavailable", retryable.
type EvidenceProvider interface {
	Obtain(ctx context.Context, req *contract.EvidenceRequest) ([]byte, error)
}

// IndependentReview is a validated independent model review (the
// contract's IndependentModelReview).
type IndependentReview = contract.IndependentModelReview

// Evidence is a validated evidence response.
type Evidence struct {
	QualityReceipt     string
	HumanReviewReceipt string             // "" when absent
	IndependentReview  *IndependentReview // nil when absent
}

// ObtainEvidence calls the provider and validates its answer, refusing a
// provider that changed the request it was given
// (evidence.request_mutated). A provider error with a code becomes
// "evidence.<code>" with its retryability; any other error is
// evidence.unavailable (retryable).
func ObtainEvidence(ctx context.Context, p EvidenceProvider, req *contract.EvidenceRequest) (Evidence, error) {
	if p == nil {
		return Evidence{}, core.Fail("evidence.provider.invalid")
	}
	before, err := core.HashCanonical(req)
	if err != nil {
		return Evidence{}, core.Wrap(CodeJSONInvalid, false, err)
	}
	body, err := p.Obtain(ctx, req)
	if err != nil {
		var ce *core.Error
		if errors.As(err, &ce) {
			return Evidence{}, core.Wrap(externalCode(ce.Code, "evidence"), ce.Retryable, err)
		}
		return Evidence{}, core.Wrap(CodeEvidenceUnavailable, true, err)
	}
	if after, err := core.HashCanonical(req); err != nil || after != before {
		return Evidence{}, core.Fail(CodeEvidenceRequestMutated)
	}
	return ValidateEvidenceResponse(req, body)
}

// ValidateEvidenceResponse applies the response rules of docs/design.md
// "Evidence provider API": exact
// keys, schema and binding, NFC receipts, and the review policy (human
// review excludes independent model review; an escalation needs exactly
// one of them; the reviewer must be another provider).
func ValidateEvidenceResponse(req *contract.EvidenceRequest, body []byte) (Evidence, error) {
	f, err := object(body, CodeEvidenceResponseInvalid, []string{
		"schema", "request_id", "result_sha256", "quality_receipt",
		"human_review_receipt", "independent_model_review",
	})
	if err != nil {
		return Evidence{}, err
	}
	schema, _ := f.str("schema", CodeEvidenceBindingMismatch)
	requestID, _ := f.str("request_id", CodeEvidenceBindingMismatch)
	resultSHA, _ := f.str("result_sha256", CodeEvidenceBindingMismatch)
	if schema != contract.EvidenceResponseSchema || requestID != req.RequestID || resultSHA != req.ResultSHA256 {
		return Evidence{}, core.Fail(CodeEvidenceBindingMismatch)
	}
	quality, err := receiptField(f, "quality_receipt", CodeQualityReceiptInvalid)
	if err != nil {
		return Evidence{}, err
	}
	out := Evidence{QualityReceipt: quality}
	humanPresent := !f.isNull("human_review_receipt")
	independentPresent := !f.isNull("independent_model_review")
	if !req.HumanReviewRequired && !req.IndependentReviewRequired {
		if humanPresent || independentPresent {
			return Evidence{}, core.Fail(CodeEscalationUnexpected)
		}
		return out, nil
	}
	if req.HumanReviewRequired {
		if independentPresent {
			return Evidence{}, core.Fail(CodeIndependentLegalForbidden)
		}
		if out.HumanReviewReceipt, err = receiptField(f, "human_review_receipt", CodeHumanReceiptRequired); err != nil {
			return Evidence{}, err
		}
		return out, nil
	}
	if humanPresent == independentPresent {
		return Evidence{}, core.Fail(CodeEscalationRequired)
	}
	if humanPresent {
		if out.HumanReviewReceipt, err = receiptField(f, "human_review_receipt", CodeHumanReceiptRequired); err != nil {
			return Evidence{}, err
		}
		return out, nil
	}
	review, err := independentReview(f["independent_model_review"], req.Provider.ID)
	if err != nil {
		return Evidence{}, err
	}
	out.IndependentReview = review
	return out, nil
}

func independentReview(raw json.RawMessage, translatorID string) (*IndependentReview, error) {
	f, err := object(raw, CodeIndependentInvalid, []string{"schema", "provider", "receipt"})
	if err != nil {
		return nil, err
	}
	if schema, err := f.str("schema", CodeIndependentInvalid); err != nil || schema != contract.IndependentModelReviewSchema {
		return nil, core.Fail(CodeIndependentInvalid)
	}
	pv, err := object(f["provider"], CodeIndependentProvider, []string{"id", "model_id", "model_version"})
	if err != nil {
		return nil, err
	}
	var p Provider
	if p.ID, err = pv.token("id", CodeIndependentProvider); err != nil {
		return nil, err
	}
	if p.ModelID, err = pv.token("model_id", CodeIndependentProvider); err != nil {
		return nil, err
	}
	if p.ModelVersion, err = pv.token("model_version", CodeIndependentProvider); err != nil {
		return nil, err
	}
	if p.ID == translatorID {
		return nil, core.Fail(CodeIndependentNotIndependent)
	}
	receipt, err := receiptField(f, "receipt", CodeIndependentReceipt)
	if err != nil {
		return nil, err
	}
	return &IndependentReview{Schema: contract.IndependentModelReviewSchema, Provider: p, Receipt: receipt}, nil
}

func receiptField(f fields, name, code string) (string, error) {
	s, err := f.str(name, code)
	if err != nil {
		return "", err
	}
	return ValidReceiptText(s, code)
}

// ValidReceiptText applies the receipt text rules: non-empty,
// no surrounding whitespace, at most MaxReceiptLength characters, no NUL,
// NFC-normalized.
func ValidReceiptText(s, code string) (string, error) {
	if s == "" || !utf8.ValidString(s) || strings.TrimFunc(s, isPySpace) != s ||
		utf8.RuneCountInString(s) > MaxReceiptLength || strings.ContainsRune(s, 0) ||
		!norm.NFC.IsNormalString(s) {
		return "", core.Fail(code)
	}
	return s, nil
}

// isPySpace reports whether r counts as surrounding white space of a
// receipt text (docs/design.md "Evidence provider API"): U+0009..U+000D,
// the information separators U+001C..U+001F, U+0020, U+0085, U+00A0,
// U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F and U+3000, that
// is, Go's unicode.IsSpace plus U+001C..U+001F.
func isPySpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// externalCode maps a code from an outside service into its domain: a
// valid code gets the "<domain>." prefix (not doubled when already
// there); an invalid code, or one that would exceed 128 characters with
// the prefix, becomes "<domain>.failed".
func externalCode(code, domain string) string {
	if core.ValidErrorCode(code) {
		combined := code
		if !strings.HasPrefix(code, domain+".") {
			combined = domain + "." + code
		}
		if len(combined) <= 128 {
			return combined
		}
	}
	return domain + ".failed"
}
