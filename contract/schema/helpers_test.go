package schema_test

import (
	"bytes"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/localeflow/localeflow/contract/schema"
)

var (
	compileOnce sync.Once
	compiled    map[string]*jsonschema.Schema
	errCompile  error
)

// schemas compiles every schema file once (draft 2020-12).
func schemas(t *testing.T) map[string]*jsonschema.Schema {
	t.Helper()
	compileOnce.Do(func() {
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		compiled = map[string]*jsonschema.Schema{}
		for _, name := range schema.Names() {
			raw, err := schema.Read(name)
			if err != nil {
				errCompile = err
				return
			}
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
			if err != nil {
				errCompile = err
				return
			}
			if err := c.AddResource(name, doc); err != nil {
				errCompile = err
				return
			}
		}
		for _, name := range schema.Names() {
			s, err := c.Compile(name)
			if err != nil {
				errCompile = err
				return
			}
			compiled[name] = s
		}
	})
	if errCompile != nil {
		t.Fatalf("compile schemas: %v", errCompile)
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
