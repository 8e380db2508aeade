package lifecycle

import (
	"bytes"
	"encoding/json"

	"github.com/localeflow/localeflow/core"
)

// Schema is the value of the `schema` key of every lifecycle response.
const Schema = "localeflow.cms-lifecycle.v1"

// CodeResponseInvalid is the code of every contract violation in a response
// (bad signature, request-id mismatch, identity mismatch, unknown status,
// extra or missing key). It is not retryable.
const CodeResponseInvalid = "lifecycle_monitor.response_invalid"

// Remote CMS statuses, exactly the three sets of docs/design.md "CMS
// lifecycle API" (terminal success, terminal failure, non-terminal); any
// other status is an invalid response.
var (
	terminalSuccess = set("cancelled", "deleted", "published", "superseded")
	terminalFailure = set("deletion_failed", "localization_failed", "publication_blocked", "publication_failed")
	nonTerminal     = set("awaiting_approval", "deleting", "processing", "publishing", "queue_recovery", "ready")
)

func set(items ...string) map[string]bool {
	m := make(map[string]bool, len(items))
	for _, s := range items {
		m[s] = true
	}
	return m
}

// IsRemoteStatus reports whether s is any known CMS status.
func IsRemoteStatus(s string) bool { return terminalSuccess[s] || terminalFailure[s] || nonTerminal[s] }

// IsTerminal reports whether s ends monitoring (success or failure).
func IsTerminal(s string) bool { return terminalSuccess[s] || terminalFailure[s] }

// IsTerminalSuccess reports whether s is a successful terminal status.
func IsTerminalSuccess(s string) bool { return terminalSuccess[s] }

// IsRemoteFailure reports whether s is a terminal failure (health blocks on it).
func IsRemoteFailure(s string) bool { return terminalFailure[s] }

// IsPollStatus reports whether s is a valid answer to a poll. `superseded`
// is known only from the dispatch, never from a poll.
func IsPollStatus(s string) bool { return IsRemoteStatus(s) && s != "superseded" }

// Target is the identity a response must match: the registered change.
type Target struct {
	EventID        string
	SiteID         string
	PlanID         string
	WebsiteVersion string
	SourceSequence int64
	JobCount       int
}

// BlockedLocale is one `[locale, reason_code]` pair.
type BlockedLocale struct {
	Locale string
	Reason string
}

// Response is a validated lifecycle view.
type Response struct {
	RequestID       string
	EventID         string
	SiteID          string
	PlanID          string
	WebsiteVersion  string
	SourceSequence  int64
	Status          string
	RequiredLocales []string
	ApprovedLocales []string
	BlockedLocales  []BlockedLocale
	QueueCounts     map[string]int64
	// Delivery and Tombstone are content-free digests
	// {"sha256": "<hex of the object's RFC 8785 form>"}, or nil for null:
	// the CMS's objects may carry personal data and are never kept.
	Delivery  json.RawMessage
	Tombstone json.RawMessage
	// Canonical is the RFC 8785 form of the body with delivery and
	// tombstone replaced by their digests; SHA256 its hash. This is the
	// content-free snapshot the monitor stores.
	Canonical []byte
	SHA256    string
}

var keys = []string{
	"schema", "request_id", "event_id", "site_id", "plan_id", "website_version",
	"source_sequence", "status", "required_locales", "approved_locales",
	"blocked_locales", "queue_counts", "delivery", "tombstone",
}

// MaxSnapshotBytes caps the canonical form of an answer: 128 KiB. The
// snapshot the monitor stores in its record (delivery and tombstone reduced
// to digests) is never larger. A DynamoDB item holds at most
// 400 KB, names and values included; the rest of a monitor record is under
// 2 KB, so the cap leaves more than half the item free, and it keeps a
// claim or finishing write (billed by item size, 1 KB per write unit)
// bounded. A larger answer is lifecycle_monitor.response_invalid.
const MaxSnapshotBytes = 128 << 10

func invalid() error { return core.Fail(CodeResponseInvalid) }

