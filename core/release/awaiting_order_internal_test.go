package release

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
)

// putOrder records the job ids of the approvals written, in order; it
// serves only Put (the rest of Store is never called here).
type putOrder struct {
	Store
	jobs []string
}

func (p *putOrder) Put(_ context.Context, rec Record, _ int64) error {
	p.jobs = append(p.jobs, rec.(*ApprovalRecord).JobID)
	return nil
}

// TestAwaitingDeliveryClearedInJobOrder: clearing the awaiting_delivery
// marks once a delivery exists writes the approvals in job id order. It
// ranged over the approvals map, so two releases (or two replays of one
// simulator seed) with the same state wrote them in different orders
// (found by the simulator's replay test: seed 2 with the default day-2
// kinds replayed differently about every second run).
func TestAwaitingDeliveryClearedInJobOrder(t *testing.T) {
	for run := range 20 {
		store := &putOrder{}
		c := &Coordinator{store: store, logger: slog.New(slog.DiscardHandler)}
		snap := &Snapshot{Delivery: &DeliveryRecord{}, Approvals: map[string]*ApprovalRecord{}}
		var want []string
		for i := range 8 {
			id := fmt.Sprintf("job-%d", i)
			want = append(want, id)
			snap.Approvals[id] = &ApprovalRecord{JobID: id, AwaitingDelivery: true, Version: 1}
		}
		snap.Approvals["job-x"] = &ApprovalRecord{JobID: "job-x", Version: 1} // not awaiting: not written
		c.settleAwaitingDelivery(context.Background(), snap)
		if !slices.Equal(store.jobs, want) {
			t.Fatalf("run %d: approvals written in the order %v, want %v", run, store.jobs, want)
		}
		for _, id := range want {
			if snap.Approvals[id].AwaitingDelivery || snap.Approvals[id].Version != 2 {
				t.Fatalf("run %d: %s left %+v", run, id, snap.Approvals[id])
			}
		}
	}
}
