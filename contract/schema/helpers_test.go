package schema_test

import (
	"bytes"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/localeflow/localeflow/contract/schema/schematest"
)

// schemas compiles every schema file once (draft 2020-12).
func schemas(t *testing.T) map[string]*jsonschema.Schema {
	t.Helper()
	compiled, err := schematest.Schemas()
	if err != nil {
		t.Fatalf("compile schemas: %v", err)
	}
	return compiled
}

// validate checks doc against the named schema and returns the error.
func validate(t *testing.T, name string, doc []byte) error {
	t.Helper()
	s, ok := schemas(t)[name]
	if !ok {
		t.Fatalf("no schema %s", name)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return err
	}
	return s.Validate(inst)
}

// mustValidate fails the test when doc does not validate against name.
func mustValidate(t *testing.T, name string, doc []byte) {
	t.Helper()
	if err := validate(t, name, doc); err != nil {
		t.Fatalf("%s refuses %s: %v", name, doc, err)
	}
}
