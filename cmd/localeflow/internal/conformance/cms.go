package conformance

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/lifecycle"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/peer"
	"github.com/localeflow/localeflow/signing"
)

// CMSOptions say what to check and how.
type CMSOptions struct {
	BaseURL string
	// Keys is the CMS HMAC key set: the first signs requests, every key
	// verifies answers (a rotation in progress).
	Keys [][]byte
	// SiteID and EventID name a change the CMS knows (a test change).
	SiteID, EventID string
	// Pin, when its PlanID is set, is the identity the lifecycle answer
	// must carry (plan, website version, source sequence, job count);
	// otherwise the answer's own identity is taken and only its shape and
	// consistency are checked.
	Pin lifecycle.Target
	// BusyEventID names a change the CMS answers 429 or 503 for (a test
	// fixture), so the retry_after check has an answer to judge.
	BusyEventID string
	// Deliver runs the delivery checks. They POST deliveries for EventID:
	// a conforming CMS refuses every broken one and accepts one test
	// bundle (it publishes its texts) — use a test change.
	Deliver bool
	// Approval and Publication sign the test bundles (a test deployment's
	// authorities, whose public keys the CMS trusts). Without them only
	// the delivery checks that need no valid bundle run.
	Approval, Publication *release.Authority
	HTTPClient            *http.Client
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// CMSChecks are the CMS check names in report order, with their levels.
var CMSChecks = []struct{ Name, Level string }{
	{"lifecycle.answer", Must}, {"lifecycle.signature", Must}, {"lifecycle.strict", Must},
	{"lifecycle.unknown_change", Should},
	{"lifecycle.refuse_unsigned", Must}, {"lifecycle.refuse_bad_signature", Must}, {"lifecycle.refuse_tampered", Must},
	{"lifecycle.refuse_stale", Should}, {"lifecycle.refuse_replay", Should},
	{"retry_after", Must},
	{"delivery.request_identity", Must}, {"bundle.signature", Must}, {"bundle.delivery_id", Must}, {"bundle.approval", Must},
	{"bundle.approval_binding", Must}, {"bundle.approval_expiry", Must}, {"bundle.text_sha256", Must},
	{"delivery.refuse_unsigned", Must}, {"delivery.refuse_bad_signature", Must}, {"delivery.refuse_tampered", Must},
	{"delivery.refuse_stale", Should},
	{"delivery.accept", Must}, {"delivery.refuse_replay", Should}, {"delivery.idempotent", Must}, {"delivery.conflict", Should},
}

// staleBy is how far outside the 5-minute window the stale checks sign.
const staleBy = 2 * peer.RequestWindow

// CMS runs the CMS checks. The error is a setup problem (nothing was
// sent); a server's failures are in the report.
func CMS(ctx context.Context, o CMSOptions) (Report, error) {
	rep := Report{Server: "cms"}
	if len(o.Keys) == 0 {
		return rep, fmt.Errorf("the CMS HMAC key is missing")
	}
	if !core.ValidToken(o.SiteID) || !core.ValidToken(o.EventID) || (o.BusyEventID != "" && !core.ValidToken(o.BusyEventID)) {
		return rep, fmt.Errorf("the site and change ids must be tokens")
	}
	if (o.Approval == nil) != (o.Publication == nil) {
		return rep, fmt.Errorf("give both authority keys (approval and publication) or neither")
	}
	c, err := newClient(ctx, o.BaseURL, o.Keys[0], o.HTTPClient, o.Now)
	if err != nil {
		return rep, err
	}
	lcPath := lifecyclePath(o.SiteID, o.EventID)

	// lifecycle.answer, .signature, .strict
	first, firstHeaders := c.signed(http.MethodGet, lcPath, nil)
	for i := 0; i < 2 && first.err == nil && (first.status == http.StatusTooManyRequests || first.status == http.StatusServiceUnavailable); i++ {
		wait(ctx, time.Second)
		first, firstHeaders = c.signed(http.MethodGet, lcPath, nil)
	}
	if first.err != nil {
		rep.unreachable(CMSChecks, first.err)
		return rep, nil
	}
	var parsed *lifecycle.Response
	if first.status != http.StatusOK {
		rep.fail("lifecycle.answer", Must, CodeStatus, fmt.Sprintf("a signed GET for the change answered %d, want 200", first.status))
		rep.skip("lifecycle.signature", Must, "no 200 answer")
		rep.skip("lifecycle.strict", Must, "no 200 answer")
	} else {
		rep.pass("lifecycle.answer", Must, "200")
		if verifyAnswer(o.Keys, first) {
			rep.pass("lifecycle.signature", Must, "one signature, bound to the request id and body")
		} else {
			rep.fail("lifecycle.signature", Must, CodeSignature, fmt.Sprintf("%d signature header(s); none verifies for the request id and body under the key set", len(first.header.Values(signing.HeaderSignature))))
		}
		target, how := o.Pin, "identity pinned by the flags"
		target.SiteID, target.EventID = o.SiteID, o.EventID
		if target.PlanID == "" {
			target, how = identityOf(o.SiteID, o.EventID, first.body), "identity taken from the answer (pin it with --plan-id …)"
		}
		p, perr := lifecycle.Parse(target, first.requestID, first.body)
		if perr != nil {
			rep.fail("lifecycle.strict", Must, core.CodeOf(perr), "the strict lifecycle parser refuses the answer; "+how)
		} else {
			parsed = &p
			rep.pass("lifecycle.strict", Must, fmt.Sprintf("status %s, %d locale(s); %s", p.Status, len(p.RequiredLocales), how))
		}
	}

	// lifecycle.unknown_change
	unknown, _ := c.signed(http.MethodGet, lifecyclePath(o.SiteID, "lf-conformance-unknown-"+runID(c.now())), nil)
	rep.refusal("lifecycle.unknown_change", Should, unknown, 0, "404")

	// Refusals of broken requests.
	h := c.sign(nil, http.MethodGet, c.path(lcPath), nil, 0)
	rep.refusal("lifecycle.refuse_unsigned", Must, c.send(http.MethodGet, lcPath, nil, nil), http.StatusUnauthorized, "")
	bad := c.sign(otherKey(), http.MethodGet, c.path(lcPath), nil, 0)
	rep.refusal("lifecycle.refuse_bad_signature", Must, c.send(http.MethodGet, lcPath, nil, &bad), http.StatusUnauthorized, "")
	tampered := h
	tampered.timestamp = fmt.Sprint(mustInt(h.timestamp) - 1)
	rep.refusal("lifecycle.refuse_tampered", Must, c.send(http.MethodGet, lcPath, nil, &tampered), http.StatusUnauthorized, "")
	stale := c.sign(nil, http.MethodGet, c.path(lcPath), nil, -staleBy)
	rep.refusal("lifecycle.refuse_stale", Should, c.send(http.MethodGet, lcPath, nil, &stale), http.StatusUnauthorized, "")
	if first.status == http.StatusOK {
		rep.refusal("lifecycle.refuse_replay", Should, c.send(http.MethodGet, lcPath, nil, &firstHeaders), http.StatusConflict, "")
	} else {
		rep.skip("lifecycle.refuse_replay", Should, "no accepted request to replay")
	}

	// retry_after
	if o.BusyEventID != "" {
		busy, _ := c.signed(http.MethodGet, lifecyclePath(o.SiteID, o.BusyEventID), nil)
		if busy.err != nil {
			rep.fail("retry_after", Must, CodeUnreachable, busy.err.Error())
		} else if busy.status != http.StatusTooManyRequests && busy.status != http.StatusServiceUnavailable {
			rep.fail("retry_after", Must, CodeBusyNotBusy, fmt.Sprintf("the busy change answered %d, not 429/503", busy.status))
		} else {
			c.retryAfterCheck(&rep, true)
		}
	} else {
		c.retryAfterCheck(&rep, false)
	}

	deliveryChecks(&rep, c, o, parsed)
	return rep, nil
}

func lifecyclePath(site, event string) string {
	return "/v1/sites/" + url.PathEscape(site) + "/changes/" + url.PathEscape(event) + "/lifecycle"
}

func deliveriesPath(site, event string) string {
	return "/v1/sites/" + url.PathEscape(site) + "/changes/" + url.PathEscape(event) + "/deliveries"
}

func mustInt(s string) int64 {
	var n int64
	_, _ = fmt.Sscan(s, &n)
	return n
}

func wait(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// verifyAnswer: exactly one signature header, valid under one key.
func verifyAnswer(keys [][]byte, a answer) bool {
	sig := a.header.Values(signing.HeaderSignature)
	if len(sig) != 1 {
		return false
	}
	for _, k := range keys {
		if signing.VerifyResponse(k, a.requestID, a.body, sig[0]) {
			return true
		}
	}
	return false
}

// identityOf reads the identity members of a lifecycle answer loosely, so
// the strict parser can judge everything else.
func identityOf(site, event string, body []byte) lifecycle.Target {
	var v struct {
		PlanID          string            `json:"plan_id"`
		WebsiteVersion  string            `json:"website_version"`
		SourceSequence  int64             `json:"source_sequence"`
		RequiredLocales []json.RawMessage `json:"required_locales"`
	}
	_ = json.Unmarshal(body, &v)
	return lifecycle.Target{SiteID: site, EventID: event, PlanID: v.PlanID, WebsiteVersion: v.WebsiteVersion,
		SourceSequence: v.SourceSequence, JobCount: len(v.RequiredLocales)}
}

// deliveryChecks runs the delivery and bundle checks.
func deliveryChecks(rep *Report, c *client, o CMSOptions, lc *lifecycle.Response) {
	names := CMSChecks[10:]
	if !o.Deliver {
		for _, ch := range names {
			rep.skip(ch.Name, ch.Level, "delivery checks POST deliveries (a conforming CMS publishes one test bundle): run with --deliver on a test change")
		}
		return
	}
	if lc == nil {
		for _, ch := range names {
			rep.skip(ch.Name, ch.Level, "needs a strict lifecycle answer (plan_id, required_locales)")
		}
		return
	}
	path := deliveriesPath(o.SiteID, o.EventID)
	b := bundler{site: o.SiteID, event: o.EventID, plan: lc.PlanID, version: lc.WebsiteVersion, locales: lc.RequiredLocales,
		now: c.now(), approval: o.Approval, publication: o.Publication}
	haveKeys := o.Approval != nil
	noKeys := "needs the test authorities (--approval-seed-hex, --publication-seed-hex) whose public keys the CMS trusts"
	post := func(body []byte) answer { a, _ := c.signed(http.MethodPost, path, body); return a }

	// The bundle checks: each broken bundle has its own delivery_id.
	type tamper struct {
		check, suggested string
		edit             func(*variant)
	}
	tampers := []tamper{
		{"delivery.request_identity", "400", func(v *variant) { v.requestEvent = o.EventID + "-other" }},
		{"bundle.signature", "403", func(v *variant) { v.publication = randomAuthority(true) }},
		{"bundle.delivery_id", "400", func(v *variant) { v.deliveryID = "dlv-" + zeros(40) }},
		{"bundle.approval", "403", func(v *variant) { v.approval = randomAuthority(false) }},
		{"bundle.approval_binding", "403", func(v *variant) { v.approvalJob = "lf-conformance-other-job" }},
		{"bundle.approval_expiry", "403", func(v *variant) { v.expired = true }},
		{"bundle.text_sha256", "400", func(v *variant) { v.textEdited = true }},
	}
	for i, t := range tampers {
		if !haveKeys && t.check != "bundle.signature" {
			rep.skip(t.check, Must, noKeys)
			continue
		}
		v := variant{seq: i + 1}
		t.edit(&v)
		if !haveKeys {
			v.approval = randomAuthority(false)
		}
		body, err := b.body(v)
		if err != nil {
			rep.fail(t.check, Must, CodeRequestBuild, "the test bundle could not be built")
			continue
		}
		rep.refusal(t.check, Must, post(body), 0, t.suggested)
	}

	// The request checks, on the valid bundle (or, without the
	// authorities, on the untrusted one: only 401 passes).
	good := variant{seq: 100}
	if !haveKeys {
		good.publication, good.approval = randomAuthority(true), randomAuthority(false)
	}
	body, err := b.body(good)
	if err != nil {
		for _, ch := range names[7:] {
			rep.fail(ch.Name, ch.Level, CodeRequestBuild, "the test bundle could not be built")
		}
		return
	}
	full := c.path(path)
	rep.refusal("delivery.refuse_unsigned", Must, c.send(http.MethodPost, path, body, nil), http.StatusUnauthorized, "")
	bad := c.sign(otherKey(), http.MethodPost, full, body, 0)
	rep.refusal("delivery.refuse_bad_signature", Must, c.send(http.MethodPost, path, body, &bad), http.StatusUnauthorized, "")
	h := c.sign(nil, http.MethodPost, full, body, 0)
	rep.refusal("delivery.refuse_tampered", Must, c.send(http.MethodPost, path, append(append([]byte(nil), body...), ' '), &h), http.StatusUnauthorized, "")
	stale := c.sign(nil, http.MethodPost, full, body, -staleBy)
	rep.refusal("delivery.refuse_stale", Should, c.send(http.MethodPost, path, body, &stale), http.StatusUnauthorized, "")
	if !haveKeys {
		for _, ch := range names[11:] {
			rep.skip(ch.Name, ch.Level, noKeys)
		}
		return
	}

	// The valid bundle: accepted, replay refused, idempotent, conflict.
	accepted, ah := c.signed(http.MethodPost, path, body)
	switch {
	case accepted.err != nil:
		rep.fail("delivery.accept", Must, CodeUnreachable, accepted.err.Error())
	case accepted.status/100 == 2:
		rep.pass("delivery.accept", Must, fmt.Sprintf("answered %d", accepted.status))
	default:
		rep.fail("delivery.accept", Must, CodeStatus, fmt.Sprintf("a valid delivery answered %d, want 2xx", accepted.status))
	}
	if accepted.err == nil && accepted.status/100 == 2 {
		rep.refusal("delivery.refuse_replay", Should, c.send(http.MethodPost, path, body, &ah), http.StatusConflict, "")
	} else {
		rep.skip("delivery.refuse_replay", Should, "no accepted delivery to replay")
	}
	again := post(body)
	switch {
	case again.err != nil:
		rep.fail("delivery.idempotent", Must, CodeUnreachable, again.err.Error())
	case again.status/100 == 2:
		rep.pass("delivery.idempotent", Must, fmt.Sprintf("the same delivery_id and bundle answered %d again (publishing once is the CMS's duty; not visible from outside)", again.status))
	default:
		rep.fail("delivery.idempotent", Must, CodeNotIdempotent, fmt.Sprintf("the same delivery_id and bundle, re-sent, answered %d, want 2xx (localeflow would count the delivery failed)", again.status))
	}
	other := good
	other.preparedOffset = 1
	conflict, err := b.body(other)
	if err != nil {
		rep.fail("delivery.conflict", Should, CodeRequestBuild, "the test bundle could not be built")
		return
	}
	rep.refusal("delivery.conflict", Should, post(conflict), http.StatusConflict, "")
}

// bundler builds test delivery requests for one change.
type bundler struct {
	site, event, plan, version string
	locales                    []string
	now                        time.Time
	approval, publication      *release.Authority
}

// variant is one test bundle: seq makes its approvals (and so its
// delivery_id) its own; the other fields break one check each.
type variant struct {
	seq                   int
	requestEvent          string
	deliveryID            string
	approvalJob           string
	expired, textEdited   bool
	preparedOffset        int64
	approval, publication *release.Authority
}

func zeros(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = '0'
	}
	return string(b)
}

// randomAuthority is an authority no CMS trusts.
func randomAuthority(publication bool) *release.Authority {
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil
	}
	var a *release.Authority
	if publication {
		a, err = release.NewPublicationAuthority(priv.Seed())
	} else {
		a, err = release.NewApprovalAuthority(priv.Seed())
	}
	if err != nil {
		return nil
	}
	return a
}

