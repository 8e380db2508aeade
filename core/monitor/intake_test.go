package monitor_test

import (
	"strings"
	"testing"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
)

func TestParseDispatched(t *testing.T) {
	good := detail(t, "evt-1", "enqueued")
	d, err := monitor.ParseDispatched([]byte(good))
	if err != nil {
		t.Fatalf("ParseDispatched: %v", err)
	}
	if d.Dispatch.RemoteJobCount != 2 || d.Dispatch.RemotePlanID != "plan-42" || d.Dispatch.EventID != "evt-1" {
		t.Fatalf("dispatch = %+v", d.Dispatch)
	}
	replace := func(old, new string) string {
		t.Helper()
		if !strings.Contains(good, old) {
			t.Fatalf("fixture lacks %q", old)
		}
		return strings.Replace(good, old, new, 1)
	}
	tests := []struct {
		name, in, code string
	}{
		{"not json", `{`, monitor.CodeChangeInvalid},
		{"not an object", `[]`, monitor.CodeChangeInvalid},
		{"duplicate key", replace(`{"change":`, `{"change":{},"change":`), monitor.CodeChangeInvalid},
		{"extra top key", replace(`{"change":`, `{"x":1,"change":`), monitor.CodeChangeInvalid},
		{"change not object", `{"change":[],"dispatch":{}}`, monitor.CodeChangeInvalid},
		{"dispatch missing", `{"change":{},"other":{}}`, monitor.CodeDispatchInvalid},
		{"dispatch not object", strings.Replace(good, `"dispatch":{`, `"dispatch":[{`, 1) + "]", monitor.CodeChangeInvalid},
		{"change event id missing", replace(`"event_id":"evt-1","site_id"`, `"site_id"`), monitor.CodeChangeInvalid},
		{"change event id not token", replace(`{"event_id":"evt-1"`, `{"event_id":"evt 1"`), monitor.CodeChangeInvalid},
		{"site id not token", replace(`"site-berlin"`, `"site/berlin"`), monitor.CodeChangeInvalid},
		{"site id number", replace(`"site-berlin"`, `5`), monitor.CodeChangeInvalid},
		{"website version empty", replace(`"v2026.11.29"`, `""`), monitor.CodeChangeInvalid},
		// The payload hash binds the exact change: any edit to it breaks it.
		{"change edited", replace(`"hashed only"`, `"edited"`), monitor.CodeDispatchInvalid},
		{"source sequence zero", replace(`"source_sequence":7`, `"source_sequence":0`), monitor.CodeDispatchInvalid},
		{"source sequence bool", replace(`"source_sequence":7`, `"source_sequence":true`), monitor.CodeDispatchInvalid},
		{"source sequence float", replace(`"source_sequence":7`, `"source_sequence":7.0`), monitor.CodeDispatchInvalid},
		{"source sequence string", replace(`"source_sequence":7`, `"source_sequence":"7"`), monitor.CodeDispatchInvalid},
		{"source sequence negative", replace(`"source_sequence":7`, `"source_sequence":-7`), monitor.CodeDispatchInvalid},
		{"source sequence huge", replace(`"source_sequence":7`, `"source_sequence":9007199254740993`), monitor.CodeDispatchInvalid},
		{"dispatch event differs", replace(`"dispatch":{"event_id":"evt-1"`, `"dispatch":{"event_id":"evt-2"`), monitor.CodeDispatchInvalid},
		{"status not succeeded", replace(`"succeeded"`, `"failed"`), monitor.CodeDispatchInvalid},
		{"plan id not token", replace(`"plan-42"`, `"plan 42"`), monitor.CodeDispatchInvalid},
		{"job count zero", replace(`"remote_job_count":2`, `"remote_job_count":0`), monitor.CodeDispatchInvalid},
		{"job count bool", replace(`"remote_job_count":2`, `"remote_job_count":true`), monitor.CodeDispatchInvalid},
		{"job count float", replace(`"remote_job_count":2`, `"remote_job_count":2.5`), monitor.CodeDispatchInvalid},
		{"job count exponent", replace(`"remote_job_count":2`, `"remote_job_count":2e0`), monitor.CodeDispatchInvalid},
		{"remote status unknown", replace(`"enqueued"`, `"published"`), monitor.CodeDispatchInvalid},
		{"response hash short", replace(`"response_sha256":"`, `"response_sha256":"0`), monitor.CodeDispatchInvalid},
		{"payload hash missing", replace(`"payload_sha256":`, `"payload_sha":`), monitor.CodeDispatchInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := monitor.ParseDispatched([]byte(tt.in)); !core.HasCode(err, tt.code) {
				t.Fatalf("ParseDispatched = %v, want %s", err, tt.code)
			}
		})
	}
}

func FuzzParseDispatched(f *testing.F) {
	f.Add([]byte(detail(f, "evt-1", "enqueued")))
	f.Add([]byte(detail(f, "evt-2", "cancelled")))
	f.Add([]byte(`{"change":{},"dispatch":{}}`))
	f.Add([]byte(`{"change":{"event_id":"e","site_id":"s","website_version":"v","source_sequence":1e3},"dispatch":{"remote_job_count":1.0}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		d, err := monitor.ParseDispatched(in)
		if err != nil {
			if c := core.CodeOf(err); c != monitor.CodeChangeInvalid && c != monitor.CodeDispatchInvalid {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		// Whatever parses must register, and registering twice is idempotent.
		b := setup(t, monitor.Config{})
		first, err := b.svc.Register(t.Context(), d)
		if err != nil {
			t.Fatalf("Register of a parsed detail: %v", err)
		}
		again, err := b.svc.Register(t.Context(), d)
		if err != nil || again.BindingSHA256 != first.BindingSHA256 {
			t.Fatalf("second Register = %+v, %v", again, err)
		}
		if !core.ValidToken(first.EventID) || first.JobCount <= 0 || first.SourceSequence <= 0 {
			t.Fatalf("registered invalid identity %+v", first)
		}
	})
}
