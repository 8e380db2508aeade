package reference

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/peer"
)

// Defects: realistic ways a team's CMS or evidence provider gets the
// contract wrong, each selected by its id (a Break). Unlike the "skip:"
// breaks, which drop one whole check, these are the mistakes a real
// implementation makes: a loop that stops early, a comparison left out, a
// lenient decoder. `localeflow conformance` must fail every one
// (cmd/localeflow TestConformanceCatchesBrokenPeers).
const (
	// Request checks (both servers).
	DefectSigAnyValue     = "sig-any-value"       // any non-empty signature header passes
	DefectSigReparsedBody = "sig-reparsed-body"   // the body is re-serialized before its hash is checked
	DefectWindowPastOnly  = "window-past-only"    // only old timestamps are refused, future ones pass
	DefectReplayBySig     = "replay-by-signature" // replays are recognized by their signature, not their request id

	// Lifecycle API.
	DefectAnswerCached        = "answer-cached"         // the first 200 answer (and its signature) is served again
	DefectUnknownChangeBusy   = "unknown-change-busy"   // an unknown change is answered 503, not 404
	DefectAnswerTwoSignatures = "answer-two-signatures" // answers carry a second signature header (old key)

	// Delivery API.
	DefectDelivery409Always    = "delivery-409-always"     // every delivery is answered 409 "already delivered"
	DefectDelivery409PerChange = "delivery-409-per-change" // a change delivered once answers every later delivery 409
	DefectFirstLocaleApproval  = "first-locale-approval"   // only the first locale's approval is verified
	DefectFirstLocaleText      = "first-locale-text"       // only the first locale's text is hashed
	DefectLastLocaleSkipped    = "last-locale-skipped"     // the locale loop stops one short
	DefectRequestPathUnchecked = "request-path-unchecked"  // the request's site_id/event_id are not compared with the path
	DefectBundlePathUnchecked  = "bundle-path-unchecked"   // the bundle's site_id/event_id are not compared with the path
	DefectBundleIDUnchecked    = "bundle-id-unchecked"     // the bundle's delivery_id is not compared with the request's
	DefectApprovalIDNotDerived = "approval-id-not-derived" // approval_id is taken as given
	DefectBindingJobOnly       = "binding-job-only"        // the approval binding compares approval_id and job_id only
	DefectBindingNoResult      = "binding-no-result"       // the approval binding leaves out result_sha256
	DefectBindingNoLocale      = "binding-no-locale"       // the approval binding leaves out target_locale
	DefectApprovalKeyConfusion = "approval-key-confusion"  // approvals verify under the publication key too
	DefectExpiryGrace          = "expiry-grace"            // approvals stay valid 5 minutes past their expiry
	DefectExpiryInclusive      = "expiry-inclusive"        // an approval is valid at its expiry instant (request time, <)
	DefectSchemaUnchecked      = "schema-unchecked"        // the schema members are not compared
	DefectLenientBase64        = "lenient-base64"          // tokens decode with non-zero unused bits and padding
	DefectDuplicateMembers     = "duplicate-members"       // JSON with duplicate member names is read, the last wins
	DefectUnknownMembers       = "unknown-members"         // members the schemas do not list are ignored
	DefectTokenContextAny      = "token-context-any"       // a token verifies in either token context
	DefectBundleKeyConfusion   = "bundle-key-confusion"    // bundles verify under the approval key too
	DefectExpiryVsPrepared     = "expiry-vs-prepared"      // an approval's expiry is judged at the bundle's prepared_at_ms
	DefectConflictWrongCode    = "conflict-wrong-code"     // a conflicting bundle is refused 409 with another code
	DefectRefusalWithoutCode   = "refusal-without-code"    // bundle refusals carry no code

	// Evidence provider.
	DefectEvidenceUnknown404   = "evidence-unknown-404"   // a request_id it does not derive is answered 404 "unknown job"
	DefectHumanReviewIgnored   = "human-review-ignored"   // human_review_required is answered with a model review
	DefectReviewerIsTranslator = "reviewer-is-translator" // the independent review names the translating provider
	DefectReceiptFuture        = "receipt-future"         // receipts are issued 10 minutes ahead
	DefectReceiptExpired       = "receipt-expired"        // receipts expired before they are sent
	DefectResultNotEchoed      = "result-not-echoed"      // result_sha256 is not the request's
	DefectEvidenceBusyBadRetry = "busy-bad-retry-after"   // every third request is answered 503 with Retry-After "1.5"
)

// Defect describes one broken peer.
type Defect struct {
	// Kind is "cms", "evidence" or "producer".
	Kind string
	// ID selects it (a Break for the servers, a producer defect for
	// ProducerEvents).
	ID string
	// What the broken peer does.
	What string
}