// Parse validates body as the lifecycle response for target and requestID.
// requestID "" skips the request-id binding check (used when re-validating a
// stored snapshot, whose request id is only checked to be a token).
func Parse(target Target, requestID string, body []byte) (Response, error) {
	canonical, err := core.CanonicalizeJSON(body)
	if err != nil || len(canonical) > MaxSnapshotBytes {
		return Response{}, invalid()
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(canonical, &fields); err != nil || fields == nil || len(fields) != len(keys) {
		return Response{}, invalid()
	}
	for _, k := range keys {
		if _, ok := fields[k]; !ok {
			return Response{}, invalid()
		}
	}
	var r Response
	var schema string
	ok := str(fields["schema"], &schema) && schema == Schema &&
		str(fields["request_id"], &r.RequestID) && core.ValidToken(r.RequestID) &&
		(requestID == "" || r.RequestID == requestID) &&
		str(fields["event_id"], &r.EventID) && r.EventID == target.EventID &&
		str(fields["site_id"], &r.SiteID) && r.SiteID == target.SiteID &&
		str(fields["plan_id"], &r.PlanID) && r.PlanID == target.PlanID &&
		str(fields["website_version"], &r.WebsiteVersion) && r.WebsiteVersion == target.WebsiteVersion &&
		integer(fields["source_sequence"], &r.SourceSequence) && r.SourceSequence == target.SourceSequence &&
		str(fields["status"], &r.Status) && IsPollStatus(r.Status) &&
		locales(fields["required_locales"], &r.RequiredLocales) && len(r.RequiredLocales) == target.JobCount &&
		locales(fields["approved_locales"], &r.ApprovedLocales) && subset(r.ApprovedLocales, r.RequiredLocales) &&
		blocked(fields["blocked_locales"], r.RequiredLocales, &r.BlockedLocales) &&
		counts(fields["queue_counts"], &r.QueueCounts) &&
		objectOrNull(fields["delivery"], &r.Delivery) &&
		objectOrNull(fields["tombstone"], &r.Tombstone)
	if !ok {
		return Response{}, invalid()
	}
	r.Delivery, r.Tombstone = digestObject(r.Delivery), digestObject(r.Tombstone)
	fields["delivery"], fields["tombstone"] = orNull(r.Delivery), orNull(r.Tombstone)
	stored, err := json.Marshal(fields)
	if err == nil {
		stored, err = core.CanonicalizeJSON(stored)
	}
	if err != nil {
		return Response{}, invalid()
	}
	r.Canonical = stored
	r.SHA256 = core.SHA256Hex(stored)
	return r, nil
}

// digestObject replaces a canonical JSON object with the content-free
// {"sha256": "<hex of its canonical form>"}. An object that already is such
// a digest (a stored snapshot being re-validated) is kept, so the
// reduction is idempotent.
func digestObject(obj json.RawMessage) json.RawMessage {
	if obj == nil {
		return nil
	}
	var d map[string]string
	if json.Unmarshal(obj, &d) == nil && len(d) == 1 && core.ValidSHA256(d["sha256"]) && string(obj) == `{"sha256":"`+d["sha256"]+`"}` {
		return obj
	}
	return json.RawMessage(`{"sha256":"` + core.SHA256Hex(obj) + `"}`)
}

func orNull(obj json.RawMessage) json.RawMessage {
	if obj == nil {
		return json.RawMessage("null")
	}
	return obj
}

func str(raw json.RawMessage, out *string) bool {
	if len(raw) == 0 || raw[0] != '"' {
		return false
	}
	return json.Unmarshal(raw, out) == nil
}

func integer(raw json.RawMessage, out *int64) bool {
	// Canonical numbers that are integers have no '.', 'e' or '-' sign here.
	if len(raw) == 0 || bytes.ContainsAny(raw, ".eE-") || raw[0] == '"' {
		return false
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return false
	}
	return *out > 0
}

func locales(raw json.RawMessage, out *[]string) bool {
	if len(raw) == 0 || raw[0] != '[' {
		return false
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return false
	}
	seen := map[string]bool{}
	result := make([]string, 0, len(items))
	for _, item := range items {
		var s string
		if !str(item, &s) || !core.ValidToken(s) || seen[s] {
			return false
		}
		seen[s] = true
		result = append(result, s)
	}
	*out = result
	return true
}

func subset(items, of []string) bool {
	in := set(of...)
	for _, s := range items {
		if !in[s] {
			return false
		}
	}
	return true
}

func blocked(raw json.RawMessage, required []string, out *[]BlockedLocale) bool {
	if len(raw) == 0 || raw[0] != '[' {
		return false
	}
	var items [][]json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return false
	}
	in := set(required...)
	result := make([]BlockedLocale, 0, len(items))
	for _, pair := range items {
		var b BlockedLocale
		if len(pair) != 2 || !str(pair[0], &b.Locale) || !in[b.Locale] ||
			!str(pair[1], &b.Reason) || !core.ValidErrorCode(b.Reason) {
			return false
		}
		result = append(result, b)
	}
	*out = result
	return true
}

func counts(raw json.RawMessage, out *map[string]int64) bool {
	if len(raw) == 0 || raw[0] != '{' {
		return false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return false
	}
	result := make(map[string]int64, len(m))
	for k, v := range m {
		var n int64
		// Digits only: null (which json.Unmarshal reads as 0), bools,
		// strings, signs, fractions and exponents are not counts.
		if !core.ValidToken(k) || len(v) == 0 || v[0] < '0' || v[0] > '9' || bytes.ContainsAny(v, ".eE-\"") ||
			json.Unmarshal(v, &n) != nil || n < 0 {
			return false
		}
		result[k] = n
	}
	*out = result
	return true
}

func objectOrNull(raw json.RawMessage, out *json.RawMessage) bool {
	if string(raw) == "null" {
		*out = nil
		return true
	}
	if len(raw) == 0 || raw[0] != '{' {
		return false
	}
	*out = append(json.RawMessage(nil), raw...)
	return true
}
