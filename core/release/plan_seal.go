package release

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"

	"github.com/localeflow/localeflow/core"
)

// CodePlanSealInvalid: the stored plan record is not the plan whose signed
// event was verified at ingest (a job dropped or changed, another plan id);
// the release is refused.
const CodePlanSealInvalid = "coordinator.plan.seal_invalid"

// CodePlanSealUnverified (retryable): the stored plan's seal verifies
// under none of the keys in use and the event key set could not be read
// again just now (its re-read was refused by the rate limit, or failed).
// Another execution environment may have resealed the plan under a key
// this one has not read yet (event key rotation step 2): the step is
// retried, and once a re-read succeeds, a seal under none of its keys is
// CodePlanSealInvalid (docs/design.md "Plan seal").
const CodePlanSealUnverified = "coordinator.plan.seal_unverified"

// planSealContext separates plan seals from every other MAC under the event
// key (the signed input events are MACs over JSON payloads that never start
// with this line).
const planSealContext = "localeflow.plan-seal.v1\n"

// sealed is what a plan seal covers: every field of the plan record a run
// reads. PayloadSHA256 ties it to the exact signed payload bytes.
type sealed struct {
	Event         Event     `json:"event"`
	PlanID        string    `json:"plan_id"`
	Jobs          []PlanJob `json:"jobs"`
	PayloadSHA256 string    `json:"payload_sha256"`
	ReceivedMS    int64     `json:"received_ms"`
}

// planSeal is HMAC-SHA256 under the event key over the canonical JSON of
// the plan record's fields. The signed payload itself can be larger than a
// DynamoDB item (up to 1 MiB) and holds texts, so the coordinator keeps
// this MAC instead: it is made only after the event's signature verified,
// and nobody without the event key can make one for a changed record.
func planSeal(key []byte, r *PlanRecord) (string, error) {
	raw, err := core.Canonical(sealed{Event: r.Event, PlanID: r.PlanID, Jobs: r.Jobs, PayloadSHA256: r.PayloadSHA256, ReceivedMS: r.ReceivedMS})
	if err != nil {
		return "", core.Wrap(CodePlanSealInvalid, false, err)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(planSealContext))
	mac.Write(raw)
	return hex.EncodeToString(mac.Sum(nil)), nil
}

// keyIDContext is what SealKeyID MACs.
const keyIDContext = "localeflow.key-id.v1"

// SealKeyID names an HMAC key in stored records without revealing it: the
// first 8 bytes of HMAC-SHA256(key, "localeflow.key-id.v1"), as 16
// lowercase hex digits (docs/design.md "Key ids").
func SealKeyID(key []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(keyIDContext))
	return hex.EncodeToString(mac.Sum(nil)[:8])
}

// CheckPlan verifies a stored plan record's seal: nil only for the record
// Ingest wrote after verifying the plan's signed event. Every run checks
// it (one HMAC per key of the event key set over the content-free plan
// record, no extra read). The seal is made with the current event key and
// verifies under any key of the set, so a plan sealed before a rotation
// step stays valid while its key is in the set. A seal that verifies
// under no key makes the set re-read once (Refresh, at most every 10 s):
// another execution environment may already seal with a key this one has
// not read yet (docs/security.md "Event key"). Unless the set (RefreshRead)
// was read after this environment first met the seal (the rate limit
// refused the re-read, or it failed), the answer is the retryable
// CodePlanSealUnverified, not the final CodePlanSealInvalid: the set in
// use may predate the seal.
func (c *Coordinator) CheckPlan(ctx context.Context, r *PlanRecord) error {
	_, err := c.checkPlan(ctx, r)
	return err
}

