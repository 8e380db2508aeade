package monitor

import (
	"errors"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/signing"
)

// Codes of a localeflow.change.dispatched detail that is not a signed
// event (see docs/design.md "Signed bus events"); none is retryable. They
// keep the poller's names: the poller is the function that reports them.
const (
	CodeDispatchEnvelope  = "poller.dispatch.envelope_invalid"
	CodeDispatchSignature = "poller.dispatch.signature_invalid"
	CodeDispatchStale     = "poller.dispatch.stale"
)

// OpenDispatch verifies a signed localeflow.change.dispatched detail under
// check and returns its payload, the dispatch JSON (ParseDispatched reads
// it). The poller, the CLI's `conformance event` and the contract vectors
// use it.
func OpenDispatch(check signing.EventCheck, detail []byte) (string, error) {
	payload, _, err := signing.OpenEvent(check, contract.DetailChangeDispatched, detail)
	switch {
	case errors.Is(err, signing.ErrEventSignature):
		return "", core.Fail(CodeDispatchSignature)
	case errors.Is(err, signing.ErrEventStale):
		return "", core.Fail(CodeDispatchStale)
	case err != nil:
		return "", core.Fail(CodeDispatchEnvelope)
	}
	return payload, nil
}
