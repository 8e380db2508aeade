package reference

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/localeflow/localeflow/adapters/cms/cmstest"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/lifecycle"
	"github.com/localeflow/localeflow/peer"
	"github.com/localeflow/localeflow/signing"
)

// CMSConfig configures a reference CMS.
type CMSConfig struct {
	// Key is the HMAC key shared with localeflow (lifecycle and delivery).
	Key []byte
	// Publication and Approval are localeflow's public keys: the CMS
	// verifies delivery bundles and the approvals inside them.
	Publication ed25519.PublicKey
	Approval    ed25519.PublicKey
	Faults      Faults
	// Hinter, when set, is told each time a change's lifecycle status
	// changes (its first accepted delivery), as a CMS would put
	// localeflow.change.hint on the bus (*eventbus.Publisher fits).
	Hinter Hinter
	// RequestWindow is the accepted distance of a request's timestamp
	// from the clock (0: peer.RequestWindow, 5 minutes; negative: no
	// window). Request ids are refused as replays within it.
	RequestWindow time.Duration
	// Breaks violate the contract on purpose (conformance tests).
	Breaks Breaks
}

// Hinter sends a change hint.
type Hinter interface {
	Hint(ctx context.Context, eventID, siteID string) error
}

// hintTimeout bounds one hint; a hint that fails is counted, not retried
// (the regular poll still sees the status).
const hintTimeout = 5 * time.Second

// ChangeSpec is a change the CMS knows and how its lifecycle plays.
type ChangeSpec struct {
	EventID        string   `json:"event_id"`
	SiteID         string   `json:"site_id"`
	PlanID         string   `json:"plan_id"`
	WebsiteVersion string   `json:"website_version"`
	SourceSequence int64    `json:"source_sequence"`
	Locales        []string `json:"locales"`
	// FailFirst answers the first FailFirst lifecycle requests with 503.
	FailFirst int `json:"fail_first,omitempty"`
	// Before is the status until a delivery arrives (default processing);
	// AfterDelivery the status once it has (default published).
	Before        string `json:"before,omitempty"`
	AfterDelivery string `json:"after_delivery,omitempty"`
	// Blocked locales ([locale, reason_code]) of the AfterDelivery answer.
	Blocked [][2]string `json:"blocked,omitempty"`
}

