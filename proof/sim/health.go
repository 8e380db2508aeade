package sim

import (
	"context"
	"time"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/health"
)

// releaseCensus reads what health's release reader reads (evidence and
// delivery records that can wake or need attention) from the memory
// store, for the releases of the scenario.
type releaseCensus struct{ r *Release }

func (c releaseCensus) ReleaseCensus(ctx context.Context) ([]health.ReleaseRecord, error) {
	var out []health.ReleaseRecord
	for _, spec := range c.r.releases {
		snap, err := c.r.mem.Load(ctx, spec.plan.EventID)
		if err != nil {
			return nil, err
		}
		for _, e := range snap.Evidence {
			_, wakes := e.WakeMS()
			_, attention := e.AttentionMS()
			if wakes || attention {
				_, sk := e.Key()
				out = append(out, health.ReleaseRecord{EventID: e.EventID, SortKey: sk, Evidence: e})
			}
		}
		if d := snap.Delivery; d != nil {
			_, wakes := d.WakeMS()
			_, attention := d.AttentionMS()
			if wakes || attention {
				_, sk := d.Key()
				out = append(out, health.ReleaseRecord{EventID: d.EventID, SortKey: sk, Delivery: d})
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
	need := append(append([]string(nil), m.needOperator...), r.needOperator...)
	blocked := rep.Status == health.StatusBlocked
	if blocked != (len(need) > 0) {
		w.violate("health is %s (reasons %v) but these need an operator: %v", rep.Status, rep.Reasons, need)
	}
}