// Defects lists every broken peer, the "skip:" and named breaks
// included, with what each does.
func Defects() []Defect {
	var out []Defect
	add := func(kind, id, what string) { out = append(out, Defect{Kind: kind, ID: id, What: what}) }
	for _, kind := range []string{"cms", "evidence"} {
		add(kind, "skip:"+peer.CodeRequestSignature, "no request signature check")
		add(kind, "skip:"+peer.CodeRequestStale, "no timestamp window")
		add(kind, "skip:"+peer.CodeRequestReplayed, "no replay check")
		add(kind, DefectSigAnyValue, "any non-empty signature passes")
		add(kind, DefectSigReparsedBody, "the body is re-serialized before its hash is checked")
		add(kind, DefectWindowPastOnly, "timestamps ahead of the clock pass")
		add(kind, DefectReplayBySig, "replays recognized by signature, not request id")
		add(kind, BreakAnswerNotStrict, "answers carry an extra member")
	}
	add("cms", BreakAnswerUnsigned, "lifecycle answers unsigned")
	add("cms", BreakAnswerWrongSignature, "lifecycle answers signed with another key")
	add("cms", BreakBadRetryAfter, `429/503 with "Retry-After: soon"`)
	add("cms", DefectAnswerCached, "the first lifecycle answer is served again (stale request id and signature)")
	add("cms", DefectUnknownChangeBusy, "an unknown change is answered 503")
	add("cms", DefectAnswerTwoSignatures, "lifecycle answers carry two signature headers")
	for _, code := range []string{peer.CodeDeliveryRequestInvalid, peer.CodeBundleSignature, peer.CodeBundleInvalid, peer.CodeBundleDeliveryID,
		peer.CodeBundleApproval, peer.CodeBundleApprovalMismatch, peer.CodeBundleApprovalExpired, peer.CodeBundleText} {
		add("cms", "skip:"+code, "delivery check "+code+" left out")
	}
	add("cms", BreakNotIdempotent, "a repeated delivery is answered 409")
	add("cms", BreakAcceptConflict, "another bundle under a known delivery_id is accepted")
	add("cms", DefectDelivery409Always, `every delivery is answered 409 "already delivered"`)
	add("cms", DefectDelivery409PerChange, "a change delivered once answers every later delivery 409")
	add("cms", DefectFirstLocaleApproval, "only the first locale's approval is verified")
	add("cms", DefectFirstLocaleText, "only the first locale's text is hashed")
	add("cms", DefectLastLocaleSkipped, "the last locale is not verified")
	add("cms", DefectRequestPathUnchecked, "the request's ids are not compared with the path")
	add("cms", DefectBundlePathUnchecked, "the bundle's ids are not compared with the path")
	add("cms", DefectBundleIDUnchecked, "the bundle's delivery_id is not compared with the request's")
	add("cms", DefectApprovalIDNotDerived, "approval ids are not derived")
	add("cms", DefectBindingJobOnly, "the approval binding compares the job only")
	add("cms", DefectBindingNoResult, "the approval binding leaves out result_sha256")
	add("cms", DefectBindingNoLocale, "the approval binding leaves out target_locale")
	add("cms", DefectApprovalKeyConfusion, "approvals verify under the publication key too")
	add("cms", DefectExpiryGrace, "approvals valid 5 minutes past their expiry")
	add("cms", DefectExpiryInclusive, "an approval valid at its expiry instant")
	add("cms", DefectSchemaUnchecked, "payload schema members unchecked")
	add("cms", DefectLenientBase64, "base64url with non-zero unused bits accepted")
	add("cms", DefectDuplicateMembers, "duplicate member names accepted (last wins)")
	add("cms", DefectUnknownMembers, "unknown members ignored")
	add("cms", DefectTokenContextAny, "tokens verify in either token context")
	add("cms", DefectBundleKeyConfusion, "bundles verify under the approval key too")
	add("cms", DefectExpiryVsPrepared, "approval expiry judged at prepared_at_ms, not the clock")
	add("cms", DefectConflictWrongCode, "a conflicting bundle refused 409 with a code of its own")
	add("cms", DefectRefusalWithoutCode, "bundle refusals carry no code")
	add("evidence", BreakWrongIssuer, "quality receipts signed by the human-review issuer")
	add("evidence", BreakReceiptNotBound, "receipts bound to another request")
	add("evidence", "skip:"+peer.CodeEvidenceRequestID, "request_id derivation unchecked")
	add("evidence", "skip:"+peer.CodeEvidenceRequestText, "text hashes unchecked")
	add("evidence", DefectEvidenceUnknown404, `a request_id it does not derive answered 404 "unknown job"`)
	add("evidence", DefectHumanReviewIgnored, "human review requests answered with a model review")
	add("evidence", DefectReviewerIsTranslator, "the independent review names the translator")
	add("evidence", DefectReceiptFuture, "receipts issued 10 minutes ahead")
	add("evidence", DefectReceiptExpired, "receipts already expired")
	add("evidence", DefectResultNotEchoed, "result_sha256 not echoed")
	add("evidence", DefectEvidenceBusyBadRetry, `503 with "Retry-After: 1.5"`)
	for _, d := range ProducerDefects() {
		add("producer", d.ID, d.What)
	}
	return out
}