// checkPlan is CheckPlan returning the set in use and whether the seal was
// made with its current key.
func (c *Coordinator) checkPlan(ctx context.Context, r *PlanRecord) (current bool, err error) {
	if r == nil {
		return false, core.Fail(CodePlanSealInvalid)
	}
	got, err := hex.DecodeString(r.Seal)
	if err != nil || len(got) != sha256.Size {
		return false, core.Fail(CodePlanSealInvalid)
	}
	keys, err := c.eventKeys(ctx)
	if err != nil {
		return false, err
	}
	i, err := sealedUnder(keys, r, got)
	if err != nil || i >= 0 {
		return i == 0, err
	}
	switch set := c.events.KeySet.(type) {
	case interface {
		RefreshRead(ctx context.Context) ([][]byte, time.Time, error)
	}:
		// Final only under a set read after this environment first met
		// the seal: a set read before may predate it (another
		// environment resealed the plan under a key read since, rotation
		// step 2) when the re-read was refused by the 10 s limit or
		// failed.
		met := c.unmatched.met(r.Seal, c.clock.Now())
		var readAt time.Time
		keys, readAt, err = set.RefreshRead(ctx)
		if err == nil && len(keys) > 0 {
			if i, err = sealedUnder(keys, r, got); err != nil || i >= 0 {
				return i == 0, err
			}
		}
		if err != nil || !readAt.After(met) {
			c.log().WarnContext(ctx, "plan seal under none of the event keys in use, key set not re-read since: retried",
				"event_id", r.Event.EventID, "code", CodePlanSealUnverified, "seal_key", r.SealKey)
			return false, core.Retry(CodePlanSealUnverified)
		}
	case interface {
		Refresh(ctx context.Context) ([][]byte, error)
	}:
		if keys, err = set.Refresh(ctx); err == nil && len(keys) > 0 {
			if i, err = sealedUnder(keys, r, got); err != nil || i >= 0 {
				return i == 0, err
			}
		}
	}
	return false, core.Fail(CodePlanSealInvalid)
}

// maxUnmatched bounds the seals an environment remembers (a store
// flooded with altered plans): past it the memory starts again, which
// costs each seal one more retryable answer at most.
const maxUnmatched = 1024

// unmatchedSeals remembers when this execution environment first met each
// seal that verified under none of the keys in use: a key set read after
// that time was read after the seal was made, so a seal under none of its
// keys is final (docs/design.md "Plan seal").
type unmatchedSeals struct {
	mu    sync.Mutex
	first map[string]time.Time
}

// met returns when the seal was first met (now if this is the first time).
func (u *unmatchedSeals) met(seal string, now time.Time) time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	if t, ok := u.first[seal]; ok {
		return t
	}
	if u.first == nil || len(u.first) >= maxUnmatched {
		u.first = map[string]time.Time{}
	}
	u.first[seal] = now
	return now
}

// sealedUnder returns the index of the key of keys under which seal is r's
// seal, or -1.
func sealedUnder(keys [][]byte, r *PlanRecord, seal []byte) (int, error) {
	for i, key := range keys {
		if len(key) == 0 {
			continue
		}
		want, err := planSeal(key, r)
		if err != nil {
			return -1, err
		}
		w, _ := hex.DecodeString(want)
		if hmac.Equal(seal, w) {
			return i, nil
		}
	}
	return -1, nil
}

// reseal seals a verified plan again under the current event key, so the
// key that sealed it can leave the set (docs/security.md "Event key").
// Best effort: the plan stays valid under its old seal while that key is
// in the set, and a conflict means another step wrote it (and resealed
// it) first.
func (c *Coordinator) reseal(ctx context.Context, snap *Snapshot) {
	old := snap.Plan
	keys, err := c.eventKeys(ctx)
	if err != nil {
		return
	}
	next := *old
	if next.Seal, err = planSeal(keys[0], &next); err != nil {
		return
	}
	next.SealKey, next.Version = SealKeyID(keys[0]), old.Version+1
	if err := c.store.Put(ctx, &next, old.Version); err != nil {
		c.log().Warn("plan not resealed under the current event key", "event_id", old.Event.EventID, "code", core.CodeOf(err))
		return
	}
	c.log().Info("plan resealed under the current event key", "event_id", old.Event.EventID, "seal_key", next.SealKey)
	snap.Plan = &next
}
