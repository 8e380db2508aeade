package localeflow

import (
	"encoding/json"
	"reflect"
	"sort"
	"testing"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/contract/schema"
)

// TestEventSchemaRegistry: one registry (<prefix>-events) and exactly one
// AWS::EventSchemas::Schema per input and output detail-type, each of the
// type the registry takes, in that registry, whose content is the repo's
// schema file converted (so it cannot drift from contract/schema): the
// envelope binds source and detail-type, and the detail definition has
// the file's members, required members and member schemas' keywords.
func TestEventSchemaRegistry(t *testing.T) {
	s := synth(t, func() *Props { p := testProps(); p.Prefix = "lf-reg"; return p }())
	s.count(t, "AWS::EventSchemas::Registry", 1)
	regID := s.logicalID(t, "AWS::EventSchemas::Registry", "EventSchemaRegistry")
	if got := s.resources("AWS::EventSchemas::Registry")[regID]["Properties"].(map[string]any)["RegistryName"]; got != "lf-reg-events" {
		t.Fatalf("registry name %v", got)
	}
	all := append(append([]string{}, contract.InputDetailTypes...), contract.OutputDetailTypes...)
	schemas := s.resources("AWS::EventSchemas::Schema")
	if len(schemas) != len(all) {
		t.Fatalf("%d schemas, want one per detail-type (%d)", len(schemas), len(all))
	}
	byName := map[string]map[string]any{}
	for id, r := range schemas {
		p := r["Properties"].(map[string]any)
		name, _ := p["SchemaName"].(string)
		if byName[name] != nil {
			t.Fatalf("schema name %s twice", name)
		}
		byName[name] = p
		if !jsonEqual(p["RegistryName"], getAtt(regID, "RegistryName")) {
			t.Errorf("%s: registry %v", id, p["RegistryName"])
		}
		if p["Type"] != "JSONSchemaDraft4" {
			t.Errorf("%s: type %v", id, p["Type"])
		}
	}
	for _, dt := range all {
		p := byName["localeflow@"+dt]
		if p == nil {
			t.Errorf("no schema for %s (have %v)", dt, keys(byName))
			continue
		}
		want, err := schema.RegistrySchema(contract.EventSource, dt)
		if err != nil {
			t.Fatal(err)
		}
		content, _ := p["Content"].(string)
		if content != string(want) {
			t.Errorf("%s: content is not the converted contract/schema file", dt)
		}
		// Independently of the conversion: the envelope and the detail's
		// members against the repo's schema file.
		var c struct {
			Source      string                    `json:"x-amazon-events-source"`
			DetailType  string                    `json:"x-amazon-events-detail-type"`
			Properties  map[string]map[string]any `json:"properties"`
			Definitions map[string]map[string]any `json:"definitions"`
		}
		if err := json.Unmarshal([]byte(content), &c); err != nil {
			t.Fatalf("%s: %v", dt, err)
		}
		file := schema.ForDetailType[dt]
		def := schema.DefinitionName(file)
		if c.Source != "localeflow" || c.DetailType != dt || c.Properties["detail"]["$ref"] != "#/definitions/"+def {
			t.Errorf("%s: envelope %s %s %v", dt, c.Source, c.DetailType, c.Properties["detail"])
		}
		raw, err := schema.Read(file)
		if err != nil {
			t.Fatal(err)
		}
		var repo map[string]any
		if err := json.Unmarshal(raw, &repo); err != nil {
			t.Fatal(err)
		}
		got := c.Definitions[def]
		for _, k := range []string{"type", "required", "additionalProperties", "title", "description"} {
			if !reflect.DeepEqual(got[k], repo[k]) {
				t.Errorf("%s: %s %v, the repo's %v", dt, k, got[k], repo[k])
			}
		}
		if !reflect.DeepEqual(keys(asMap(got["properties"])), keys(asMap(repo["properties"]))) {
			t.Errorf("%s: members %v, the repo's %v", dt, keys(asMap(got["properties"])), keys(asMap(repo["properties"])))
		}
		if len(asList(got["oneOf"])) != len(asList(repo["oneOf"])) {
			t.Errorf("%s: oneOf %d branches, the repo's %d", dt, len(asList(got["oneOf"])), len(asList(repo["oneOf"])))
		}
	}
}

func asMap(v any) map[string]any { m, _ := v.(map[string]any); return m }

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
