package peer

import (
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/signing"
)

// CodeDetailTypeUnknown refuses a detail-type that is not a localeflow
// input (the coordinator's code for it).
const CodeDetailTypeUnknown = release.CodeEventDetailType

// EventCheck is how a signed input event is verified: the event keys (the
// current one first), the verifier's time, the accepted age and whether v1
// is refused; the functions' defaults when zero.
type EventCheck = signing.EventCheck

// EventResult says which checks an input event passed.
type EventResult struct {
	// Envelope: the detail is a signed envelope whose signature verifies
	// under one of the keys and whose timestamp is in the window.
	Version int
	// Payload is the verified payload (the JSON text).
	Payload string
}

// OpenInputEvent verifies an input event detail exactly as the consuming
// function does, with its codes: localeflow.change.dispatched as the poller
// (poller.dispatch.* for the envelope, lifecycle_monitor.* for the
// payload), localeflow.plan.accepted and localeflow.job.completed as the
// coordinator (coordinator.*), localeflow.change.hint as the poller
// (lifecycle_monitor.hint_invalid). It returns the envelope's result (zero
// for a hint) and the first error; envelopeErr says whether that error is
// the envelope's (signature, window, shape) rather than the payload's.
func OpenInputEvent(check EventCheck, detailType string, detail []byte) (res EventResult, envelopeErr bool, err error) {
	if check.Now.IsZero() {
		check.Now = time.Now()
	}
	switch detailType {
	case contract.DetailChangeHint:
		_, err := monitor.ParseHint(detail)
		return EventResult{}, false, err
	case contract.DetailChangeDispatched:
		payload, err := monitor.OpenDispatch(check, detail)
		if err != nil {
			return EventResult{}, true, err
		}
		_, version, _ := signing.OpenEvent(check, detailType, detail)
		res = EventResult{Version: version, Payload: payload}
		if _, err := monitor.ParseDispatched([]byte(payload)); err != nil {
			return res, false, err
		}
		return res, false, nil
	case contract.DetailPlanAccepted, contract.DetailJobCompleted:
		payload, version, openErr := signing.OpenEvent(check, detailType, detail)
		_, err := release.ParseSignedEventWith(check, detailType, detail)
		if openErr != nil || (err != nil && isEnvelopeCode(core.CodeOf(err))) {
			return EventResult{}, true, err
		}
		return EventResult{Version: version, Payload: payload}, false, err
	}
	return EventResult{}, true, core.Fail(CodeDetailTypeUnknown)
}

func isEnvelopeCode(code string) bool {
	switch code {
	case release.CodeEventInvalid, release.CodeEventSignatureInvalid, release.CodeEventStale:
		return true
	}
	return false
}

// The job↔plan binding codes: the coordinator refuses a job of another
// plan (or one its plan does not hold) at ingest, and a result whose
// source or locales are not its plan job's when it prepares the release.
const (
	CodeJobPlanMismatch       = "coordinator.job.plan_mismatch"
	CodeResultSourceMismatch  = "result.source_mismatch"
	CodeResultBindingMismatch = "result.binding_mismatch"
)

// CheckJobBinding checks a verified job against its verified plan as the
// coordinator does (docs/design.md "Producer rules: jobs and their
// plan"): the same event_id and plan_id, a job_id of the plan, and for a
// succeeded job the plan job's source_sha256, source_locale,
// target_locale and content_type. It returns what differs, for a reader.
// (One job's results must also agree across its events:
// coordinator.job.conflict, which `conformance event --plan` checks over
// its files.)
func CheckJobBinding(plan *release.Plan, job *release.JobCompletion) (string, error) {
	if job.EventID != plan.Event.EventID {
		return "the job's event_id is not the plan's", core.Fail(CodeJobPlanMismatch)
	}
	if job.PlanID != plan.PlanID {
		return "the job's plan_id is not the plan's", core.Fail(CodeJobPlanMismatch)
	}
	var pj *release.PlanJob
	for i := range plan.Jobs {
		if plan.Jobs[i].JobID == job.JobID {
			pj = &plan.Jobs[i]
		}
	}
	if pj == nil {
		return "the plan holds no job with this job_id", core.Fail(CodeJobPlanMismatch)
	}
	r := job.Result
	if r == nil {
		return "", nil
	}
	if r.SourceSHA256 != pj.SourceSHA256 {
		return "the result's source_sha256 is not the plan job's (the source text changed after the plan?)", core.Fail(CodeResultSourceMismatch)
	}
	switch {
	case r.SourceLocale != pj.SourceLocale:
		return "the result's source_locale is not the plan job's", core.Fail(CodeResultBindingMismatch)
	case r.TargetLocale != pj.TargetLocale:
		return "the result's target_locale is not the plan job's", core.Fail(CodeResultBindingMismatch)
	case r.ContentType != pj.ContentType:
		return "the result's content_type is not the plan job's", core.Fail(CodeResultBindingMismatch)
	}
	return "", nil
}
