package releasetest

import (
	"context"

	"github.com/localeflow/localeflow/core/release"
)

// Settle does, for a driver of the coordinator without the coordinator
// function (a test or proof that calls RunNextRelease itself), what the
// function does once a step's approval events are published (docs/
// design.md "Owed events of compact approvals"): it settles the owed
// approvals the step reports and the step's own approval. Without it a
// release's delivery waits for its owed approvals forever.
func Settle(ctx context.Context, c *release.Coordinator, o release.Outcome) error {
	for _, a := range o.Owed {
		if err := c.SettleApproval(ctx, o.EventID, a.JobID, a.ApprovalID, true); err != nil {
			return err
		}
	}
	if o.Changed && o.ApprovalID != "" {
		return c.SettleApproval(ctx, o.EventID, o.JobID, o.ApprovalID, !o.Tallied)
	}
	return nil
}

// Step runs RunNextRelease as the coordinator function does: the step's
// approvals are settled (Settle), and when the walk approved a locale the
// release runs again at once; when that run prepares the delivery, the
// outcome reports it (status delivery_ready with the approval's fields).
// An error of that second run is not this step's: it is not returned.
func Step(ctx context.Context, c *release.Coordinator, eventID string) (release.Outcome, error) {
	o, err := c.RunNextRelease(ctx, eventID)
	if err != nil {
		return o, err
	}
	if err := Settle(ctx, c, o); err != nil {
		return o, err
	}
	if !o.Changed || o.ApprovalID == "" || o.Quiet || o.Status != release.OutcomeApproved {
		return o, nil
	}
	next, err := c.RunNextRelease(ctx, eventID)
	if err != nil {
		// The next step's error, not this one's (the function runs it
		// as a message of its own).
		return o, nil
	}
	if err := Settle(ctx, c, next); err != nil {
		return o, nil
	}
	if next.Status == release.OutcomeDeliveryReady {
		o.Status, o.DeliveryID, o.WakeAt = next.Status, next.DeliveryID, next.WakeAt
	}
	return o, nil
}