// defectBreaks are the defects that are Breaks of the servers (all but
// the producer's).
func defectBreaks() []string {
	var out []string
	for _, d := range Defects() {
		if d.Kind != "producer" && !strings.HasPrefix(d.ID, "skip:") && !contains(out, d.ID) {
			out = append(out, d.ID)
		}
	}
	return out
}

// verifyDefects lists the defects verifyWithDefects implements (the CMS
// uses peer.VerifyDelivery when none is on).
var verifyDefects = []string{DefectFirstLocaleApproval, DefectFirstLocaleText, DefectLastLocaleSkipped, DefectRequestPathUnchecked,
	DefectBundlePathUnchecked, DefectBundleIDUnchecked, DefectApprovalIDNotDerived, DefectBindingJobOnly, DefectBindingNoResult,
	DefectBindingNoLocale, DefectApprovalKeyConfusion, DefectExpiryGrace, DefectExpiryInclusive, DefectSchemaUnchecked,
	DefectLenientBase64, DefectDuplicateMembers, DefectUnknownMembers, DefectTokenContextAny, DefectBundleKeyConfusion,
	DefectExpiryVsPrepared}

func (b Breaks) anyOf(names []string) bool {
	for _, n := range names {
		if b.Has(n) {
			return true
		}
	}
	return false
}

// verifyWithDefects is peer.VerifyDelivery written the way a CMS with the
// defects in b writes it: each defect weakens one step. requestTime is the
// request's X-Localeflow-Timestamp (DefectExpiryInclusive judges the
// expiry by it).
func verifyWithDefects(b Breaks, keys peer.Keys, siteID, eventID string, body []byte, now, requestTime time.Time) error {
	decode := strictJSON
	switch {
	case b.Has(DefectDuplicateMembers):
		decode = lastWinsJSON
	case b.Has(DefectUnknownMembers):
		decode = func(raw []byte, v any) bool { return json.Unmarshal(raw, v) == nil }
	}
	var req contract.DeliveryRequest
	if !decode(body, &req) || (!b.Has(DefectSchemaUnchecked) && req.Schema != contract.DeliveryRequestSchema) ||
		(!b.Has(DefectRequestPathUnchecked) && (req.SiteID != siteID || req.EventID != eventID)) || !core.ValidToken(req.DeliveryID) {
		return core.Fail(peer.CodeDeliveryRequestInvalid)
	}
	lenient := b.Has(DefectLenientBase64)
	open := func(context string, keys []ed25519.PublicKey, token string) ([]byte, bool) {
		p, ok := openToken(context, keys, token, lenient)
		if !ok && b.Has(DefectTokenContextAny) {
			other := release.ApprovalContext
			if context == other {
				other = release.PublicationContext
			}
			p, ok = openToken(other, keys, token, lenient)
		}
		return p, ok
	}
	bundleKeys := keys.Publication
	if b.Has(DefectBundleKeyConfusion) {
		bundleKeys = append(append([]ed25519.PublicKey(nil), keys.Publication...), keys.Approval...)
	}
	payload, ok := open(release.PublicationContext, bundleKeys, req.Bundle)
	if !ok {
		return core.Fail(peer.CodeBundleSignature)
	}
	var bun contract.Bundle
	if !decode(payload, &bun) || (!b.Has(DefectSchemaUnchecked) && bun.Schema != contract.DeliveryBundleSchema) ||
		(!b.Has(DefectBundleIDUnchecked) && bun.DeliveryID != req.DeliveryID) ||
		(!b.Has(DefectBundlePathUnchecked) && (bun.EventID != eventID || bun.SiteID != siteID)) ||
		!core.ValidToken(bun.PlanID) || len(bun.Locales) == 0 {
		return core.Fail(peer.CodeBundleInvalid)
	}
	ids := make([]string, 0, len(bun.Locales))
	for _, l := range bun.Locales {
		ids = append(ids, l.ApprovalID)
	}
	h, err := core.HashCanonical(map[string]any{"event_id": bun.EventID, "plan_id": bun.PlanID, "approvals": ids})
	if err != nil || bun.DeliveryID != "dlv-"+h[:40] {
		return core.Fail(peer.CodeBundleDeliveryID)
	}
	approvalKeys := keys.Approval
	if b.Has(DefectApprovalKeyConfusion) {
		approvalKeys = append(append([]ed25519.PublicKey(nil), keys.Approval...), keys.Publication...)
	}
	n := len(bun.Locales)
	if b.Has(DefectLastLocaleSkipped) && n > 1 {
		n--
	}
	for i, l := range bun.Locales[:n] {
		if i == 0 || !b.Has(DefectFirstLocaleApproval) {
			if err := approvalWithDefects(b, approvalKeys, bun, l, decode, open, now, requestTime); err != nil {
				return err
			}
		}
		if (i == 0 || !b.Has(DefectFirstLocaleText)) && core.SHA256Hex([]byte(l.Text)) != l.TargetSHA256 {
			return core.Fail(peer.CodeBundleText)
		}
	}
	return nil
}

