package schema_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/localeflow/localeflow/contract/schema"
	"github.com/localeflow/localeflow/contract/schema/schematest"
)

// TestOutputSchemasAreAdditive: a consumer validating an output with the
// published schema keeps working when a later localeflow adds a member
// (docs/integrating.md "Consuming output events": ignore members you do
// not know); the strict variant localeflow's own tests use refuses it.
func TestOutputSchemasAreAdditive(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "vectors", "output_events.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Vectors []struct {
			Name       string          `json:"name"`
			DetailType string          `json:"detail_type"`
			Detail     json.RawMessage `json:"detail"`
		} `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, v := range f.Vectors {
		detail := []byte(v.Detail)
		var s string
		if json.Unmarshal(v.Detail, &s) == nil {
			detail = []byte(s)
		}
		var m map[string]any
		if err := json.Unmarshal(detail, &m); err != nil {
			t.Fatal(err)
		}
		m["a_member_added_later"] = map[string]any{"any": "value"}
		extended, _ := json.Marshal(m)
		name := schema.ForDetailType[v.DetailType]
		if !slices.Contains(schema.Outputs, name) {
			t.Fatalf("%s: %s is not an output schema", v.Name, name)
		}
		seen[name] = true
		if err := schematest.Validate(name, detail); err != nil {
			t.Errorf("%s: %v", v.Name, err)
		}
		if err := schematest.Validate(name, extended); err != nil {
			t.Errorf("%s with an added member: the published schema refuses it: %v", v.Name, err)
		}
		if err := schematest.ValidateStrict(name, extended); err == nil {
			t.Errorf("%s with an added member: the strict variant accepts it", v.Name)
		}
	}
	if len(seen) != len(schema.Outputs) {
		t.Errorf("output vectors cover %d of %d output schemas", len(seen), len(schema.Outputs))
	}
}
