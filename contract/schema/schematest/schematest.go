// Package schematest validates documents against the embedded JSON
// Schemas of package schema (draft 2020-12). It is for tests only: the
// functions never link it. The test doubles of the event bus validate
// every detail they are given with ValidateDetail, so every output the
// handlers' tests publish is checked against its detail-type's schema,
// and an output also against the schema's strict variant (exactly the
// members listed: the published output schemas are additive).
package schematest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/localeflow/localeflow/contract/schema"
)

var (
	once     sync.Once
	compiled map[string]*jsonschema.Schema
	errOnce  error
)

// Schemas compiles every schema file once, by file name.
func Schemas() (map[string]*jsonschema.Schema, error) {
	once.Do(func() { compiled, errOnce = compile() })
	return compiled, errOnce
}

func compile() (map[string]*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	for _, name := range schema.Names() {
		raw, err := schema.Read(name)
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if err := c.AddResource(name, doc); err != nil {
			return nil, err
		}
	}
	// The strict variants of the output schemas: the published ones are
	// additive (consumers ignore members they do not know), localeflow's
	// own outputs carry exactly the members listed.
	for _, name := range schema.Outputs {
		raw, err := schema.Read(name)
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		m["$id"] = fmt.Sprint(m["$id"]) + ":strict"
		m["additionalProperties"] = false
		strict, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(strict))
		if err != nil {
			return nil, err
		}
		if err := c.AddResource(strictPrefix+name, doc); err != nil {
			return nil, err
		}
	}
	out := map[string]*jsonschema.Schema{}
	for _, name := range schema.Names() {
		s, err := c.Compile(name)
		if err != nil {
			return nil, err
		}
		out[name] = s
	}
	for _, name := range schema.Outputs {
		s, err := c.Compile(strictPrefix + name)
		if err != nil {
			return nil, err
		}
		out[strictPrefix+name] = s
	}
	return out, nil
}

// strictPrefix names the strict variant of an output schema.
const strictPrefix = "strict:"

// ValidateStrict checks doc against an output schema's strict variant
// (exactly its members; the published schema accepts additive ones).
func ValidateStrict(name string, doc []byte) error { return Validate(strictPrefix+name, doc) }

// Validate checks doc against the named schema file.
func Validate(name string, doc []byte) error {
	all, err := Schemas()
	if err != nil {
		return err
	}
	s, ok := all[name]
	if !ok {
		return fmt.Errorf("no schema %s", name)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return err
	}
	return s.Validate(inst)
}

// ValidateDetail checks an event detail against its detail-type's schema
// (for a signed input, the envelope).
func ValidateDetail(detailType string, detail []byte) error {
	name, ok := schema.ForDetailType[detailType]
	if !ok {
		return fmt.Errorf("no schema for detail-type %q", detailType)
	}
	if err := Validate(name, detail); err != nil {
		return fmt.Errorf("%s detail %s: %w", detailType, detail, err)
	}
	if slices.Contains(schema.Outputs, name) {
		if err := ValidateStrict(name, detail); err != nil {
			return fmt.Errorf("%s detail %s (exact members): %w", detailType, detail, err)
		}
	}
	return nil
}