func (s *ChangeSpec) normalize() error {
	if s.Before == "" {
		s.Before = "processing"
	}
	if s.AfterDelivery == "" {
		s.AfterDelivery = "published"
	}
	switch {
	case !core.ValidToken(s.EventID) || !core.ValidToken(s.SiteID) || !core.ValidToken(s.PlanID) || !core.ValidToken(s.WebsiteVersion):
		return errors.New("reference: event_id, site_id, plan_id and website_version must be tokens")
	case s.SourceSequence <= 0:
		return errors.New("reference: source_sequence must be positive")
	case len(s.Locales) == 0 || len(s.Locales) > 100:
		return errors.New("reference: locales must hold 1..100 locales")
	case s.FailFirst < 0 || s.FailFirst > 100:
		return errors.New("reference: fail_first must be in 0..100")
	}
	for _, st := range []string{s.Before, s.AfterDelivery} {
		if !lifecycle.IsPollStatus(st) {
			return fmt.Errorf("reference: %q is not a lifecycle status a poll can answer", st)
		}
	}
	for _, b := range s.Blocked {
		if !contains(s.Locales, b[0]) || !core.ValidErrorCode(b[1]) {
			return errors.New("reference: blocked entries must be [required locale, reason code]")
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// CMS is the reference CMS (an http.Handler).
type CMS struct {
	lifecycle *cmstest.CMS
	handler   http.Handler
	faults    *faulty
	guard     *guard
	key       []byte
	keys      peer.Keys
	breaks    Breaks

	hinter Hinter

	mu        sync.Mutex
	specs     map[string]ChangeSpec
	delivered map[string]int
	hints     int
	hintFails int
	// Deliveries by delivery_id (the bundle token), calls, refusals and
	// idempotent repeats.
	bundles       map[string]string
	cache         map[string]cachedAnswer // DefectAnswerCached
	deliveryCalls int
	rejected      int
	duplicates    int
}

// NewCMS returns a reference CMS; Close releases its delivery backend.
func NewCMS(c CMSConfig) (*CMS, error) {
	if len(c.Key) < 16 {
		return nil, errors.New("reference: the CMS key needs at least 16 bytes")
	}
	if len(c.Publication) != ed25519.PublicKeySize || len(c.Approval) != ed25519.PublicKeySize {
		return nil, errors.New("reference: the CMS needs the publication and approval public keys")
	}
	if err := c.Faults.Validate(); err != nil {
		return nil, err
	}
	if err := c.Breaks.Validate(); err != nil {
		return nil, err
	}
	if c.Faults.Code == "" {
		c.Faults.Code = "cms.unavailable"
	}
	window := c.RequestWindow
	if window == 0 {
		window = peer.RequestWindow
	}
	cms := &CMS{
		lifecycle: cmstest.New(c.Key),
		guard:     newGuard(c.Key, window, c.Breaks),
		key:       append([]byte(nil), c.Key...),
		keys:      peer.Keys{Publication: []ed25519.PublicKey{c.Publication}, Approval: []ed25519.PublicKey{c.Approval}},
		breaks:    c.Breaks,
		specs:     map[string]ChangeSpec{},
		delivered: map[string]int{},
		bundles:   map[string]string{},
		cache:     map[string]cachedAnswer{},
		hinter:    c.Hinter,
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /_admin/v1/changes", cms.admin)
	mux.HandleFunc("POST /v1/sites/{site}/changes/{event}/deliveries", cms.deliver)
	mux.HandleFunc("/", cms.serveLifecycle)
	cms.faults = newFaulty(c.Faults, mux)
	cms.handler = cms.faults
	return cms, nil
}

// ServeHTTP implements http.Handler.
func (c *CMS) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.handler.ServeHTTP(w, r) }

// Close releases the CMS (nothing to release since deliveries are
// verified in process; kept for callers).
func (c *CMS) Close() {}

// Put registers (or replaces) a change and its lifecycle script.
func (c *CMS) Put(spec ChangeSpec) error {
	if err := spec.normalize(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.specs[spec.EventID] = spec
	c.lifecycle.Put(cmstest.Change{EventID: spec.EventID, SiteID: spec.SiteID, PlanID: spec.PlanID,
		WebsiteVersion: spec.WebsiteVersion, SourceSequence: spec.SourceSequence, RequiredLocales: spec.Locales})
	c.scriptLocked(spec.EventID)
	return nil
}

// scriptLocked (re)writes the lifecycle script: the 503s not served yet,
// then Before or, once delivered, AfterDelivery.
func (c *CMS) scriptLocked(eventID string) {
	spec := c.specs[eventID]
	served := 0
	for _, r := range c.lifecycle.RequestsFor(eventID) {
		if r.Status == http.StatusServiceUnavailable {
			served++
		}
	}
	steps := cmstest.Repeat(cmstest.HTTPStep(http.StatusServiceUnavailable), max(0, spec.FailFirst-served))
	final := cmstest.StatusStep(spec.Before)
	if n := c.delivered[eventID]; n > 0 {
		final = cmstest.StatusStep(spec.AfterDelivery)
		final.Blocked = spec.Blocked
		if spec.AfterDelivery == "published" {
			final.Approved = spec.Locales
		}
		final.Delivery = json.RawMessage(fmt.Sprintf(`{"deliveries":%d}`, n))
	}
	c.lifecycle.Script(eventID, append(steps, final)...)
}

// MaxDeliveryBytes is the largest delivery request body the reference CMS
// reads: the largest a plan can produce (docs/design.md "Peer rules":
// 100 locales of texts of 1 MiB as JSON, as base64url). Above it the
// answer is 413 CodeDeliveryTooLarge.
const MaxDeliveryBytes = 134 << 20

// CodeDeliveryTooLarge refuses a delivery above the CMS's limit.
const CodeDeliveryTooLarge = "delivery.too_large"

// deliverStatus is the answer to each failed delivery check
// (docs/integrating.md "Verifying a delivery").
var deliverStatus = map[string]int{
	peer.CodeDeliveryRequestInvalid: http.StatusBadRequest, peer.CodeBundleSignature: http.StatusForbidden,
	peer.CodeBundleInvalid: http.StatusBadRequest, peer.CodeBundleDeliveryID: http.StatusBadRequest,
	peer.CodeBundleApproval: http.StatusForbidden, peer.CodeBundleApprovalMismatch: http.StatusForbidden,
	peer.CodeBundleApprovalExpired: http.StatusForbidden, peer.CodeBundleText: http.StatusBadRequest,
}

// deliver verifies a delivery as docs/integrating.md "Verifying a
// delivery" says (peer: request, then bundle), records it
// idempotently by delivery_id and, when it is new, moves the change's
// lifecycle on.
func (c *CMS) deliver(w http.ResponseWriter, r *http.Request) {
	site, event := r.PathValue("site"), r.PathValue("event")
	c.mu.Lock()
	c.deliveryCalls++
	c.mu.Unlock()
	reject := func(status int, code string) {
		c.mu.Lock()
		c.rejected++
		c.mu.Unlock()
		refuse(w, status, code)
	}
	body, err := readBody(r, MaxDeliveryBytes)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		reject(http.StatusRequestEntityTooLarge, CodeDeliveryTooLarge)
		return
	}
	if err != nil {
		reject(http.StatusBadRequest, "cms.body_unreadable")
		return
	}
	if status, code, _ := c.guard.check(r, body); status != 0 {
		reject(status, code)
		return
	}
	if c.breaks.Has(DefectDelivery409Always) {
		reject(http.StatusConflict, "cms.already_delivered")
		return
	}
	c.mu.Lock()
	deliveredBefore := c.delivered[event] > 0
	c.mu.Unlock()
	if deliveredBefore && c.breaks.Has(DefectDelivery409PerChange) {
		reject(http.StatusConflict, "cms.already_delivered")
		return
	}
	if c.breaks.anyOf(verifyDefects) {
		err = verifyWithDefects(c.breaks, c.keys, site, event, body, time.Now(), requestTime(r.Header.Get(signing.HeaderTimestamp)))
	} else {
		_, err = peer.VerifyDelivery(c.keys, site, event, body, time.Now())
	}
	if err != nil && !c.breaks.skips(err) {
		code := core.CodeOf(err)
		if c.breaks.Has(DefectRefusalWithoutCode) {
			c.mu.Lock()
			c.rejected++
			c.mu.Unlock()
			w.WriteHeader(deliverStatus[code])
			return
		}
		reject(deliverStatus[code], code)
		return
	}
	var req contract.DeliveryRequest
	if json.Unmarshal(body, &req) != nil || !core.ValidToken(req.DeliveryID) {
		reject(http.StatusBadRequest, peer.CodeDeliveryRequestInvalid)
		return
	}
	c.mu.Lock()
	prev, known := c.bundles[req.DeliveryID]
	switch {
	case known && prev == req.Bundle && c.breaks.Has(BreakNotIdempotent):
		c.mu.Unlock()
		reject(http.StatusConflict, "cms.delivery_conflict")
		return
	case known && prev == req.Bundle:
		c.duplicates++
		c.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"delivery_id": req.DeliveryID, "duplicate": true})
		return
	case known && c.breaks.Has(DefectConflictWrongCode):
		c.mu.Unlock()
		reject(http.StatusConflict, "cms.already_delivered")
		return
	case known && !c.breaks.Has(BreakAcceptConflict):
		c.mu.Unlock()
		reject(http.StatusConflict, peer.CodeDeliveryConflict)
		return
	}
	c.bundles[req.DeliveryID] = req.Bundle
	spec, ok := c.specs[event]
	changed := false
	if ok {
		c.delivered[event]++
		c.scriptLocked(event)
		changed = c.delivered[event] == 1 && spec.AfterDelivery != spec.Before
	}
	c.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]any{"delivery_id": req.DeliveryID})
	if changed && c.hinter != nil {
		c.hint(r.Context(), spec)
	}
}

