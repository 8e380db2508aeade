package schema_test

import (
	"encoding/json"
	"testing"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/contract/schema"
)

func TestEverySchemaCompilesAndIsDraft2020(t *testing.T) {
	names := schema.Names()
	if len(names) != 17 {
		t.Fatalf("%d schema files, want 17: %v", len(names), names)
	}
	for _, name := range names {
		raw, _ := schema.Read(name)
		var head struct {
			Schema string `json:"$schema"`
			ID     string `json:"$id"`
			Title  string `json:"title"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if head.Schema != "https://json-schema.org/draft/2020-12/schema" || head.ID != "urn:localeflow:schema:"+name[:len(name)-len(schema.Suffix)] || head.Title == "" {
			t.Errorf("%s: $schema %q, $id %q, title %q", name, head.Schema, head.ID, head.Title)
		}
	}
	_ = schemas(t)
}

func TestEveryDetailTypeHasASchema(t *testing.T) {
	all := append(append([]string(nil), contract.InputDetailTypes...), contract.OutputDetailTypes...)
	if len(all) != len(schema.ForDetailType) {
		t.Fatalf("%d detail-types, %d schemas", len(all), len(schema.ForDetailType))
	}
	for _, dt := range all {
		name, ok := schema.ForDetailType[dt]
		if !ok {
			t.Errorf("%s has no schema", dt)
			continue
		}
		if _, ok := schemas(t)[name]; !ok {
			t.Errorf("%s: schema %s missing", dt, name)
		}
	}
	for dt, name := range schema.PayloadFor {
		if schema.ForDetailType[dt] != schema.SignedEvent {
			t.Errorf("%s has a payload schema but no signed envelope", dt)
		}
		if _, ok := schemas(t)[name]; !ok {
			t.Errorf("%s: schema %s missing", dt, name)
		}
	}
}
