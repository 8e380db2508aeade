package release

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
)

// Delivery codes.
const (
	CodeDeliveryFailed         = "cms.delivery.failed"
	CodeDeliveryInvalid        = "cms.delivery.invalid"
	CodeDeliveryMissing        = "cms.delivery.missing"
	CodeDeliveryNotReady       = "cms.delivery.not_ready"
	CodeDeliveryMaxAttempts    = "cms.delivery.max_attempts.invalid"
	CodeDeliveryLeaseLost      = "cms.delivery.lease_lost"
	CodeDeliveryLeaseExpired   = "cms.delivery.lease_expired"
	CodeDeliveryClaimLost      = "cms.delivery.claim_lost"
	CodeDeliveryFinishLost     = "cms.delivery.finish_lost"
	codeDeliveryBundleMismatch = "cms.delivery.bundle_mismatch"
	CodeDeliveryWriteFailed    = "cms.delivery.write_failed"
	CodeDeliveryJSONInvalid    = "cms.json.invalid"
)

// DeliveryClient sends a delivery to the CMS. It must be idempotent on the
// delivery id; failures are *core.Error values ("cms.http_503", ...).
type DeliveryClient interface {
	Deliver(ctx context.Context, siteID, eventID string, body []byte) error
}

// deliveryID derives the id from what is delivered, so preparing twice
// yields the same id.
func deliveryID(plan *PlanRecord, approvals []*ApprovalRecord) (string, error) {
	ids := make([]string, 0, len(approvals))
	for _, a := range approvals {
		ids = append(ids, a.ApprovalID)
	}
	h, err := core.HashCanonical(map[string]any{"event_id": plan.Event.EventID, "plan_id": plan.PlanID, "approvals": ids})
	if err != nil {
		return "", core.Wrap(CodeDeliveryJSONInvalid, false, err)
	}
	return "dlv-" + h[:40], nil
}

// buildBundle assembles the bundle from the approvals and result records.
func buildBundle(snap *Snapshot, plan *PlanRecord, approvals []*ApprovalRecord, id string, preparedMS int64) ([]byte, error) {
	b := contract.Bundle{
		Schema: contract.DeliveryBundleSchema, DeliveryID: id, EventID: plan.Event.EventID,
		SiteID: plan.Event.SiteID, PlanID: plan.PlanID, WebsiteVersion: plan.Event.WebsiteVersion,
		PreparedAtMS: preparedMS,
	}
	for _, a := range approvals {
		job, ok := plan.Job(a.JobID)
		res := snap.Results[a.JobID]
		if !ok || res == nil || res.ResultSHA256 != a.ResultSHA256 {
			return nil, core.Fail(codeDeliveryBundleMismatch)
		}
		var r Result
		if err := json.Unmarshal([]byte(res.ResultJSON), &r); err != nil {
			return nil, core.Wrap(codeDeliveryBundleMismatch, false, err)
		}
		b.Locales = append(b.Locales, contract.BundleLocale{
			JobID: job.JobID, SourceLocale: job.SourceLocale, TargetLocale: job.TargetLocale,
			ContentType: job.ContentType, SourceSHA256: r.SourceSHA256, TargetSHA256: r.TargetSHA256,
			ResultSHA256: res.ResultSHA256, Text: r.Candidate, ApprovalID: a.ApprovalID, Approval: a.Token,
		})
	}
	raw, err := core.Canonical(b)
	if err != nil {
		return nil, core.Wrap(CodeDeliveryJSONInvalid, false, err)
	}
	return raw, nil
}

