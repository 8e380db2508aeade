package conformance

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
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
	// Locales are the change's required locales, for the delivery checks
	// to run without a strict lifecycle answer (with Pin's plan id).
	Locales []string
	// ApprovalSeed and PublicationSeed are a test deployment's Ed25519
	// seeds whose public keys the CMS trusts: they sign the test bundles.
	// Without them only the delivery checks that need no valid bundle run.
	ApprovalSeed, PublicationSeed []byte
	HTTPClient                    *http.Client
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// CMSChecks are the CMS check names in report order, with their levels.
var CMSChecks = []struct{ Name, Level string }{
	{"lifecycle.answer", Must}, {"lifecycle.signature", Must}, {"lifecycle.strict", Must},
	{"lifecycle.unknown_change", Should},
	{"lifecycle.refuse_unsigned", Must}, {"lifecycle.refuse_bad_signature", Must}, {"lifecycle.refuse_tampered", Must},
	{"lifecycle.refuse_stale", Should}, {"lifecycle.refuse_future", Should}, {"lifecycle.refuse_replay", Should},
	{"retry_after", Must},
	{"delivery.request_identity", Must}, {"delivery.request_strict", Must}, {"bundle.signature", Must}, {"bundle.identity", Must},
	{"bundle.strict", Must}, {"bundle.delivery_id", Must}, {"bundle.approval", Must},
	{"bundle.approval_binding", Must}, {"bundle.approval_expiry", Must}, {"bundle.approval_expiry_instant", Should}, {"bundle.text_sha256", Must},
	{"delivery.refuse_unsigned", Must}, {"delivery.refuse_bad_signature", Must}, {"delivery.refuse_tampered", Must},
	{"delivery.refuse_stale", Should}, {"delivery.refuse_future", Should},
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
	if (o.ApprovalSeed == nil) != (o.PublicationSeed == nil) {
		return rep, fmt.Errorf("give both authority seeds (approval and publication) or neither")
	}
	for _, l := range o.Locales {
		if !core.ValidToken(l) {
			return rep, fmt.Errorf("the locales must be tokens")
		}
	}
	c, err := newClient(ctx, o.BaseURL, o.Keys[0], o.HTTPClient, o.Now)
	if err != nil {
		return rep, err
	}
	lcPath := lifecyclePath(o.SiteID, o.EventID)

	// lifecycle.answer, .signature, .strict (429/503 retried)
	first, firstHeaders := c.signed(http.MethodGet, lcPath, nil)
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
		// A second GET: its answer is signed for its own request id (an
		// answer served again from a cache is not).
		second, _ := c.signed(http.MethodGet, lcPath, nil)
		switch {
		case !verifyAnswer(o.Keys, first):
			rep.fail("lifecycle.signature", Must, CodeSignature, fmt.Sprintf("%d signature header(s); none verifies for the request id and body under the key set", len(first.header.Values(signing.HeaderSignature))))
		case second.err != nil || second.status != http.StatusOK:
			rep.fail("lifecycle.signature", Must, CodeStatus, "a second signed GET got no 200 answer")
		case !verifyAnswer(o.Keys, second):
			rep.fail("lifecycle.signature", Must, CodeSignature, "the answer to a second GET is not signed for its own request id (an answer served again?)")
		default:
			rep.pass("lifecycle.signature", Must, "one signature, bound to the request id and body (two GETs)")
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
	rep.refusal("lifecycle.unknown_change", Should, unknown, http.StatusNotFound, "")

	// Refusals of broken requests: the status and the request check's code.
	h := c.sign(nil, http.MethodGet, c.path(lcPath), nil, 0)
	rep.refusal("lifecycle.refuse_unsigned", Must, c.send(http.MethodGet, lcPath, nil, nil), http.StatusUnauthorized, peer.CodeRequestSignature)
	bad := c.sign(otherKey(), http.MethodGet, c.path(lcPath), nil, 0)
	rep.refusal("lifecycle.refuse_bad_signature", Must, c.send(http.MethodGet, lcPath, nil, &bad), http.StatusUnauthorized, peer.CodeRequestSignature)
	tampered := h
	tampered.timestamp = fmt.Sprint(mustInt(h.timestamp) - 1)
	rep.refusal("lifecycle.refuse_tampered", Must, c.send(http.MethodGet, lcPath, nil, &tampered), http.StatusUnauthorized, peer.CodeRequestSignature)
	stale := c.sign(nil, http.MethodGet, c.path(lcPath), nil, -staleBy)
	rep.refusal("lifecycle.refuse_stale", Should, c.send(http.MethodGet, lcPath, nil, &stale), http.StatusUnauthorized, peer.CodeRequestStale)
	ahead := c.sign(nil, http.MethodGet, c.path(lcPath), nil, staleBy)
	rep.refusal("lifecycle.refuse_future", Should, c.send(http.MethodGet, lcPath, nil, &ahead), http.StatusUnauthorized, peer.CodeRequestStale)
	if first.status == http.StatusOK {
		again := c.resignedAfter(http.MethodGet, c.path(lcPath), nil, firstHeaders)
		rep.refusals("lifecycle.refuse_replay", Should, []variantAnswer{
			{"the same headers", c.send(http.MethodGet, lcPath, nil, &firstHeaders)},
			{"the same request id, signed again a second later", c.send(http.MethodGet, lcPath, nil, &again)},
		}, http.StatusConflict, peer.CodeRequestReplayed)
	} else {
		rep.skip("lifecycle.refuse_replay", Should, "no accepted request to replay")
	}

	// retry_after
	if o.BusyEventID != "" {
		busy := c.signedOnce(http.MethodGet, lifecyclePath(o.SiteID, o.BusyEventID), nil)
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
	rep.order(CMSChecks)
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

// firstDeliveryCheck is the index of the first delivery check in CMSChecks.
func firstDeliveryCheck() int {
	for i, ch := range CMSChecks {
		if ch.Name == "delivery.request_identity" {
			return i
		}
	}
	return len(CMSChecks)
}

// tamper is one broken test delivery of a check.
type tamper struct {
	name string
	edit func(*variant)
}

// deliveryChecks runs the delivery and bundle checks.
func deliveryChecks(rep *Report, c *client, o CMSOptions, lc *lifecycle.Response) {
	names := CMSChecks[firstDeliveryCheck():]
	if !o.Deliver {
		for _, ch := range names {
			rep.skip(ch.Name, ch.Level, "delivery checks POST deliveries (a conforming CMS publishes one test bundle): run with --deliver on a test change")
		}
		return
	}
	b := bundler{site: o.SiteID, event: o.EventID, now: c.now()}
	switch {
	case lc != nil:
		b.plan, b.version, b.locales = lc.PlanID, lc.WebsiteVersion, lc.RequiredLocales
	case o.Pin.PlanID != "" && len(o.Locales) > 0:
		b.plan, b.version, b.locales = o.Pin.PlanID, o.Pin.WebsiteVersion, o.Locales
	default:
		for _, ch := range names {
			rep.skip(ch.Name, ch.Level, "needs a strict lifecycle answer, or the plan and locales (--plan-id … --locales)")
		}
		return
	}
	haveKeys := o.ApprovalSeed != nil
	if haveKeys {
		b.approvalKey = ed25519.NewKeyFromSeed(o.ApprovalSeed)
		b.publicationKey = ed25519.NewKeyFromSeed(o.PublicationSeed)
	}
	path := deliveriesPath(o.SiteID, o.EventID)
	noKeys := "needs the test authorities (--approval-seed-hex, --publication-seed-hex) whose public keys the CMS trusts"
	seq := 0
	// run posts each tamper as its own delivery (its own approvals and
	// delivery_id) and judges every answer: a refusal with code.
	run := func(check, level, code string, tampers []tamper) {
		var answers []variantAnswer
		for _, t := range tampers {
			seq++
			v := variant{seq: seq}
			if !haveKeys {
				v.untrusted = true
			}
			t.edit(&v)
			body, err := b.body(v)
			if err != nil {
				rep.fail(check, level, CodeRequestBuild, "the test bundle could not be built ("+t.name+")")
				return
			}
			var a answer
			if v.signAt != 0 {
				h := c.signAt(http.MethodPost, c.path(path), body, v.signAt)
				a = c.send(http.MethodPost, path, body, &h)
			} else {
				a, _ = c.signed(http.MethodPost, path, body)
			}
			answers = append(answers, variantAnswer{t.name, a})
		}
		rep.refusals(check, level, answers, 0, code)
	}
	perLocale := func(edits []tamper) []tamper {
		var out []tamper
		for i, l := range b.locales {
			for _, e := range edits {
				i, e := i, e
				name := e.name
				if len(b.locales) > 1 {
					name = fmt.Sprintf("%s, locale %d of %d (%s) only", e.name, i+1, len(b.locales), l)
				}
				out = append(out, tamper{name, func(v *variant) { v.only = i + 1; e.edit(v) }})
			}
		}
		return out
	}
	if haveKeys {
		run("delivery.request_identity", Must, peer.CodeDeliveryRequestInvalid, []tamper{
			{"request event_id not the path's", func(v *variant) { v.requestEvent = o.EventID + "-other" }},
			{"request site_id not the path's", func(v *variant) { v.requestSite = o.SiteID + "-other" }},
		})
		run("delivery.request_strict", Must, peer.CodeDeliveryRequestInvalid, []tamper{
			{"request schema unknown", func(v *variant) { v.requestSchema = "localeflow.delivery-request.v0" }},
			{"request with a duplicate member name", func(v *variant) { v.requestDuplicate = true }},
			{"request with an unknown member", func(v *variant) { v.requestUnknown = true }},
		})
	} else {
		rep.skip("delivery.request_identity", Must, noKeys)
		rep.skip("delivery.request_strict", Must, noKeys)
	}
	sig := []tamper{{"bundle signed by an untrusted key", func(v *variant) { v.untrusted = true }}}
	if haveKeys {
		sig = append(sig,
			tamper{"bundle token with non-zero unused base64url bits", func(v *variant) { v.bundleB64 = true }},
			tamper{"bundle signed by the approval key", func(v *variant) { v.bundleByApprovalKey = true }},
			tamper{"bundle signed in the approval token context", func(v *variant) { v.bundleContext = release.ApprovalContext }})
	}
	run("bundle.signature", Must, peer.CodeBundleSignature, sig)
	if !haveKeys {
		for _, ch := range names {
			switch ch.Name {
			case "delivery.request_identity", "delivery.request_strict", "bundle.signature":
			case "delivery.refuse_unsigned", "delivery.refuse_bad_signature", "delivery.refuse_tampered", "delivery.refuse_stale", "delivery.refuse_future":
			default:
				rep.skip(ch.Name, ch.Level, noKeys)
			}
		}
	} else {
		run("bundle.identity", Must, peer.CodeBundleInvalid, []tamper{
			{"bundle event_id not the path's", func(v *variant) { v.bundleEvent = o.EventID + "-other" }},
			{"bundle site_id not the path's", func(v *variant) { v.bundleSite = o.SiteID + "-other" }},
			{"bundle delivery_id not the request's", func(v *variant) { v.requestDeliveryID = "dlv-" + zeros(40) }},
		})
		run("bundle.strict", Must, peer.CodeBundleInvalid, []tamper{
			{"bundle schema unknown", func(v *variant) { v.bundleSchema = "localeflow.delivery-bundle.v0" }},
			{"bundle with a duplicate member name", func(v *variant) { v.bundleDuplicate = true }},
			{"bundle with an unknown member", func(v *variant) { v.bundleUnknown = true }},
		})
		run("bundle.delivery_id", Must, peer.CodeBundleDeliveryID, []tamper{
			{"delivery_id not the derivation", func(v *variant) { v.deliveryID = "dlv-" + zeros(40) }},
		})
		run("bundle.approval", Must, peer.CodeBundleApproval, perLocale([]tamper{
			{"approval signed by an untrusted key", func(v *variant) { v.approvalUntrusted = true }},
			{"approval signed by the publication key", func(v *variant) { v.approvalByPublication = true }},
			{"approval token with non-zero unused base64url bits", func(v *variant) { v.approvalB64 = true }},
			{"approval_id not derived", func(v *variant) { v.approvalNotDerived = true }},
			{"approval schema unknown", func(v *variant) { v.approvalSchema = "localeflow.approval.v0" }},
			{"approval with a duplicate member name", func(v *variant) { v.approvalDuplicate = true }},
			{"approval with an unknown member", func(v *variant) { v.approvalUnknown = true }},
			{"approval signed in the delivery token context", func(v *variant) { v.approvalContext = release.PublicationContext }},
		}))
		var binding []tamper
		for _, f := range []string{"approval_id", "event_id", "site_id", "plan_id", "job_id", "target_locale", "result_sha256"} {
			f := f
			binding = append(binding, tamper{"approval " + f + " not the bundle's", func(v *variant) { v.approvalField = f }})
		}
		run("bundle.approval_binding", Must, peer.CodeBundleApprovalMismatch, perLocale(binding))
		nowMS := core.Millis(b.now)
		run("bundle.approval_expiry", Must, peer.CodeBundleApprovalExpired, perLocale([]tamper{
			{"approval expired a minute ago", func(v *variant) { v.expiresAtMS = nowMS - time.Minute.Milliseconds() }},
			{"approval expired a minute ago, in a bundle prepared before it expired", func(v *variant) {
				v.expiresAtMS, v.preparedOffset = nowMS-time.Minute.Milliseconds(), -2*time.Minute.Milliseconds()
			}},
		}))
		at := c.now().Unix()
		run("bundle.approval_expiry_instant", Should, peer.CodeBundleApprovalExpired, perLocale([]tamper{
			{"approval expiring at the request's timestamp", func(v *variant) { v.expiresAtMS, v.signAt = at*1000, at }},
		}))
		run("bundle.text_sha256", Must, peer.CodeBundleText, perLocale([]tamper{
			{"text not hashing to target_sha256", func(v *variant) { v.textEdited = true }},
		}))
	}

	// The request checks, on the valid bundle (or, without the
	// authorities, on the untrusted one).
	seq++
	good := variant{seq: 1000 + seq, untrusted: !haveKeys}
	body, err := b.body(good)
	if err != nil {
		for _, ch := range names {
			if rep.Result(ch.Name).Result == "" {
				rep.fail(ch.Name, ch.Level, CodeRequestBuild, "the test bundle could not be built")
			}
		}
		return
	}
	full := c.path(path)
	rep.refusal("delivery.refuse_unsigned", Must, c.send(http.MethodPost, path, body, nil), http.StatusUnauthorized, peer.CodeRequestSignature)
	bad := c.sign(otherKey(), http.MethodPost, full, body, 0)
	rep.refusal("delivery.refuse_bad_signature", Must, c.send(http.MethodPost, path, body, &bad), http.StatusUnauthorized, peer.CodeRequestSignature)
	h := c.sign(nil, http.MethodPost, full, body, 0)
	rep.refusal("delivery.refuse_tampered", Must, c.send(http.MethodPost, path, append(append([]byte(nil), body...), ' '), &h), http.StatusUnauthorized, peer.CodeRequestSignature)
	stale := c.sign(nil, http.MethodPost, full, body, -staleBy)
	rep.refusal("delivery.refuse_stale", Should, c.send(http.MethodPost, path, body, &stale), http.StatusUnauthorized, peer.CodeRequestStale)
	ahead := c.sign(nil, http.MethodPost, full, body, staleBy)
	rep.refusal("delivery.refuse_future", Should, c.send(http.MethodPost, path, body, &ahead), http.StatusUnauthorized, peer.CodeRequestStale)
	if !haveKeys {
		for _, ch := range names {
			if rep.Result(ch.Name).Result == "" {
				rep.skip(ch.Name, ch.Level, noKeys)
			}
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
		rep.fail("delivery.accept", Must, CodeStatus, fmt.Sprintf("a valid delivery answered %d%s, want 2xx", accepted.status, codeNote(accepted)))
	}
	if accepted.err == nil && accepted.status/100 == 2 {
		again := c.resignedAfter(http.MethodPost, full, body, ah)
		rep.refusals("delivery.refuse_replay", Should, []variantAnswer{
			{"the same headers", c.send(http.MethodPost, path, body, &ah)},
			{"the same request id, signed again a second later", c.send(http.MethodPost, path, body, &again)},
		}, http.StatusConflict, peer.CodeRequestReplayed)
	} else {
		rep.skip("delivery.refuse_replay", Should, "no accepted delivery to replay")
	}
	again, _ := c.signed(http.MethodPost, path, body)
	switch {
	case again.err != nil:
		rep.fail("delivery.idempotent", Must, CodeUnreachable, again.err.Error())
	case again.status/100 == 2:
		rep.pass("delivery.idempotent", Must, fmt.Sprintf("the same delivery_id and bundle answered %d again (publishing once is the CMS's duty; not visible from outside)", again.status))
	default:
		rep.fail("delivery.idempotent", Must, CodeNotIdempotent, fmt.Sprintf("the same delivery_id and bundle, re-sent, answered %d%s, want 2xx (localeflow would count the delivery failed)", again.status, codeNote(again)))
	}
	other := good
	other.preparedOffset = 1
	conflict, err := b.body(other)
	if err != nil {
		rep.fail("delivery.conflict", Should, CodeRequestBuild, "the test bundle could not be built")
		return
	}
	ca, _ := c.signed(http.MethodPost, path, conflict)
	rep.refusal("delivery.conflict", Should, ca, http.StatusConflict, peer.CodeDeliveryConflict)
}

// bundler builds test delivery requests for one change.
type bundler struct {
	site, event, plan, version  string
	locales                     []string
	now                         time.Time
	approvalKey, publicationKey ed25519.PrivateKey
}

// variant is one test bundle: seq makes its approvals (and so its
// delivery_id) its own; the other fields break one thing each. The
// approval and text edits apply to the locale only names (1-based; 0:
// every locale).
type variant struct {
	seq  int
	only int
	// The request.
	requestEvent, requestSite, requestSchema, requestDeliveryID string
	requestDuplicate                                            bool
	signAt                                                      int64 // the request's timestamp (0: now)
	// The bundle.
	bundleEvent, bundleSite, bundleSchema, deliveryID  string
	bundleDuplicate, bundleB64, untrusted              bool
	bundleUnknown, bundleByApprovalKey, requestUnknown bool
	bundleContext, approvalContext                     string // the token contexts (default: the right ones)
	approvalUnknown                                    bool
	preparedOffset                                     int64
	// The locale's approval and text.
	approvalUntrusted, approvalByPublication, approvalB64 bool
	approvalNotDerived, approvalDuplicate                 bool
	approvalSchema, approvalField                         string
	expiresAtMS                                           int64
	textEdited                                            bool
}

func (v variant) at(i int) bool { return v.only == 0 || v.only == i+1 }

func zeros(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = '0'
	}
	return string(b)
}

// randomKey is an Ed25519 key no CMS trusts.
func randomKey() ed25519.PrivateKey {
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil
	}
	return priv
}

var b64 = base64.RawURLEncoding

// token signs payload as a token of context: v1.<b64url>.<b64url(sig)>,
// the signature over context + the encoded payload. nonCanonical sets an
// unused bit of the payload's last character (the payload gets an
// insignificant space when its length leaves no unused bits).
func token(key ed25519.PrivateKey, context string, payload []byte, nonCanonical bool) string {
	if nonCanonical && len(payload)%3 == 0 {
		payload = append([]byte("{ "), payload[1:]...)
	}
	enc := b64.EncodeToString(payload)
	if nonCanonical {
		const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
		last := strings.IndexByte(alphabet, enc[len(enc)-1])
		enc = enc[:len(enc)-1] + string(alphabet[last|1])
	}
	return "v1." + enc + "." + b64.EncodeToString(ed25519.Sign(key, []byte(context+enc)))
}

// withDuplicate puts a first member "event_id" before the object's own
// members: a strict reader refuses it, a last-wins reader sees the object.
func withDuplicate(obj []byte, value string) []byte {
	return append([]byte(`{"event_id":"`+value+`",`), obj[1:]...)
}

// withUnknown puts a member the schema does not list first.
func withUnknown(obj []byte) []byte {
	return append([]byte(`{"lf_conformance_unknown":true,`), obj[1:]...)
}

func (b bundler) body(v variant) ([]byte, error) {
	apv, pub := b.approvalKey, b.publicationKey
	if v.untrusted {
		apv, pub = randomKey(), randomKey()
	}
	if apv == nil || pub == nil {
		return nil, fmt.Errorf("no authority")
	}
	event, site := b.event, b.site
	if v.bundleEvent != "" {
		event = v.bundleEvent
	}
	if v.bundleSite != "" {
		site = v.bundleSite
	}
	nowMS := core.Millis(b.now)
	bundle := contract.Bundle{Schema: contract.DeliveryBundleSchema, EventID: event, SiteID: site, PlanID: b.plan,
		WebsiteVersion: b.version, PreparedAtMS: nowMS + v.preparedOffset}
	if v.bundleSchema != "" {
		bundle.Schema = v.bundleSchema
	}
	var ids []string
	for i, locale := range b.locales {
		source := "en-US"
		if locale == source {
			source = "en-GB"
		}
		text := "localeflow conformance check, " + locale
		job := "lf-conformance-job-" + locale
		result := core.SHA256Hex([]byte("lf-conformance-result|" + locale))
		a := contract.ApprovalPayload{Schema: contract.ApprovalSchema, EventID: event, SiteID: site, PlanID: b.plan,
			JobID: job, TargetLocale: locale, ResultSHA256: result,
			EvidenceRequestID:    contract.EvidenceRequestIDPrefix + core.SHA256Hex([]byte("lf-conformance-evidence|"+locale)),
			QualityReceiptSHA256: core.SHA256Hex([]byte("lf-conformance-receipt|" + locale)),
			ApprovedAtMS:         nowMS - int64(v.seq), ExpiresAtMS: nowMS + time.Hour.Milliseconds()}
		edit := v.at(i)
		key, b64Edit, locID := apv, false, ""
		if edit {
			if v.expiresAtMS != 0 {
				a.ExpiresAtMS = v.expiresAtMS
			}
			if v.approvalSchema != "" {
				a.Schema = v.approvalSchema
			}
			switch v.approvalField {
			case "event_id":
				a.EventID += "-other"
			case "site_id":
				a.SiteID += "-other"
			case "plan_id":
				a.PlanID += "-other"
			case "job_id":
				a.JobID = "lf-conformance-other-job"
			case "target_locale":
				a.TargetLocale = "x-lf-other"
			case "result_sha256":
				a.ResultSHA256 = core.SHA256Hex([]byte("lf-conformance-other-result|" + locale))
			case "approval_id":
				locID = "apv-" + core.SHA256Hex([]byte("lf-conformance-other-approval|" + locale))[:40]
			}
			switch {
			case v.approvalUntrusted:
				key = randomKey()
			case v.approvalByPublication:
				key = pub
			}
			b64Edit = v.approvalB64
		}
		id, err := peer.ApprovalID(a)
		if err != nil {
			return nil, err
		}
		a.ApprovalID = id
		if edit && v.approvalNotDerived {
			a.ApprovalID = "apv-" + core.SHA256Hex([]byte("lf-conformance-underived|" + locale))[:40]
		}
		raw, err := core.Canonical(a)
		if err != nil {
			return nil, err
		}
		if edit && v.approvalDuplicate {
			raw = withDuplicate(raw, a.EventID+"-duplicate")
		}
		if edit && v.approvalUnknown {
			raw = withUnknown(raw)
		}
		context := release.ApprovalContext
		if edit && v.approvalContext != "" {
			context = v.approvalContext
		}
		if locID == "" {
			locID = a.ApprovalID
		}
		l := contract.BundleLocale{JobID: job, SourceLocale: source, TargetLocale: locale, ContentType: "page",
			SourceSHA256: core.SHA256Hex([]byte("localeflow conformance check")), TargetSHA256: core.SHA256Hex([]byte(text)),
			ResultSHA256: result, Text: text, ApprovalID: locID, Approval: token(key, context, raw, b64Edit)}
		if edit && v.textEdited {
			l.Text += " (edited)"
		}
		bundle.Locales = append(bundle.Locales, l)
		ids = append(ids, locID)
	}
	h, err := core.HashCanonical(map[string]any{"event_id": event, "plan_id": b.plan, "approvals": ids})
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
	if v.bundleDuplicate {
		raw = withDuplicate(raw, event+"-duplicate")
	}
	if v.bundleUnknown {
		raw = withUnknown(raw)
	}
	bundleKey, bundleContext := pub, release.PublicationContext
	if v.bundleByApprovalKey {
		bundleKey = apv
	}
	if v.bundleContext != "" {
		bundleContext = v.bundleContext
	}
	req := contract.DeliveryRequest{Schema: contract.DeliveryRequestSchema, DeliveryID: bundle.DeliveryID,
		EventID: b.event, SiteID: b.site, Bundle: token(bundleKey, bundleContext, raw, v.bundleB64)}
	if v.requestEvent != "" {
		req.EventID = v.requestEvent
	}
	if v.requestSite != "" {
		req.SiteID = v.requestSite
	}
	if v.requestSchema != "" {
		req.Schema = v.requestSchema
	}
	if v.requestDeliveryID != "" {
		req.DeliveryID = v.requestDeliveryID
	}
	body, err := core.Canonical(req)
	if err != nil {
		return nil, err
	}
	if v.requestDuplicate {
		body = withDuplicate(body, req.EventID+"-duplicate")
	}
	if v.requestUnknown {
		body = withUnknown(body)
	}
	return body, nil
}
