package monitor_test

import (
	"testing"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
)

func TestParseHint(t *testing.T) {
	tests := []struct {
		name, in string
		ok       bool
	}{
		{"valid", `{"event_id":"evt-1","site_id":"site-berlin"}`, true},
		{"member order free", `{"site_id":"site-berlin","event_id":"evt-1"}`, true},
		{"extra member (a status is never taken)", `{"event_id":"evt-1","site_id":"s","status":"published"}`, false},
		{"missing site", `{"event_id":"evt-1"}`, false},
		{"duplicate member", `{"event_id":"evt-1","event_id":"evt-2"}`, false},
		{"not a token", `{"event_id":"evt 1","site_id":"s"}`, false},
		{"number", `{"event_id":1,"site_id":"s"}`, false},
		{"null", `{"event_id":null,"site_id":"s"}`, false},
		{"array", `[]`, false},
		{"empty", ``, false},
		{"trailing data", `{"event_id":"e","site_id":"s"} {}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := monitor.ParseHint([]byte(tt.in))
			if tt.ok {
				if err != nil || d.EventID == "" || d.SiteID == "" {
					t.Fatalf("ParseHint = %+v, %v", d, err)
				}
				return
			}
			if !core.HasCode(err, monitor.CodeHintInvalid) || core.IsRetryable(err) {
				t.Fatalf("ParseHint = %+v, %v; want %s", d, err, monitor.CodeHintInvalid)
			}
		})
	}
}

func FuzzParseHint(f *testing.F) {
	f.Add([]byte(`{"event_id":"evt-1","site_id":"site-berlin"}`))
	f.Add([]byte(`{"event_id":"evt-1","site_id":"site-berlin","x":1}`))
	f.Add([]byte(`{"event_id":"\ud800","site_id":"s"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		d, err := monitor.ParseHint(in)
		if err != nil {
			if !core.HasCode(err, monitor.CodeHintInvalid) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if !core.ValidToken(d.EventID) || !core.ValidToken(d.SiteID) {
			t.Fatalf("parsed invalid identity %+v", d)
		}
	})
}
