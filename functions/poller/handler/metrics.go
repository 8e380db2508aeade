package handler

import (
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/internal/emf"
	"github.com/localeflow/localeflow/topology"
)

// pollMetrics writes one EMF line per finished poll (every path — SQS
// message, sweep, hint — ends in afterPoll): Polls by the state the poll
// left the change in and, when the poll failed, PollFailures by code.
// Content-free: a state and a stable code.
func (h *Handler) pollMetrics(out monitor.Outcome) {
	if !out.Polled {
		return
	}
	values := map[string]string{topology.MetricStateDimension: string(out.State)}
	groups := []emf.Group{emf.Count(topology.MetricPolls, topology.MetricStateDimension)}
	if out.ErrorCode != "" {
		values[topology.MetricCodeDimension] = out.ErrorCode
		groups = append(groups, emf.Count(topology.MetricPollFailures, topology.MetricCodeDimension))
	}
	h.metrics.Emit(values, groups...)
}