func (b bundler) body(v variant) ([]byte, error) {
	apv, pub := b.approval, b.publication
	if v.approval != nil {
		apv = v.approval
	}
	if v.publication != nil {
		pub = v.publication
	}
	if apv == nil || pub == nil {
		return nil, fmt.Errorf("no authority")
	}
	nowMS := core.Millis(b.now)
	bundle := contract.Bundle{Schema: contract.DeliveryBundleSchema, EventID: b.event, SiteID: b.site, PlanID: b.plan,
		WebsiteVersion: b.version, PreparedAtMS: nowMS + v.preparedOffset}
	var ids []string
	for _, locale := range b.locales {
		source := "en-US"
		if locale == source {
			source = "en-GB"
		}
		text := "localeflow conformance check, " + locale
		job := "lf-conformance-job-" + locale
		result := core.SHA256Hex([]byte("lf-conformance-result|" + locale))
		a := contract.ApprovalPayload{Schema: contract.ApprovalSchema, EventID: b.event, SiteID: b.site, PlanID: b.plan,
			JobID: job, TargetLocale: locale, ResultSHA256: result,
			EvidenceRequestID:    contract.EvidenceRequestIDPrefix + core.SHA256Hex([]byte("lf-conformance-evidence|"+locale)),
			QualityReceiptSHA256: core.SHA256Hex([]byte("lf-conformance-receipt|" + locale)),
			ApprovedAtMS:         nowMS - int64(v.seq), ExpiresAtMS: nowMS + time.Hour.Milliseconds()}
		if v.expired {
			a.ExpiresAtMS = nowMS - time.Minute.Milliseconds()
		}
		if v.approvalJob != "" {
			a.JobID = v.approvalJob
		}
		id, err := peer.ApprovalID(a)
		if err != nil {
			return nil, err
		}
		a.ApprovalID = id
		raw, err := core.Canonical(a)
		if err != nil {
			return nil, err
		}
		token, err := apv.Sign(raw)
		if err != nil {
			return nil, err
		}
		l := contract.BundleLocale{JobID: job, SourceLocale: source, TargetLocale: locale, ContentType: "page",
			SourceSHA256: core.SHA256Hex([]byte("localeflow conformance check")), TargetSHA256: core.SHA256Hex([]byte(text)),
			ResultSHA256: result, Text: text, ApprovalID: id, Approval: token}
		if v.textEdited {
			l.Text += " (edited)"
		}
		bundle.Locales = append(bundle.Locales, l)
		ids = append(ids, id)
	}
	h, err := core.HashCanonical(map[string]any{"event_id": b.event, "plan_id": b.plan, "approvals": ids})
	if err != nil {
		return nil, err
	}
	bundle.DeliveryID = "dlv-" + h[:40]
	if v.deliveryID != "" {
		bundle.DeliveryID = v.deliveryID
	}
	raw, err := core.Canonical(bundle)
	if err != nil {
		return nil, err
	}
	token, err := pub.Sign(raw)
	if err != nil {
		return nil, err
	}
	event := b.event
	if v.requestEvent != "" {
		event = v.requestEvent
	}
	return core.Canonical(contract.DeliveryRequest{Schema: contract.DeliveryRequestSchema, DeliveryID: bundle.DeliveryID,
		EventID: event, SiteID: b.site, Bundle: token})
}