func approvalWithDefects(b Breaks, keys []ed25519.PublicKey, bun contract.Bundle, l contract.BundleLocale, decode func([]byte, any) bool,
	open func(string, []ed25519.PublicKey, string) ([]byte, bool), now, requestTime time.Time) error {
	var a contract.ApprovalPayload
	raw, ok := open(release.ApprovalContext, keys, l.Approval)
	if !ok || !decode(raw, &a) || (!b.Has(DefectSchemaUnchecked) && a.Schema != contract.ApprovalSchema) {
		return core.Fail(peer.CodeBundleApproval)
	}
	if !b.Has(DefectApprovalIDNotDerived) {
		if id, err := peer.ApprovalID(a); err != nil || id != a.ApprovalID {
			return core.Fail(peer.CodeBundleApproval)
		}
	}
	bound := a.ApprovalID == l.ApprovalID && a.JobID == l.JobID
	if !b.Has(DefectBindingJobOnly) {
		bound = bound && a.EventID == bun.EventID && a.SiteID == bun.SiteID && a.PlanID == bun.PlanID &&
			(b.Has(DefectBindingNoLocale) || a.TargetLocale == l.TargetLocale) &&
			(b.Has(DefectBindingNoResult) || a.ResultSHA256 == l.ResultSHA256)
	}
	if !bound {
		return core.Fail(peer.CodeBundleApprovalMismatch)
	}
	nowMS := core.Millis(now)
	switch {
	case b.Has(DefectExpiryGrace):
		nowMS -= (5 * time.Minute).Milliseconds()
	case b.Has(DefectExpiryInclusive):
		// The request's time and a strict comparison: valid at the instant.
		nowMS = core.Millis(requestTime) - 1
	case b.Has(DefectExpiryVsPrepared):
		nowMS = bun.PreparedAtMS
	}
	if a.ExpiresAtMS <= nowMS {
		return core.Fail(peer.CodeBundleApprovalExpired)
	}
	return nil
}

// strictJSON decodes exactly one I-JSON object into v (no duplicate
// members, no unknown members, nothing after it), as peer does.
func strictJSON(raw []byte, v any) bool {
	if _, err := core.CanonicalizeJSON(raw); err != nil {
		return false
	}
	return lastWinsJSON(raw, v)
}

// lastWinsJSON is a common decoder: unknown members refused, but a
// duplicate member name is read and the last one wins.
func lastWinsJSON(raw []byte, v any) bool {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if dec.Decode(v) != nil {
		return false
	}
	_, err := dec.Token()
	return err != nil
}

// openToken opens v1.<b64url(payload)>.<b64url(sig)> under any of keys;
// lenient decodes as many libraries do (padding, non-zero unused bits).
func openToken(context string, keys []ed25519.PublicKey, token string, lenient bool) ([]byte, bool) {
	if !lenient {
		for _, k := range keys {
			if p, err := release.OpenToken(context, k, token); err == nil {
				return p, true
			}
		}
		return nil, false
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 || parts[0] != "v1" {
		return nil, false
	}
	dec := base64.RawURLEncoding
	payload, err1 := dec.DecodeString(strings.TrimRight(parts[1], "="))
	sig, err2 := dec.DecodeString(strings.TrimRight(parts[2], "="))
	if err1 != nil || err2 != nil || len(sig) != ed25519.SignatureSize {
		return nil, false
	}
	for _, k := range keys {
		if ed25519.Verify(k, []byte(context+parts[1]), sig) {
			return payload, true
		}
	}
	return nil, false
}

// requestTime reads a request's X-Localeflow-Timestamp (zero when absent).
func requestTime(ts string) time.Time {
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.Unix(n, 0)
}
