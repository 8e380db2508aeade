package schema_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/contract/schema"
	"github.com/localeflow/localeflow/contract/schema/schematest"
)

// registryDetails are detail documents per detail-type: the valid ones of
// the vectors and a hint, then every variant mutate makes of each.
func registryDetails(t *testing.T) map[string][][]byte {
	t.Helper()
	out := map[string][][]byte{}
	read := func(name string) []map[string]any {
		raw, err := os.ReadFile(filepath.Join("..", "testdata", "vectors", name))
		if err != nil {
			t.Fatal(err)
		}
		var f struct {
			Vectors []map[string]any `json:"vectors"`
		}
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatal(err)
		}
		return f.Vectors
	}
	for _, v := range read("event_signature.json") {
		dt, _ := v["detail_type"].(string)
		d, _ := v["detail"].(string)
		var obj map[string]any
		// Details that are not one JSON object (trailing data, …) are
		// the consumer's strict parser's business, not a schema's.
		if dt != "" && json.Valid([]byte(d)) && json.Unmarshal([]byte(d), &obj) == nil {
			out[dt] = append(out[dt], []byte(d))
		}
	}
	for _, v := range read("output_events.json") {
		out[v["detail_type"].(string)] = append(out[v["detail_type"].(string)], []byte(v["detail"].(string)))
	}
	out[contract.DetailChangeHint] = append(out[contract.DetailChangeHint], []byte(`{"event_id":"evt-1","site_id":"site-1"}`))
	out[contract.DetailHealthBlocked] = append(out[contract.DetailHealthBlocked],
		[]byte(`{"schema":"localeflow.health.v1","checked_at_ms":1,"reasons":["monitor.failed"],"monitor":{},"release":{}}`),
		[]byte(`{"schema":"localeflow.health.v1","checked_at_ms":1,"reasons":["monitor.failed"],"monitor":{}}`))
	for dt, docs := range out {
		for _, d := range docs {
			out[dt] = append(out[dt], mutate(t, d)...)
		}
	}
	return out
}

// mutate returns variants of a detail object: each member removed, each
// member replaced by a number, a string, null, an array, and an unknown
// member added.
func mutate(t *testing.T, doc []byte) [][]byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	add := func(v map[string]any) {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, raw)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, repl := range []any{nil, 7, -1, "x", "localeflow.health.v1", []any{}, []any{"a", "a"}, map[string]any{}, "delete"} {
			c := map[string]any{}
			for kk, vv := range m {
				c[kk] = vv
			}
			if repl == "delete" {
				delete(c, k)
			} else {
				c[k] = repl
			}
			add(c)
		}
	}
	c := map[string]any{"member_added_later": 1}
	for k, v := range m {
		c[k] = v
	}
	add(c)
	return out
}

// TestRegistrySchemasAgreeWithTheContract: the draft-4 content registered
// for each detail-type accepts exactly the events whose detail the repo's
// 2020-12 schema accepts, over the vectors' details and many variants of
// each (so the conversion keeps the meaning, not just the text).
func TestRegistrySchemasAgreeWithTheContract(t *testing.T) {
	details := registryDetails(t)
	all := append(append([]string{}, contract.InputDetailTypes...), contract.OutputDetailTypes...)
	for _, dt := range all {
		content, err := schema.RegistrySchema(contract.EventSource, dt)
		if err != nil {
			t.Fatal(err)
		}
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft4)
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(content))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.AddResource("registry.json", doc); err != nil {
			t.Fatal(err)
		}
		s, err := c.Compile("registry.json")
		if err != nil {
			t.Fatalf("%s: %v", dt, err)
		}
		if len(details[dt]) == 0 {
			t.Fatalf("%s: no details to compare", dt)
		}
		valid, invalid := 0, 0
		for _, d := range details[dt] {
			// The published schema (additive outputs), not the strict
			// variant localeflow's own outputs are held to.
			want := schematest.Validate(schema.ForDetailType[dt], d) == nil
			event := fmt.Sprintf(`{"version":"0","id":"e-1","detail-type":%q,"source":"localeflow","account":"123456789012","time":"2026-12-01T00:00:00Z","region":"eu-west-1","resources":[],"detail":%s}`, dt, d)
			inst, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(event)))
			if err != nil {
				t.Fatal(err)
			}
			got := s.Validate(inst) == nil
			if got != want {
				t.Errorf("%s: detail %s: registry schema says valid=%v, the contract's %v", dt, d, got, want)
			}
			if want {
				valid++
			} else {
				invalid++
			}
		}
		if valid == 0 || invalid == 0 {
			t.Errorf("%s: %d valid and %d invalid details compared: both kinds needed", dt, valid, invalid)
		}
		// The envelope binds the detail-type and the source.
		for _, wrong := range []string{
			fmt.Sprintf(`{"detail-type":"localeflow.other","source":"localeflow","detail":%s}`, details[dt][0]),
			fmt.Sprintf(`{"detail-type":%q,"source":"other","detail":%s}`, dt, details[dt][0]),
		} {
			inst, _ := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(wrong)))
			if s.Validate(inst) == nil {
				t.Errorf("%s: %s accepted", dt, wrong)
			}
		}
	}
}

// TestRegistrySchemaRefusesWhatItCannotConvert: a keyword without a
// draft-4 conversion is an error, not a silently dropped rule.
func TestRegistrySchemaRefusesWhatItCannotConvert(t *testing.T) {
	for _, s := range []string{
		`{"prefixItems": [{"type": "string"}]}`,
		`{"properties": {"a": {"unevaluatedProperties": false}}}`,
		`{"$ref": "other.schema.json"}`,
	} {
		var v any
		_ = json.Unmarshal([]byte(s), &v)
		if _, err := schema.Draft4ForTest(v); err == nil {
			t.Errorf("%s converted", s)
		}
	}
	if got := schema.DefinitionName("change-terminal.schema.json"); got != "ChangeTerminal" {
		t.Fatalf("DefinitionName %q", got)
	}
}
