package sim

import (
	"context"
	"time"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/health"
	"github.com/localeflow/localeflow/core/release"
)

// releaseCensus reads what health's release reader reads — every record in
// the sparse wake or attention index (release.Wake) — from the memory
// store, for the releases of the scenario.
type releaseCensus struct{ r *Release }

func (c releaseCensus) ReleaseCensus(ctx context.Context) ([]health.ReleaseRecord, error) {
	var out []health.ReleaseRecord
	for _, spec := range c.r.releases {
		snap, err := c.r.mem.Load(ctx, spec.plan.EventID)
		if err != nil {
			return nil, err
		}
		type entry struct {
			rec release.Record
			hr  health.ReleaseRecord
		}
		var recs []entry
		for _, e := range snap.Evidence {
			recs = append(recs, entry{e, health.ReleaseRecord{Evidence: e}})
		}
		for _, j := range snap.Jobs {
			recs = append(recs, entry{j, health.ReleaseRecord{Job: j}})
		}
		for _, a := range snap.Approvals {
			recs = append(recs, entry{a, health.ReleaseRecord{Approval: a}})
		}
		if d := snap.Delivery; d != nil {
			recs = append(recs, entry{d, health.ReleaseRecord{Delivery: d}})
		}
		if b := snap.Blocked; b != nil {
			recs = append(recs, entry{b, health.ReleaseRecord{Blocked: b}})
		}
		for _, e := range recs {
			_, wakes, _, attention := release.Wake(e.rec)
			if wakes || attention {
				e.hr.EventID, e.hr.SortKey = e.rec.Key()
				out = append(out, e.hr)
			}
		}
	}
	return out, nil
}

// checkHealth runs the health function's checker once the world is quiet
// and compares its verdict with the history: blocked exactly when a record
// needs an operator.
func checkHealth(ctx context.Context, w *World, m *Monitor, r *Release) {
	checker, err := health.NewChecker(m.store, nil, releaseCensus{r}, core.ClockFunc(time.Now), nil)
	if err != nil {
		w.violate("health checker: %v", err)
		return
	}
	rep, err := checker.Check(ctx)
	if err != nil {
		w.violate("health check failed: %v", err)
		return
	}
	if rep.Monitor.ExpiredLeases > 0 {
		w.violate("health shows %d expired monitor leases after faults stopped", rep.Monitor.ExpiredLeases)
	}
	r.checkBlockedRecords(ctx, rep)
	need := append(append([]string(nil), m.needOperator...), r.needOperator...)
	// Age reasons (work open for days of simulated time, e.g. a message
	// parked in a DLQ) are tickets about waiting work, not records an
	// operator must repair: the invariant holds for the other reasons.
	blocked := rep.Blocked(health.SeverityOperations) || rep.Blocked(health.SeverityBusiness)
	if blocked != (len(need) > 0) {
		w.violate("health is %s (reasons %v) but these need an operator: %v", rep.Status, rep.Reasons, need)
	}
}