// prepareDelivery prepares the event's one delivery (docs/design.md
// "Delivery"): once every locale holds a current approval, sign the bundle
// and record the pending delivery. Preparing again returns the existing
// delivery.
func (c *Coordinator) prepareDelivery(ctx context.Context, snap *Snapshot, plan *PlanRecord, now time.Time) (*DeliveryRecord, bool, error) {
	if snap.Delivery != nil {
		return snap.Delivery, false, nil
	}
	max := c.cfg.DeliveryMaxAttempts
	if max < 1 || max > MaxAttempts {
		return nil, false, core.Fail(CodeDeliveryMaxAttempts)
	}
	ready, err := c.readiness(snap, plan, now)
	if err != nil {
		return nil, false, err
	}
	if !ready.Ready {
		return nil, false, core.Fail(CodeDeliveryNotReady)
	}
	id, err := deliveryID(plan, ready.Approvals)
	if err != nil {
		return nil, false, err
	}
	nowMS := core.Millis(now)
	raw, err := buildBundle(snap, plan, ready.Approvals, id, nowMS)
	if err != nil {
		return nil, false, err
	}
	token, err := c.publication.Sign(raw)
	if err != nil {
		return nil, false, core.Wrap("cms.delivery.signing_failed", true, err)
	}
	rec := DeliveryRecord{
		EventID: plan.Event.EventID, PlanID: plan.PlanID, SiteID: plan.Event.SiteID, DeliveryID: id,
		BundleSHA256: core.SHA256Hex(raw), Signature: token[strings.LastIndexByte(token, '.')+1:], KeyID: c.publication.KeyID(),
		PreparedMS: nowMS,
		Lease:      Lease{Status: StatePending, MaxAttempts: max, NextAttemptMS: nowMS, CreatedMS: nowMS, UpdatedMS: nowMS},
		Version:    1,
	}
	if err := c.store.Put(ctx, &rec, 0); err != nil {
		if !errors.Is(err, ErrConflict) {
			return nil, false, core.Wrap(CodeDeliveryWriteFailed, true, err)
		}
		fresh, lerr := c.store.Load(ctx, plan.Event.EventID)
		if lerr != nil || fresh.Delivery == nil {
			return nil, false, core.Wrap(CodeDeliveryClaimLost, true, err)
		}
		snap.Delivery = fresh.Delivery
		return fresh.Delivery, false, nil
	}
	snap.Delivery = &rec
	// The approval that woke the release until now stops waking: the
	// delivery record wakes it from here on.
	c.settleAwaitingDelivery(ctx, snap)
	return &rec, true, nil
}

// settleAwaitingDelivery clears the AwaitingDelivery marks of approvals
// once a delivery exists. Best effort: a mark left behind only costs the
// sweep one extra step, which clears it (a run of an ended release too:
// load parks it).
func (c *Coordinator) settleAwaitingDelivery(ctx context.Context, snap *Snapshot) {
	if snap.Delivery == nil {
		return
	}
	// In job id order: a replay of the same state writes the same
	// sequence (a map's order is random).
	for _, jobID := range slices.Sorted(maps.Keys(snap.Approvals)) {
		a := snap.Approvals[jobID]
		if !a.AwaitingDelivery {
			continue
		}
		next := *a
		next.AwaitingDelivery, next.Version = false, a.Version+1
		if err := c.store.Put(ctx, &next, a.Version); err != nil {
			c.log().WarnContext(ctx, "approval still marked awaiting delivery", "event_id", a.EventID, "job_id", jobID, "code", core.CodeOf(err))
			continue
		}
		snap.Approvals[jobID] = &next
	}
}

// ValidateDeliveryRecord checks the stored fields of a delivery record:
// Fail(CodeDeliveryInvalid) unless d is a record the coordinator could have
// written (prepareDelivery). The bundle itself is checked against the hash
// and signature when it is sent (deliveryBody).
func ValidateDeliveryRecord(d *DeliveryRecord) error {
	if d == nil {
		return core.Fail(CodeDeliveryInvalid)
	}
	sig, err := b64.DecodeString(d.Signature)
	if err != nil || len(sig) == 0 || !core.ValidToken(d.EventID) || !core.ValidToken(d.PlanID) ||
		!core.ValidToken(d.SiteID) || !core.ValidToken(d.DeliveryID) || !core.ValidSHA256(d.BundleSHA256) ||
		!core.ValidMillis(d.PreparedMS) || d.Version <= 0 || !d.Lease.valid() || (d.KeyID != "" && !ValidKeyID(d.KeyID)) ||
		(d.Announced != "" && d.Announced != OutcomeDeliveryReady && d.Announced != OutcomeDelivered) {
		return core.Fail(CodeDeliveryInvalid)
	}
	return nil
}

