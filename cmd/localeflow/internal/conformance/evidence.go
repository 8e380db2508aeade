package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/peer"
)

// EvidenceOptions say what to check and how.
type EvidenceOptions struct {
	BaseURL string
	// Keys is the evidence HMAC key set (the first signs).
	Keys [][]byte
	// Issuers are the trusted receipt issuers per kind, as the
	// deployment's LOCALEFLOW_RECEIPT_ISSUERS_* say.
	Issuers    release.TrustedIssuers
	HTTPClient *http.Client
	Now        func() time.Time
}

// EvidenceChecks are the evidence check names in report order.
var EvidenceChecks = []struct{ Name, Level string }{
	{"evidence.answer", Must}, {"evidence.strict", Must},
	{"receipt.quality", Must}, {"receipt.human_review", Must}, {"receipt.independent_review", Must},
	{"request.binding", Should}, {"request.text_sha256", Should},
	{"request.refuse_unsigned", Must}, {"request.refuse_bad_signature", Must}, {"request.refuse_tampered", Must},
	{"request.refuse_stale", Should}, {"request.refuse_future", Should}, {"request.refuse_replay", Should},
	{"retry_after", Must},
}

// evidencePath is the provider's endpoint below the base URL.
const evidencePath = "/v1/evidence"

// Evidence runs the evidence provider checks. Each request is a synthetic
// result with ids starting "lf-conformance-"; nothing is delivered.
func Evidence(ctx context.Context, o EvidenceOptions) (Report, error) {
	rep := Report{Server: "evidence"}
	if len(o.Keys) == 0 {
		return rep, fmt.Errorf("the evidence HMAC key is missing")
	}
	if err := o.Issuers.Validate(); err != nil {
		return rep, fmt.Errorf("the trusted receipt issuers: %s", core.CodeOf(err))
	}
	c, err := newClient(ctx, o.BaseURL, o.Keys[0], o.HTTPClient, o.Now)
	if err != nil {
		return rep, err
	}
	run := runID(c.now())
	verifiers := o.Issuers.Verifiers()

	plain, err := evidenceRequest(run, "plain", false, false)
	if err != nil {
		return rep, err
	}
	body, _ := release.EvidenceBody(plain)
	first, firstHeaders := c.signed(http.MethodPost, evidencePath, body)
	if first.err != nil {
		rep.unreachable(EvidenceChecks, first.err)
		return rep, nil
	}
	var ev *release.Evidence
	if first.status != http.StatusOK {
		rep.fail("evidence.answer", Must, CodeStatus, fmt.Sprintf("a signed request answered %d, want 200", first.status))
		rep.skip("evidence.strict", Must, "no 200 answer")
	} else {
		rep.pass("evidence.answer", Must, "200")
		e, verr := release.ValidateEvidenceResponse(plain, first.body)
		if verr != nil {
			rep.fail("evidence.strict", Must, core.CodeOf(verr), "localeflow's response validation refuses the answer")
		} else {
			ev = &e
			rep.pass("evidence.strict", Must, "exact members, schema, request_id and result_sha256 echoed")
		}
	}
	now := c.now()
	if ev == nil {
		rep.skip("receipt.quality", Must, "no valid answer")
	} else if _, err := verifiers.Quality.Verify(ev.QualityReceipt, plain.RequestID, plain.ResultSHA256, now); err != nil {
		rep.fail("receipt.quality", Must, core.CodeOf(err), "the quality receipt does not verify under the quality issuers")
	} else {
		rep.pass("receipt.quality", Must, "signed by a quality issuer, bound to the request")
	}

	// Human review.
	if req, err := evidenceRequest(run, "human", true, false); err == nil {
		receiptCheck(&rep, c, "receipt.human_review", req, func(e release.Evidence) error {
			_, err := verifiers.HumanReview.Verify(e.HumanReviewReceipt, req.RequestID, req.ResultSHA256, now)
			return err
		})
	}
	// Independent model review.
	if req, err := evidenceRequest(run, "independent", false, true); err == nil {
		receiptCheck(&rep, c, "receipt.independent_review", req, func(e release.Evidence) error {
			p, err := verifiers.IndependentReview.Verify(e.IndependentReview.Receipt, req.RequestID, req.ResultSHA256, now)
			if err != nil {
				return err
			}
			if p.ReviewerID != e.IndependentReview.Provider.ID || p.ReviewerID == req.Provider.ID {
				return core.Fail(CodeReviewerUnbound)
			}
			return nil
		})
	}

	// The request checks a provider SHOULD make.
	if req, err := evidenceRequest(run, "binding", false, false); err == nil {
		req.RequestID = contract.EvidenceRequestIDPrefix + zeros(64)
		b, _ := release.EvidenceBody(req)
		a, _ := c.signed(http.MethodPost, evidencePath, b)
		rep.refusal("request.binding", Should, a, 0, peer.CodeEvidenceRequestID)
	}
	if req, err := evidenceRequest(run, "text", false, false); err == nil {
		req.TargetText += " (edited)"
		b, _ := release.EvidenceBody(req)
		a, _ := c.signed(http.MethodPost, evidencePath, b)
		rep.refusal("request.text_sha256", Should, a, 0, peer.CodeEvidenceRequestText)
	}

	// Refusals of broken requests (each on a request of its own).
	refusalBody := func(tag string) []byte {
		req, err := evidenceRequest(run, tag, false, false)
		if err != nil {
			return nil
		}
		b, _ := release.EvidenceBody(req)
		return b
	}
	full := c.path(evidencePath)
	rep.refusal("request.refuse_unsigned", Must, c.send(http.MethodPost, evidencePath, refusalBody("unsigned"), nil), http.StatusUnauthorized, peer.CodeRequestSignature)
	b := refusalBody("bad-signature")
	bad := c.sign(otherKey(), http.MethodPost, full, b, 0)
	rep.refusal("request.refuse_bad_signature", Must, c.send(http.MethodPost, evidencePath, b, &bad), http.StatusUnauthorized, peer.CodeRequestSignature)
	b = refusalBody("tampered")
	h := c.sign(nil, http.MethodPost, full, b, 0)
	other := refusalBody("tampered-other")
	b = refusalBody("tampered-space")
	hs := c.sign(nil, http.MethodPost, full, b, 0)
	rep.refusals("request.refuse_tampered", Must, []variantAnswer{
		{"another body", c.send(http.MethodPost, evidencePath, other, &h)},
		{"a space appended to the body", c.send(http.MethodPost, evidencePath, append(append([]byte(nil), b...), ' '), &hs)},
	}, http.StatusUnauthorized, peer.CodeRequestSignature)
	b = refusalBody("stale")
	stale := c.sign(nil, http.MethodPost, full, b, -staleBy)
	rep.refusal("request.refuse_stale", Should, c.send(http.MethodPost, evidencePath, b, &stale), http.StatusUnauthorized, peer.CodeRequestStale)
	b = refusalBody("future")
	ahead := c.sign(nil, http.MethodPost, full, b, staleBy)
	rep.refusal("request.refuse_future", Should, c.send(http.MethodPost, evidencePath, b, &ahead), http.StatusUnauthorized, peer.CodeRequestStale)
	if first.status == http.StatusOK {
		again := c.resignedAfter(http.MethodPost, full, body, firstHeaders)
		rep.refusals("request.refuse_replay", Should, []variantAnswer{
			{"the same headers", c.send(http.MethodPost, evidencePath, body, &firstHeaders)},
			{"the same request id, signed again a second later", c.send(http.MethodPost, evidencePath, body, &again)},
		}, http.StatusConflict, peer.CodeRequestReplayed)
	} else {
		rep.skip("request.refuse_replay", Should, "no accepted request to replay")
	}
	c.retryAfterCheck(&rep, true)
	rep.order(EvidenceChecks)
	return rep, nil
}

