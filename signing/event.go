package signing

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"time"

	"github.com/localeflow/localeflow/contract"
)

// Signed bus events carry their payload as a JSON string next to its
// signature, in one of two versions:
//
//	v1: {"payload": P, "signature": "v1=<hex HMAC-SHA256(key, P)>"}
//	v2: {"payload": P, "timestamp": T, "signature": "v2=<hex HMAC-SHA256(key, C)>"}
//
// where T is the signing time in decimal Unix seconds and the v2 canonical
// string C = "localeflow.event.v2\n" + detail-type + "\n" + T + "\n" + P.
// A v2 signature binds the event type and the time, so a payload signed for
// one detail-type cannot be replayed as another, and an old event is
// refused.
const (
	EventV2Context = "localeflow.event.v2"
	eventV2Prefix  = "v2="
	// DefaultEventMaxAge is the oldest v2 event accepted: 30 days, so that
	// every way an input can still legitimately arrive is covered — the
	// bus's 24 h of retries, a DLQ redrive (the DLQs keep a message 14
	// days from its first enqueue) and a quarantine replay of a message
	// rejected at up to 15 days (the quarantine keeps it 14 days more).
	// Registration stays idempotent within it because the records live
	// longer (LOCALEFLOW_MONITOR_RETENTION ≥ the max age, checked at cold
	// start; docs/design.md "Retention and the replay window").
	DefaultEventMaxAge = 30 * 24 * time.Hour
	// EventMaxSkew is how far in the future a v2 timestamp may be.
	EventMaxSkew       = 5 * time.Minute
	maxTimestampDigits = 12
)

// EffectiveEventMaxAge is maxAge, or DefaultEventMaxAge when it is 0 (the
// window EventCheck applies).
func EffectiveEventMaxAge(maxAge time.Duration) time.Duration {
	if maxAge <= 0 {
		return DefaultEventMaxAge
	}
	return maxAge
}

// Errors of OpenEvent; callers map them to their own stable codes.
var (
	ErrEventMalformed = errors.New("signing: event detail malformed")
	ErrEventSignature = errors.New("signing: event signature invalid")
	ErrEventStale     = errors.New("signing: event timestamp outside the accepted window")
)

// EventV2Canonical is the string a v2 event signature covers.
func EventV2Canonical(detailType, timestamp string, payload []byte) []byte {
	b := make([]byte, 0, len(EventV2Context)+len(detailType)+len(timestamp)+len(payload)+3)
	b = append(b, EventV2Context...)
	b = append(b, '\n')
	b = append(b, detailType...)
	b = append(b, '\n')
	b = append(b, timestamp...)
	b = append(b, '\n')
	return append(b, payload...)
}

// SignEventV2 returns "v2=" + hex HMAC-SHA256(key, EventV2Canonical(...)).
func SignEventV2(key []byte, detailType, timestamp string, payload []byte) string {
	return eventV2Prefix + HMAC(key, EventV2Canonical(detailType, timestamp, payload))[len(hmacPrefix):]
}

// VerifyEventV2 checks a v2 event signature in constant time.
func VerifyEventV2(key []byte, detailType, timestamp string, payload []byte, signature string) bool {
	return verifyPrefixed(key, EventV2Canonical(detailType, timestamp, payload), signature, eventV2Prefix)
}

// EventTimestamp formats t as a v2 event timestamp.
func EventTimestamp(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

// EventDetailV2 returns the v2 detail of payload signed at `at`.
func EventDetailV2(key []byte, detailType string, at time.Time, payload []byte) ([]byte, error) {
	ts := EventTimestamp(at)
	return json.Marshal(contract.SignedDetail{Payload: string(payload), Timestamp: ts, Signature: SignEventV2(key, detailType, ts, payload)})
}

// EventCheck is what OpenEvent accepts.
type EventCheck struct {
	// Keys are tried in order (the current key first, then keys still
	// accepted during a rotation); keys shorter than MinHMACKeyBytes verify
	// nothing.
	Keys [][]byte
	// Now is the verifier's time for the v2 window.
	Now time.Time
	// MaxAge is the oldest accepted v2 timestamp; 0 means
	// DefaultEventMaxAge.
	MaxAge time.Duration
	// RefuseV1 refuses v1 signatures (after the migration to v2).
	RefuseV1 bool
}

// OpenEvent verifies a signed event detail of detailType and returns its
// payload and signature version (1 or 2). Nothing in the payload is read.
func OpenEvent(c EventCheck, detailType string, detail []byte) (payload string, version int, err error) {
	f, err := strictObject(detail)
	if err != nil {
		return "", 0, ErrEventMalformed
	}
	var sig, ts string
	if !jsonStr(f["payload"], &payload) || !jsonStr(f["signature"], &sig) {
		return "", 0, ErrEventMalformed
	}
	rawTS, hasTS := f["timestamp"]
	switch {
	case len(f) == 2 && !hasTS:
		if c.RefuseV1 || !anyKey(c.Keys, func(k []byte) bool { return VerifyHMAC(k, []byte(payload), sig) }) {
			return "", 0, ErrEventSignature
		}
		return payload, 1, nil
	case len(f) == 3 && hasTS:
		if !jsonStr(rawTS, &ts) {
			return "", 0, ErrEventMalformed
		}
		at, ok := parseTimestamp(ts)
		if !ok {
			return "", 0, ErrEventMalformed
		}
		if !anyKey(c.Keys, func(k []byte) bool { return VerifyEventV2(k, detailType, ts, []byte(payload), sig) }) {
			return "", 0, ErrEventSignature
		}
		maxAge := c.MaxAge
		if maxAge <= 0 {
			maxAge = DefaultEventMaxAge
		}
		if at.Before(c.Now.Add(-maxAge)) || at.After(c.Now.Add(EventMaxSkew)) {
			return "", 0, ErrEventStale
		}
		return payload, 2, nil
	}
	return "", 0, ErrEventMalformed
}

func anyKey(keys [][]byte, ok func([]byte) bool) bool {
	for _, k := range keys {
		if ok(k) {
			return true
		}
	}
	return false
}

// parseTimestamp reads decimal Unix seconds: digits only, no leading zero.
func parseTimestamp(s string) (time.Time, bool) {
	if s == "" || len(s) > maxTimestampDigits || s[0] == '0' {
		return time.Time{}, false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return time.Time{}, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(n, 0), true
}

func jsonStr(raw json.RawMessage, out *string) bool {
	return len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, out) == nil
}

// strictObject decodes one JSON object into its raw fields, refusing
// duplicate keys and trailing data.
func strictObject(body []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, ErrEventMalformed
	}
	fields := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, ErrEventMalformed
		}
		if _, dup := fields[key]; dup {
			return nil, ErrEventMalformed
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		fields[key] = bytes.TrimSpace(raw)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, ErrEventMalformed
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, ErrEventMalformed
	}
	return fields, nil
}