// AnnouncedStatus is the outcome status whose event a delivery in state
// status announces: delivery_ready for a prepared (pending, leased,
// retry_wait) delivery, delivered for a succeeded one, "" for a failed one.
func AnnouncedStatus(status State) string {
	switch {
	case status.Open():
		return OutcomeDeliveryReady
	case status == StateSucceeded:
		return OutcomeDelivered
	}
	return ""
}

// SettleAnnounced records, after a successful publish, that the event of
// the delivery's status was published (Announced = status), with a write
// conditional on the version read: a redelivered message then does not
// publish it again. Nothing is written when the delivery is gone, is
// another one, has moved on to another status or is already settled; a
// lost race is release.outbox.lost (retryable: the event stays owed and is
// published again at most once more).
func (c *Coordinator) SettleAnnounced(ctx context.Context, eventID, deliveryID, status string) error {
	if !core.ValidToken(eventID) {
		return core.Fail(CodeEventIDInvalid)
	}
	snap, err := c.store.LoadKeys(ctx, eventID, SKDelivery)
	if err != nil {
		return storeRead(err)
	}
	d := snap.Delivery
	if d == nil || d.DeliveryID != deliveryID || d.Announced == status || AnnouncedStatus(d.Status) != status {
		return nil
	}
	next := *d
	next.Announced, next.Version = status, d.Version+1
	if err := c.store.Put(ctx, &next, d.Version); err != nil {
		if errors.Is(err, ErrConflict) {
			return core.Wrap(CodeOutboxLost, true, err)
		}
		return core.Wrap(CodeStoreWriteFailed, true, err)
	}
	return nil
}

// deliveryBody rebuilds and checks the stored delivery (docs/design.md
// "Delivery"; the bundle is never stored): the bundle rebuilt from the
// records must hash to the stored hash and carry the publication
// authority's signature. A delivery that has not succeeded must still hold
// current approvals at now.
func (c *Coordinator) deliveryBody(snap *Snapshot, plan *PlanRecord, d *DeliveryRecord, now time.Time) ([]byte, error) {
	approvals, err := c.preparedApprovals(snap, plan, d, now)
	if err != nil {
		return nil, err
	}
	raw, err := buildBundle(snap, plan, approvals, d.DeliveryID, d.PreparedMS)
	if err != nil {
		return nil, err
	}
	if core.SHA256Hex(raw) != d.BundleSHA256 {
		return nil, core.Fail(codeDeliveryBundleMismatch)
	}
	token := "v1." + b64.EncodeToString(raw) + "." + d.Signature
	if _, err := c.publication.OpenKey(d.KeyID, token); err != nil {
		return nil, core.Wrap(CodeDeliveryInvalid, false, err)
	}
	body, err := core.Canonical(contract.DeliveryRequest{
		Schema: contract.DeliveryRequestSchema, DeliveryID: d.DeliveryID, EventID: d.EventID, SiteID: d.SiteID, Bundle: token,
	})
	if err != nil {
		return nil, core.Wrap(CodeDeliveryJSONInvalid, false, err)
	}
	return body, nil
}

// preparedApprovals checks the stored delivery's record and the current
// approvals it is built from (the part of deliveryBody that needs no
// text).
func (c *Coordinator) preparedApprovals(snap *Snapshot, plan *PlanRecord, d *DeliveryRecord, now time.Time) ([]*ApprovalRecord, error) {
	if !d.Lease.valid() || !core.ValidToken(d.DeliveryID) || d.EventID != plan.Event.EventID || d.PlanID != plan.PlanID {
		return nil, core.Fail(CodeDeliveryInvalid)
	}
	approvals := make([]*ApprovalRecord, 0, len(plan.Jobs))
	for _, job := range plan.Jobs {
		check := now
		if d.Status == StateSucceeded {
			// A completed delivery is immutable history.
			check = core.FromMillis(0)
		}
		rec, err := c.lookupApproval(snap, plan, job, check)
		if err != nil {
			return nil, core.Wrap(externalCode(core.CodeOf(err), "cms"), false, err)
		}
		approvals = append(approvals, rec)
	}
	return approvals, nil
}
