package releasetest

import (
	"context"
	"sync"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/release"
)

// Published is a release.Publisher that records the events published, in
// order (Fail, when set, refuses a publish).
type Published struct {
	mu     sync.Mutex
	Events []PublishedEvent
	Fail   func(PublishedEvent) error
}

// PublishedEvent is one published event: an approval (DetailType
// contract.DetailReleaseApproved) or a delivery event.
type PublishedEvent struct {
	DetailType string
	Approved   contract.ReleaseApproved
	Delivery   contract.Delivery
}

func (p *Published) add(e PublishedEvent) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.Fail != nil {
		if err := p.Fail(e); err != nil {
			return err
		}
	}
	p.Events = append(p.Events, e)
	return nil
}

// PublishApproved records a release.approved event.
func (p *Published) PublishApproved(_ context.Context, d contract.ReleaseApproved) error {
	return p.add(PublishedEvent{DetailType: contract.DetailReleaseApproved, Approved: d})
}

// PublishDelivery records delivery.ready or delivery.delivered (other
// statuses publish nothing, as release.BusPublisher).
func (p *Published) PublishDelivery(_ context.Context, d contract.Delivery) error {
	switch d.Status {
	case release.OutcomeDeliveryReady:
		return p.add(PublishedEvent{DetailType: contract.DetailDeliveryReady, Delivery: d})
	case release.OutcomeDelivered:
		return p.add(PublishedEvent{DetailType: contract.DetailDeliveryDelivered, Delivery: d})
	}
	return nil
}

// Approvals counts the release.approved events by approval id.
func (p *Published) Approvals() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for _, e := range p.Events {
		if e.DetailType == contract.DetailReleaseApproved {
			out[e.Approved.ApprovalID]++
		}
	}
	return out
}

// Settle settles, as published, what the outcome says to settle
// (release.Outcome.Approvals) — for tests that look at the state between
// a step's run and its settle; everything else runs release.Coordinator.
// Step (Drive).
func Settle(ctx context.Context, c *release.Coordinator, o release.Outcome) error {
	for _, a := range o.Approvals() {
		if err := c.SettleApproval(ctx, a.Event.EventID, a.Event.JobID, a.Event.ApprovalID, a.Tally); err != nil {
			return err
		}
	}
	return nil
}

// Options of Drive.
type Options struct {
	// Ports of the step; a nil Publisher records into a fresh Published.
	Ports release.Ports
	// Strict returns the error of the run scheduled at once after an
	// approval (the function runs it as a message of its own); otherwise
	// it is dropped.
	Strict bool
}

// Drive runs req with release.Coordinator.Step as the coordinator function
// does and plays the queue once: when the step approved a locale and
// scheduled a run now, that run follows; when it prepares the delivery,
// the outcome reports it (status delivery_ready with its delivery's
// fields). The step's own error (StepResult.StepErr, or Step's) is
// returned.
func Drive(ctx context.Context, c *release.Coordinator, req release.StepRequest, opt Options) (release.Outcome, error) {
	if req.Kind == "" {
		req.Kind = contract.KindReleaseRun
	}
	if opt.Ports.Publisher == nil {
		opt.Ports.Publisher = &Published{}
	}
	res, err := c.Step(ctx, req, opt.Ports)
	o := res.Outcome
	if err == nil {
		err = res.StepErr
	}
	if err != nil {
		return o, err
	}
	if !o.Changed || o.ApprovalID == "" || o.Quiet || o.Status != release.OutcomeApproved || res.Next.Kind != contract.KindReleaseRun {
		return o, nil
	}
	next, err := c.Step(ctx, release.StepRequest{Kind: contract.KindReleaseRun, EventID: req.EventID}, opt.Ports)
	if err == nil {
		err = next.StepErr
	}
	if err != nil {
		if opt.Strict {
			return o, err
		}
		return o, nil
	}
	if n := next.Outcome; n.Status == release.OutcomeDeliveryReady {
		o.Status, o.DeliveryID, o.WakeAt = n.Status, n.DeliveryID, n.WakeAt
	}
	return o, nil
}

// Step runs the event's release (Drive, a run message, the second run's
// error dropped).
func Step(ctx context.Context, c *release.Coordinator, eventID string) (release.Outcome, error) {
	return Drive(ctx, c, release.StepRequest{Kind: contract.KindReleaseRun, EventID: eventID}, Options{})
}