// serveLifecycle makes the request checks, then lets the lifecycle test
// server answer, applying the answer breaks.
func (c *CMS) serveLifecycle(w http.ResponseWriter, r *http.Request) {
	status, code, skipped := c.guard.check(r, nil)
	if status != 0 {
		refuse(w, status, code)
		return
	}
	if skipped {
		resign(c.key, r, nil)
	}
	if c.breaks.Has(DefectUnknownChangeBusy) && !c.knows(r.URL.Path) {
		w.Header().Set("Retry-After", "5")
		refuse(w, http.StatusServiceUnavailable, "cms.unavailable")
		return
	}
	if c.breaks.Has(DefectAnswerCached) {
		c.mu.Lock()
		cached, ok := c.cache[r.URL.Path]
		c.mu.Unlock()
		if ok {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set(signing.HeaderSignature, cached.signature)
			_, _ = w.Write(cached.body)
			return
		}
	}
	rec := record(c.lifecycle, r)
	body := rec.Body.Bytes()
	retryAfterBreak(c.breaks, rec)
	if rec.Code == http.StatusOK && c.breaks.Has(DefectAnswerTwoSignatures) {
		rec.Header().Add(signing.HeaderSignature, signing.SignResponse([]byte("the-previous-cms-key-0123456789"), r.Header.Get(signing.HeaderRequestID), body))
	}
	if rec.Code == http.StatusOK && c.breaks.Has(DefectAnswerCached) {
		c.mu.Lock()
		c.cache[r.URL.Path] = cachedAnswer{body: append([]byte(nil), body...), signature: rec.Header().Get(signing.HeaderSignature)}
		c.mu.Unlock()
	}
	if rec.Code == http.StatusOK {
		rid := r.Header.Get(signing.HeaderRequestID)
		if c.breaks.Has(BreakAnswerNotStrict) {
			body = withExtraMember(body)
			rec.Header().Set(signing.HeaderSignature, signing.SignResponse(c.key, rid, body))
		}
		switch {
		case c.breaks.Has(BreakAnswerUnsigned):
			rec.Header().Del(signing.HeaderSignature)
		case c.breaks.Has(BreakAnswerWrongSignature):
			rec.Header().Set(signing.HeaderSignature, signing.SignResponse([]byte("not-the-cms-key-0123456789"), rid, body))
		}
	}
	rec.flush(w, body)
}

