package handler

import (
	"context"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/internal/emf"
)

// pollMetrics counts a finished poll (every path — SQS message, sweep,
// hint — ends in afterPoll): Polls by the state the poll left the change
// in and, when the poll failed, PollFailures by code. The counts go into
// the invocation's batch (metricsScope) and are written as one EMF
// document per distinct state and code when the invocation returns.
// Content-free: a state and a stable code.
func (h *Handler) pollMetrics(ctx context.Context, out monitor.Outcome) {
	if !out.Polled {
		return
	}
	values := map[string]string{contract.MetricStateDimension: string(out.State)}
	groups := []emf.Group{emf.Count(contract.MetricPolls, contract.MetricStateDimension)}
	if out.FailureCode != "" {
		// A hinted poll that failed early counts too: the change's failure
		// budget is untouched, but the CMS did fail.
		values[contract.MetricCodeDimension] = out.FailureCode
		groups = append(groups, emf.Count(contract.MetricPollFailures, contract.MetricCodeDimension))
	}
	h.metrics.Count(ctx, values, groups...)
}
