package release

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"

	"github.com/localeflow/localeflow/core"
)

// CodePlanSealInvalid: the stored plan record is not the plan whose signed
// event was verified at ingest (a job dropped or changed, another plan id);
// the release is refused.
const CodePlanSealInvalid = "coordinator.plan.seal_invalid"

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

// CheckPlan verifies a stored plan record's seal: nil only for the record
// Ingest wrote after verifying the plan's signed event. Every run checks
// it (one HMAC over the content-free plan record, no extra read).
func (c *Coordinator) CheckPlan(r *PlanRecord) error {
	if r == nil || len(c.eventKey) == 0 {
		return core.Fail(CodePlanSealInvalid)
	}
	want, err := planSeal(c.eventKey, r)
	if err != nil {
		return err
	}
	got, err := hex.DecodeString(r.Seal)
	w, _ := hex.DecodeString(want)
	if err != nil || !hmac.Equal(got, w) {
		return core.Fail(CodePlanSealInvalid)
	}
	return nil
}