// receiptCheck sends req and judges its answer with verify.
func receiptCheck(rep *Report, c *client, check string, req *contract.EvidenceRequest, verify func(release.Evidence) error) {
	body, err := release.EvidenceBody(req)
	if err != nil {
		rep.fail(check, Must, CodeRequestBuild, "")
		return
	}
	a, _ := c.signed(http.MethodPost, evidencePath, body)
	switch {
	case a.err != nil:
		rep.fail(check, Must, CodeUnreachable, a.err.Error())
		return
	case a.status != http.StatusOK:
		rep.fail(check, Must, CodeStatus, fmt.Sprintf("answered %d, want 200", a.status))
		return
	}
	e, err := release.ValidateEvidenceResponse(req, a.body)
	if err == nil {
		err = verify(e)
	}
	if err != nil {
		rep.fail(check, Must, core.CodeOf(err), "")
		return
	}
	rep.pass(check, Must, "signed by an issuer of its kind, bound to the request")
}

// evidenceRequest is a synthetic request whose request_id is derived as
// localeflow derives it.
func evidenceRequest(run, tag string, human, independent bool) (*contract.EvidenceRequest, error) {
	source, target := "Welcome", "Willkommen ("+tag+")"
	b := contract.EvidenceBinding{
		Schema: contract.EvidenceRequestSchema, EvidenceRevision: "lf-conformance-1",
		EventID: "lf-conformance-" + run + "-" + tag, PlanID: "lf-conformance-plan-" + run, JobID: "lf-conformance-job-" + tag,
		ResultSHA256: core.SHA256Hex([]byte("lf-conformance-result|" + run + "|" + tag)),
		SourceSHA256: core.SHA256Hex([]byte(source)), TargetSHA256: core.SHA256Hex([]byte(target)),
		SourceLocale: "en-US", TargetLocale: "de-DE", ContentType: "page", GlossaryVersion: "lf-conformance", PolicyVersion: "lf-conformance",
		Provider:        release.Provider{ID: "lf-conformance-translator", ModelID: "lf-conformance-model", ModelVersion: "1"},
		SoftwareVersion: "localeflow-conformance", ReviewConfidence: map[string]string{}, QualityProfile: map[string]string{},
		CommercialReview: json.RawMessage("null"), HumanReviewRequired: human, IndependentReviewRequired: independent,
	}
	h, err := core.HashCanonical(b)
	if err != nil {
		return nil, err
	}
	return &contract.EvidenceRequest{RequestID: contract.EvidenceRequestIDPrefix + h, EvidenceBinding: b, SourceText: source, TargetText: target}, nil
}
