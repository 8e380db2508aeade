package core

import (
	"strings"
	"testing"
)

func TestCanonicalizeJSON(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"sorts keys and drops whitespace", `{ "b": 1, "a": [true, false, null] }`, `{"a":[true,false,null],"b":1}`},
		{"nested objects sorted", `{"z":{"y":1,"x":2},"a":"s"}`, `{"a":"s","z":{"x":2,"y":1}}`},
		// RFC 8785 section 3.2.3: sorting by UTF-16 code units.
		{"utf16 key order", `{"\u20ac":1,"\r":2,"\ud83d\ude00":3,"1":4,"\u00f6":5}`, "{\"\\r\":2,\"1\":4,\"ö\":5,\"€\":1,\"😀\":3}"},
		{"integers stay integers", `{"n":7,"m":-0,"big":1e21,"small":1e-7}`, `{"big":1e+21,"m":0,"n":7,"small":1e-7}`},
		{"fractions shortest", `[0.5, 1.0, 100, 4.50, 2e-6]`, `[0.5,1,100,4.5,0.000002]`},
		{"control chars escaped", `"a\u0001\n\"\\/<"`, `"a\u0001\n\"\\/<"`},
		{"unicode kept literal", `"Gr\u00fc\u00dfe \u2028"`, "\"Grüße \u2028\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CanonicalizeJSON([]byte(tt.in))
			if err != nil {
				t.Fatalf("CanonicalizeJSON: %v", err)
			}
			if string(got) != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestCanonicalizeJSONRefusesInvalid(t *testing.T) {
	for _, in := range []string{
		`{"a":1,"a":2}`, // duplicate member
		`{"a":1} {}`,    // trailing value
		"\"\xff\"",      // invalid UTF-8
		`{"a":`,         // truncated
		`1e400`,         // not a finite double
		strings.Repeat("[", 100) + strings.Repeat("]", 100),
	} {
		if _, err := CanonicalizeJSON([]byte(in)); !HasCode(err, CodeCanonicalInvalid) {
			t.Errorf("CanonicalizeJSON(%q) error = %v, want %s", in, err, CodeCanonicalInvalid)
		}
	}
}

func TestHashCanonicalMatchesVector(t *testing.T) {
	// Body of the lifecycle_response test vector: its canonical form is the
	// body itself reordered, and the hash of the exact bytes is in the vector.
	body := `{"schema":"localeflow.cms-lifecycle.v1","request_id":"req-7f3a9c","event_id":"evt-2026-0001","site_id":"site-berlin","plan_id":"plan-42","website_version":"v2026.11.29","source_sequence":7,"status":"processing","required_locales":["de-DE","fr-FR"],"approved_locales":[],"blocked_locales":[],"queue_counts":{"pending":2},"delivery":null,"tombstone":null}`
	if got := SHA256Hex([]byte(body)); got != "ac250e450866c29e7154dd9b34a710ef9412e302a037a58188a7869fc2ba30d3" {
		t.Fatalf("SHA256Hex = %s", got)
	}
	c, err := CanonicalizeJSON([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(c), `{"approved_locales":[],"blocked_locales":[],"delivery":null,"event_id":"evt-2026-0001"`) {
		t.Fatalf("canonical = %s", c)
	}
}

func TestHashCanonicalStruct(t *testing.T) {
	type v struct {
		B int    `json:"b"`
		A string `json:"a"`
	}
	h1, err := HashCanonical(v{B: 1, A: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if h1 != SHA256Hex([]byte(`{"a":"x","b":1}`)) {
		t.Fatalf("HashCanonical = %s", h1)
	}
}

func FuzzCanonicalizeJSON(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,2.5,"x"]}`, `"\u0000"`, `[1e300,-0]`, `{"a":{"b":null}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := CanonicalizeJSON(in)
		if err != nil {
			if code := CodeOf(err); code != CodeCanonicalInvalid && code != CodeCanonicalLoneSurrogate {
				t.Fatalf("error without code: %v", err)
			}
			return
		}
		again, err := CanonicalizeJSON(out)
		if err != nil {
			t.Fatalf("canonical output not canonicalizable: %q: %v", out, err)
		}
		if string(again) != string(out) {
			t.Fatalf("not idempotent: %q -> %q", out, again)
		}
	})
}

// BenchmarkCanonicalizeJSON measures canonicalizing a lifecycle-sized body
// (the monitor hashes one per completed poll).
func BenchmarkCanonicalizeJSON(b *testing.B) {
	body := []byte(`{"schema":"localeflow.cms-lifecycle.v1","request_id":"req-7f3a9c","event_id":"evt-2026-0001","site_id":"site-berlin","plan_id":"plan-42","website_version":"v2026.11.29","source_sequence":7,"status":"processing","required_locales":["de-DE","fr-FR","it-IT","es-ES"],"approved_locales":["de-DE"],"blocked_locales":[["fr-FR","cms.legal_hold"]],"queue_counts":{"pending":2,"done":1},"delivery":null,"tombstone":null}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := CanonicalizeJSON(body); err != nil {
			b.Fatal(err)
		}
	}
}
