package monitor

import (
	"bytes"
	"encoding/json"
	"math"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
)

// Dispatch is the dispatcher's success record for one change (the
// contract's type).
type Dispatch = contract.Dispatch

// Dispatched is the payload of a localeflow.change.dispatched event (the
// contract's type): the change as sent (any JSON object; it is hashed
// canonically) and the dispatch that accepted it.
type Dispatched = contract.ChangeDispatched

// registration is a validated Dispatched.
type registration struct {
	eventID, siteID, planID, websiteVersion string
	sourceSequence                          int64
	jobCount                                int
	changeSHA256                            string
	remoteStatus                            string
}

// maxSafeInteger is the largest integer every JSON reader keeps exactly.
const maxSafeInteger = 1<<53 - 1

// ParseDispatched decodes and validates the detail JSON of a
// localeflow.change.dispatched event: an object with exactly the keys
// "change" (an object) and "dispatch" (an object). Field types are checked
// strictly (no bool or float where an integer is due). A malformed detail
// or change is lifecycle_monitor.change_invalid, a dispatch that does not
// match the change is lifecycle_monitor.dispatch_invalid.
func ParseDispatched(detail []byte) (Dispatched, error) {
	// Canonicalizing refuses duplicate keys, invalid UTF-8 and deep
	// nesting; the raw text is then read so that number spellings (1.0)
	// stay visible to the type checks.
	if _, err := core.CanonicalizeJSON(detail); err != nil {
		return Dispatched{}, core.Wrap(CodeChangeInvalid, false, err)
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(detail, &top) != nil || top == nil || len(top) != 2 {
		return Dispatched{}, core.Fail(CodeChangeInvalid)
	}
	change, ok := top["change"]
	if !ok || !isObject(change) {
		return Dispatched{}, core.Fail(CodeChangeInvalid)
	}
	raw, ok := top["dispatch"]
	if !ok || !isObject(raw) {
		return Dispatched{}, core.Fail(CodeDispatchInvalid)
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return Dispatched{}, core.Fail(CodeDispatchInvalid)
	}
	var d Dispatch
	ok = jsonString(fields["event_id"], &d.EventID) &&
		jsonString(fields["payload_sha256"], &d.PayloadSHA256) &&
		jsonString(fields["status"], &d.Status) &&
		jsonString(fields["remote_plan_id"], &d.RemotePlanID) &&
		jsonInteger(fields["remote_job_count"], &d.RemoteJobCount) &&
		jsonString(fields["remote_status"], &d.RemoteStatus) &&
		jsonString(fields["response_sha256"], &d.ResponseSHA256)
	if !ok {
		return Dispatched{}, core.Fail(CodeDispatchInvalid)
	}
	out := Dispatched{Change: change, Dispatch: d}
	if _, err := validateDispatched(out); err != nil {
		return Dispatched{}, err
	}
	return out, nil
}

// validateDispatched checks a dispatched change before registration
// (docs/design.md "localeflow.change.dispatched"): the change is an object
// whose event_id, site_id and website_version are tokens (else
// CodeChangeInvalid), and the dispatch matches it (a source_sequence in the
// change that is a positive safe integer, the same event id, the SHA-256 of
// the canonical change as payload hash, status succeeded, a plan id token,
// a job count in 1..2^31-1, a remote status enqueued, superseded or
// cancelled, a response hash; else CodeDispatchInvalid).
func validateDispatched(d Dispatched) (registration, error) {
	canonical, err := core.CanonicalizeJSON(d.Change)
	if err != nil || !isObject(canonical) {
		return registration{}, core.Fail(CodeChangeInvalid)
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(d.Change, &fields) != nil {
		return registration{}, core.Fail(CodeChangeInvalid)
	}
	var reg registration
	if !jsonString(fields["event_id"], &reg.eventID) || !core.ValidToken(reg.eventID) ||
		!jsonString(fields["site_id"], &reg.siteID) || !core.ValidToken(reg.siteID) ||
		!jsonString(fields["website_version"], &reg.websiteVersion) || !core.ValidToken(reg.websiteVersion) {
		return registration{}, core.Fail(CodeChangeInvalid)
	}
	reg.changeSHA256 = core.SHA256Hex(canonical)
	x := d.Dispatch
	if !jsonInteger(fields["source_sequence"], &reg.sourceSequence) ||
		x.EventID != reg.eventID || x.PayloadSHA256 != reg.changeSHA256 || x.Status != "succeeded" ||
		!core.ValidToken(x.RemotePlanID) || x.RemoteJobCount <= 0 || x.RemoteJobCount > math.MaxInt32 ||
		(x.RemoteStatus != "enqueued" && x.RemoteStatus != "superseded" && x.RemoteStatus != "cancelled") ||
		!core.ValidSHA256(x.ResponseSHA256) {
		return registration{}, core.Fail(CodeDispatchInvalid)
	}
	reg.planID = x.RemotePlanID
	reg.jobCount = int(x.RemoteJobCount)
	reg.remoteStatus = x.RemoteStatus
	return reg, nil
}

func isObject(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

func jsonString(raw json.RawMessage, out *string) bool {
	if len(raw) == 0 || raw[0] != '"' {
		return false
	}
	return json.Unmarshal(raw, out) == nil
}

// jsonInteger accepts a positive JSON integer within the safe range: no
// bool, string, fraction or exponent (canonical numbers spell integers
// below 1e21 without them).
func jsonInteger(raw json.RawMessage, out *int64) bool {
	if len(raw) == 0 || bytes.ContainsAny(raw, `.eE-"tfn[{`) {
		return false
	}
	var n int64
	if json.Unmarshal(raw, &n) != nil || n <= 0 || n > maxSafeInteger {
		return false
	}
	*out = n
	return true
}
