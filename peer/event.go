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
