package signing

import (
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"
)

// TestEventV2Vector checks the v2 signed-event contract against its data
// vector (testdata/event_v2.json): the canonical string, the signature,
// the exact detail a producer puts, and its verification.
func TestEventV2Vector(t *testing.T) {
	raw, err := os.ReadFile("testdata/event_v2.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		EventV2 struct {
			KeyHex     string `json:"key_hex"`
			DetailType string `json:"detail_type"`
			Timestamp  string `json:"timestamp"`
			Payload    string `json:"payload"`
			Canonical  string `json:"canonical"`
			Signature  string `json:"signature"`
			Detail     string `json:"detail"`
		} `json:"event_v2"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	v := file.EventV2
	if v.Signature == "" || v.Detail == "" {
		t.Fatal("vector not loaded")
	}
	key := mustHex(t, v.KeyHex)
	payload := []byte(v.Payload)
	if got := string(EventV2Canonical(v.DetailType, v.Timestamp, payload)); got != v.Canonical {
		t.Fatalf("canonical %q, want %q", got, v.Canonical)
	}
	if got := SignEventV2(key, v.DetailType, v.Timestamp, payload); got != v.Signature {
		t.Fatalf("signature %s, want %s", got, v.Signature)
	}
	secs, err := strconv.ParseInt(v.Timestamp, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(secs, 0)
	detail, err := EventDetailV2(key, v.DetailType, at, payload)
	if err != nil {
		t.Fatal(err)
	}
	if string(detail) != v.Detail {
		t.Fatalf("detail %s, want %s", detail, v.Detail)
	}
	check := EventCheck{Keys: [][]byte{key}, Now: at}
	got, version, err := OpenEvent(check, v.DetailType, []byte(v.Detail))
	if err != nil || version != 2 || got != v.Payload {
		t.Fatalf("OpenEvent = %q, v%d, %v; want the payload, v2", got, version, err)
	}
	if _, _, err := OpenEvent(check, "localeflow.job.completed", []byte(v.Detail)); !errors.Is(err, ErrEventSignature) {
		t.Fatalf("under another detail-type: %v, want ErrEventSignature", err)
	}
}
