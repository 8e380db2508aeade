package handler

import (
	"context"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/internal/emf"
)

// StateError is the State dimension of a release step that ended with an
// error (its code is the Code dimension of the failures metric).
const StateError = "error"

// stepMetrics counts a release step: an evidence step (run) or a delivery
// step (deliver) by its outcome (waiting, approved, delivery_ready,
// delivered, or error) and, for an error, the failures metric by code.
// The counts go into the invocation's batch (Handle, HandleSQS) and are
// written as one EMF document per distinct kind, state and code when the
// invocation returns. Content-free: a state and a stable code.
func (h *Handler) stepMetrics(ctx context.Context, kind string, o release.Outcome, err error) {
	steps, failures := contract.MetricEvidenceSteps, contract.MetricEvidenceFailures
	if kind == KindDeliver {
		steps, failures = contract.MetricDeliverySteps, contract.MetricDeliveryFailures
	}
	state := o.Status
	values := map[string]string{}
	groups := []emf.Group{emf.Count(steps, contract.MetricStateDimension)}
	if err != nil {
		state = StateError
		code := core.CodeOf(err)
		if !core.ValidErrorCode(code) {
			code = "unknown"
		}
		values[contract.MetricCodeDimension] = code
		groups = append(groups, emf.Count(failures, contract.MetricCodeDimension))
	}
	if state == "" {
		state = release.OutcomeWaiting
	}
	values[contract.MetricStateDimension] = state
	h.metrics.Count(ctx, values, groups...)
}
