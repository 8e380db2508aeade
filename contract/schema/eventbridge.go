package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// EventBridge's schema registry takes OpenApi3 or JSONSchemaDraft4
// content, not draft 2020-12. RegistrySchema converts a detail-type's
// schema file to one JSONSchemaDraft4 document of the whole event, in the
// form the registry's code bindings read: the EventBridge envelope with
// x-amazon-events-source and x-amazon-events-detail-type at the root and
// the detail as a definition. The conversion is keyword by keyword and
// keeps the meaning: $defs → definitions (references rewritten), const →
// a one-value enum, dependentRequired → dependencies, $schema/$id
// dropped; any other keyword these files do not use yet is an error, so a
// schema change that the conversion cannot carry fails the build instead
// of drifting.

// RegistrySchemaType is the AWS::EventSchemas::Schema Type of the content.
const RegistrySchemaType = "JSONSchemaDraft4"

// RegistrySchemaName is the registry's name of a detail-type's schema:
// "<source>@<detail-type>", as EventBridge names discovered schemas.
func RegistrySchemaName(source, detailType string) string { return source + "@" + detailType }

// keywords the conversion carries unchanged (draft 4 has them with the
// same meaning).
var sameKeywords = map[string]bool{
	"title": true, "description": true, "type": true, "enum": true, "pattern": true, "minimum": true, "maximum": true,
	"minLength": true, "maxLength": true, "minItems": true, "maxItems": true, "uniqueItems": true, "required": true,
	"additionalProperties": true, "oneOf": true, "anyOf": true, "allOf": true, "not": true, "items": true, "properties": true,
}

// RegistrySchema returns the draft-4 content for detailType, whose detail
// is the schema file ForDetailType names (source is the events' source).
func RegistrySchema(source, detailType string) ([]byte, error) {
	name, ok := ForDetailType[detailType]
	if !ok {
		return nil, fmt.Errorf("schema: no schema for detail-type %q", detailType)
	}
	raw, err := Read(name)
	if err != nil {
		return nil, err
	}
	var root map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("schema: %s: %w", name, err)
	}
	def := DefinitionName(name)
	definitions := map[string]any{}
	if defs, ok := root["$defs"].(map[string]any); ok {
		for k, v := range defs {
			c, err := draft4(v, def, name+" $defs/"+k)
			if err != nil {
				return nil, err
			}
			definitions[def+"_"+k] = c
		}
	}
	detail, err := draft4(root, def, name)
	if err != nil {
		return nil, err
	}
	definitions[def] = detail
	str := map[string]any{"type": "string"}
	doc := map[string]any{
		"$schema":                     "http://json-schema.org/draft-04/schema#",
		"title":                       detailType,
		"description":                 "A " + detailType + " event as EventBridge delivers it; its detail is contract/schema/" + name + " (draft 2020-12), converted to draft 4.",
		"x-amazon-events-source":      source,
		"x-amazon-events-detail-type": detailType,
		"type":                        "object",
		"required":                    []any{"detail-type", "source", "detail"},
		"properties": map[string]any{
			"version": str, "id": str, "account": str, "time": str, "region": str,
			"resources":   map[string]any{"type": "array", "items": str},
			"source":      map[string]any{"enum": []any{source}},
			"detail-type": map[string]any{"enum": []any{detailType}},
			"detail":      map[string]any{"$ref": "#/definitions/" + def},
		},
		"definitions": definitions,
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// DefinitionName is the definition (and code binding class) name of a
// schema file: "change-terminal.schema.json" → "ChangeTerminal".
func DefinitionName(file string) string {
	base := strings.TrimSuffix(file, Suffix)
	var b strings.Builder
	for _, part := range strings.FieldsFunc(base, func(r rune) bool { return r == '-' || r == '.' }) {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

// draft4 converts one schema object (def prefixes the definitions its
// $defs became).
func draft4(v any, def, at string) (any, error) {
	s, ok := v.(map[string]any)
	if !ok {
		if b, isBool := v.(bool); isBool {
			return b, nil
		}
		return nil, fmt.Errorf("schema: %s: a schema must be an object", at)
	}
	out := map[string]any{}
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		val := s[k]
		switch k {
		case "$schema", "$id", "$defs":
			// the root's; $defs became definitions
		case "$ref":
			ref, _ := val.(string)
			name, ok := strings.CutPrefix(ref, "#/$defs/")
			if !ok || strings.Contains(name, "/") {
				return nil, fmt.Errorf("schema: %s: $ref %q is not a local $defs reference", at, ref)
			}
			out["$ref"] = "#/definitions/" + def + "_" + name
		case "const":
			out["enum"] = []any{val}
		case "dependentRequired":
			out["dependencies"] = val
		case "properties":
			props, _ := val.(map[string]any)
			converted := map[string]any{}
			for name, p := range props {
				c, err := draft4(p, def, at+" properties/"+name)
				if err != nil {
					return nil, err
				}
				converted[name] = c
			}
			out[k] = converted
		case "items", "additionalProperties", "not":
			c, err := draft4(val, def, at+" "+k)
			if err != nil {
				return nil, err
			}
			out[k] = c
		case "oneOf", "anyOf", "allOf":
			list, _ := val.([]any)
			var converted []any
			for i, p := range list {
				c, err := draft4(p, def, fmt.Sprintf("%s %s/%d", at, k, i))
				if err != nil {
					return nil, err
				}
				converted = append(converted, c)
			}
			out[k] = converted
		default:
			if !sameKeywords[k] {
				return nil, fmt.Errorf("schema: %s: keyword %q has no draft-4 conversion", at, k)
			}
			out[k] = val
		}
	}
	if _, hasConst := s["const"]; hasConst {
		if _, hasEnum := s["enum"]; hasEnum {
			return nil, fmt.Errorf("schema: %s: const and enum together", at)
		}
	}
	return out, nil
}