type cachedAnswer struct {
	body      []byte
	signature string
}

// knows reports whether a lifecycle path names a registered change.
func (c *CMS) knows(path string) bool {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) != 6 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	spec, ok := c.specs[parts[4]]
	return ok && spec.SiteID == parts[2]
}

// withExtraMember adds "extra": true to a JSON object.
func withExtraMember(body []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil || m == nil {
		return body
	}
	m["extra"] = json.RawMessage("true")
	out, err := json.Marshal(m)
	if err != nil {
		return body
	}
	return out
}

// hint tells the hinter that spec's status changed.
func (c *CMS) hint(ctx context.Context, spec ChangeSpec) {
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hintTimeout)
	defer cancel()
	err := c.hinter.Hint(hctx, spec.EventID, spec.SiteID)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hints++
	if err != nil {
		c.hintFails++
	}
}

// admin registers a change from a ChangeSpec JSON body.
func (c *CMS) admin(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"code": "cms.body_unreadable", "retryable": false})
		return
	}
	var spec ChangeSpec
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"code": "cms.change_invalid", "retryable": false})
		return
	}
	if err := c.Put(spec); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"code": "cms.change_invalid", "retryable": false, "message": strings.TrimPrefix(err.Error(), "reference: ")})
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"event_id": spec.EventID})
}

// CMSStats is what the CMS saw.
type CMSStats struct {
	// LifecycleRequests and LifecycleFailures (503 answered) by event id.
	LifecycleRequests map[string]int
	LifecycleFailures map[string]int
	// Deliveries accepted by event id; DeliveryCalls, Rejected and
	// Duplicates over all changes.
	Deliveries    map[string]int
	DeliveryCalls int
	Rejected      int
	Duplicates    int
	// Injected counts the failures injected by Faults.
	Injected int
	// Hints sent on status changes, and how many of them failed.
	Hints        int
	HintFailures int
}

// Stats returns what the CMS saw so far.
func (c *CMS) Stats() CMSStats {
	st := CMSStats{LifecycleRequests: map[string]int{}, LifecycleFailures: map[string]int{}, Deliveries: map[string]int{}}
	for _, r := range c.lifecycle.Requests() {
		st.LifecycleRequests[r.EventID]++
		if r.Status == http.StatusServiceUnavailable {
			st.LifecycleFailures[r.EventID]++
		}
	}
	c.mu.Lock()
	for k, v := range c.delivered {
		st.Deliveries[k] = v
	}
	st.Hints, st.HintFailures = c.hints, c.hintFails
	st.DeliveryCalls, st.Rejected, st.Duplicates = c.deliveryCalls, c.rejected, c.duplicates
	c.mu.Unlock()
	st.Injected = c.faults.Injected()
	return st
}
