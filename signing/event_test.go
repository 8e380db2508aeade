package signing

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

var evKey = []byte("event-key-0123456789abcdef")

// TestEventV2SignatureCoversTypeAndTimestamp pins the v2 canonical string
// and signature against an independent HMAC computation.
func TestEventV2SignatureCoversTypeAndTimestamp(t *testing.T) {
	payload := []byte(`{"event":{"event_id":"evt-1"}}`)
	canonical := "localeflow.event.v2\nlocaleflow.plan.accepted\n1764460800\n" + string(payload)
	if got := string(EventV2Canonical("localeflow.plan.accepted", "1764460800", payload)); got != canonical {
		t.Fatalf("canonical %q", got)
	}
	mac := hmac.New(sha256.New, evKey)
	mac.Write([]byte(canonical))
	want := "v2=" + hex.EncodeToString(mac.Sum(nil))
	if got := SignEventV2(evKey, "localeflow.plan.accepted", "1764460800", payload); got != want {
		t.Fatalf("signature %s, want %s", got, want)
	}
}

func TestOpenEvent(t *testing.T) {
	now := time.Unix(1764460800, 0)
	payload := []byte(`{"x":1}`)
	v2 := func(dt string, at time.Time, key []byte) []byte {
		d, err := EventDetailV2(key, dt, at, payload)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	v1, _ := json.Marshal(map[string]string{"payload": string(payload), "signature": SignEvent(evKey, payload)})
	other := []byte("another-key-0123456789")
	check := EventCheck{Keys: [][]byte{evKey}, Now: now}
	tests := []struct {
		name    string
		check   EventCheck
		dt      string
		detail  []byte
		version int
		err     error
	}{
		{"v2 now", check, "a", v2("a", now, evKey), 2, nil},
		{"v2 replayed as another detail-type", check, "b", v2("a", now, evKey), 0, ErrEventSignature},
		{"v2 older than the window", check, "a", v2("a", now.Add(-DefaultEventMaxAge-time.Second), evKey), 0, ErrEventStale},
		{"v2 at the window's edge", check, "a", v2("a", now.Add(-DefaultEventMaxAge), evKey), 2, nil},
		{"v2 shorter window", EventCheck{Keys: check.Keys, Now: now, MaxAge: time.Hour}, "a", v2("a", now.Add(-2*time.Hour), evKey), 0, ErrEventStale},
		{"v2 from the future", check, "a", v2("a", now.Add(EventMaxSkew+time.Second), evKey), 0, ErrEventStale},
		{"v2 other key", check, "a", v2("a", now, other), 0, ErrEventSignature},
		{"v2 previous key in the set", EventCheck{Keys: [][]byte{evKey, other}, Now: now}, "a", v2("a", now, other), 2, nil},
		{"v1 during migration", check, "a", v1, 1, nil},
		{"v1 refused after migration", EventCheck{Keys: check.Keys, Now: now, RefuseV1: true}, "a", v1, 0, ErrEventSignature},
		{"v1 signature with a timestamp", check, "a", []byte(`{"payload":"{\"x\":1}","timestamp":"1764460800","signature":"` + SignEvent(evKey, payload) + `"}`), 0, ErrEventSignature},
		{"timestamp with leading zero", check, "a", []byte(`{"payload":"{}","timestamp":"01764460800","signature":"v2=00"}`), 0, ErrEventMalformed},
		{"numeric timestamp", check, "a", []byte(`{"payload":"{}","timestamp":1764460800,"signature":"v2=00"}`), 0, ErrEventMalformed},
		{"duplicate payload", check, "a", []byte(`{"payload":"{}","payload":"{}","signature":"v1=00"}`), 0, ErrEventMalformed},
		{"extra key", check, "a", []byte(`{"payload":"{}","signature":"v1=00","kid":"k"}`), 0, ErrEventMalformed},
		{"trailing data", check, "a", append(append([]byte{}, v1...), '1'), 0, ErrEventMalformed},
		{"short key", EventCheck{Keys: [][]byte{[]byte("k")}, Now: now}, "a", v2("a", now, []byte("k")), 0, ErrEventSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, version, err := OpenEvent(tt.check, tt.dt, tt.detail)
			if !errors.Is(err, tt.err) || (tt.err == nil && err != nil) {
				t.Fatalf("err %v, want %v", err, tt.err)
			}
			if tt.err == nil && (got != string(payload) || version != tt.version) {
				t.Fatalf("payload %q version %d", got, version)
			}
		})
	}
}
