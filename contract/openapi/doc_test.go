package openapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/localeflow/localeflow/contract/openapi"
	"github.com/localeflow/localeflow/contract/schema"
)

// No Go module the proxy serves validates an OpenAPI 3.1 document
// faithfully and lightly (libopenapi pulls a large tree into every build
// of the module's tests), so checkDocument checks, by the OpenAPI 3.1.0
// text, the structure these documents use: the root, info, servers,
// paths and their templates, operations, parameters, request bodies,
// responses and their keys, headers, media types, components, every $ref,
// and every Schema Object compiling as JSON Schema 2020-12 with the
// contract/schema files it refers to.

type doc = map[string]any

// load parses a document strictly (one JSON object, no duplicate member
// names, nothing after it).
func load(t *testing.T, name string) doc {
	t.Helper()
	raw, err := openapi.Read(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := noDuplicates(raw); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var d doc
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("%s: data after the document", name)
	}
	return d
}

// noDuplicates refuses a JSON text with a repeated member name in an
// object.
func noDuplicates(raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	var walk func() error
	walk = func() error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				if seen[k.(string)] {
					return fmt.Errorf("duplicate member %q", k)
				}
				seen[k.(string)] = true
				if err := walk(); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		case json.Delim('['):
			for dec.More() {
				if err := walk(); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		}
		return nil
	}
	return walk()
}

var (
	methods       = map[string]bool{"get": true, "put": true, "post": true, "delete": true, "options": true, "head": true, "patch": true, "trace": true}
	statusKey     = regexp.MustCompile(`^([1-5][0-9][0-9]|[1-5]XX|default)$`)
	templateParam = regexp.MustCompile(`\{([^{}/]+)\}`)
	extension     = regexp.MustCompile(`^x-`)
)

type checker struct {
	root     doc
	problems []string
	schemas  []any // every Schema Object met, to compile
}

func (c *checker) bad(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

// checkDocument returns what is not valid OpenAPI 3.1 in d (nil: nothing).
func checkDocument(d doc) []string {
	c := &checker{root: d}
	c.allowed("root", d, "openapi", "info", "servers", "paths", "components", "jsonSchemaDialect", "webhooks", "security", "tags", "externalDocs")
	if v, _ := d["openapi"].(string); !regexp.MustCompile(`^3\.1\.[0-9]+$`).MatchString(v) {
		c.bad("openapi %q is not 3.1.x", d["openapi"])
	}
	info, ok := d["info"].(doc)
	if !ok {
		c.bad("info missing")
	} else {
		c.allowed("info", info, "title", "summary", "description", "termsOfService", "contact", "license", "version")
		c.str("info.title", info["title"], true)
		c.str("info.version", info["version"], true)
		if l, ok := info["license"].(doc); ok {
			c.str("info.license.name", l["name"], true)
			if _, both := l["url"]; both && l["identifier"] != nil {
				c.bad("info.license: identifier and url are exclusive")
			}
		}
	}
	for i, s := range list(d["servers"]) {
		sv, _ := s.(doc)
		c.str(fmt.Sprintf("servers[%d].url", i), sv["url"], true)
		for _, v := range templateParam.FindAllStringSubmatch(fmt.Sprint(sv["url"]), -1) {
			vars, _ := sv["variables"].(doc)
			if vr, ok := vars[v[1]].(doc); !ok || vr["default"] == nil {
				c.bad("servers[%d]: variable %s without a default", i, v[1])
			}
		}
	}
	paths, ok := d["paths"].(doc)
	if !ok || len(paths) == 0 {
		c.bad("paths missing or empty")
	}
	opIDs := map[string]bool{}
	for p, item := range paths {
		c.pathItem(p, item, opIDs)
	}
	if comps, ok := d["components"].(doc); ok {
		c.allowed("components", comps, "schemas", "responses", "parameters", "examples", "requestBodies", "headers", "securitySchemes", "links", "callbacks", "pathItems")
		for name, p := range asDoc(comps["parameters"]) {
			c.parameter("components.parameters."+name, asDoc(p))
		}
		for name, h := range asDoc(comps["headers"]) {
			c.header("components.headers."+name, asDoc(h))
		}
	}
	c.refs("", d)
	c.compileSchemas()
	sort.Strings(c.problems)
	return c.problems
}

func (c *checker) pathItem(p string, raw any, opIDs map[string]bool) {
	item, ok := raw.(doc)
	if !strings.HasPrefix(p, "/") || !ok {
		c.bad("path %q: must start with / and be an object", p)
		return
	}
	var pathParams []any
	for k, v := range item {
		switch {
		case k == "parameters":
			pathParams = list(v)
		case k == "summary" || k == "description" || k == "servers" || k == "$ref" || extension.MatchString(k):
		case methods[k]:
		default:
			c.bad("path %s: unknown member %q", p, k)
		}
	}
	for m, v := range item {
		if !methods[m] {
			continue
		}
		op, ok := v.(doc)
		if !ok {
			c.bad("%s %s: not an object", m, p)
			continue
		}
		where := strings.ToUpper(m) + " " + p
		c.allowed(where, op, "tags", "summary", "description", "externalDocs", "operationId", "parameters", "requestBody", "responses", "callbacks", "deprecated", "security", "servers")
		if id, _ := op["operationId"].(string); id != "" {
			if opIDs[id] {
				c.bad("%s: operationId %s is not unique", where, id)
			}
			opIDs[id] = true
		}
		// Parameters: unique by (name, in); every template variable has a
		// required path parameter and every path parameter a variable.
		seen := map[string]bool{}
		inPath := map[string]bool{}
		for i, pr := range append(append([]any{}, pathParams...), list(op["parameters"])...) {
			p := c.deref(pr)
			c.parameter(fmt.Sprintf("%s parameters[%d]", where, i), p)
			name, _ := p["name"].(string)
			in, _ := p["in"].(string)
			key := in + ":" + strings.ToLower(name)
			if in != "header" {
				key = in + ":" + name
			}
			if seen[key] && i >= len(pathParams) {
				continue // an operation parameter overrides a path one
			}
			if seen[key] {
				c.bad("%s: parameter %s in %s twice", where, name, in)
			}
			seen[key] = true
			if in == "path" {
				inPath[name] = true
			}
		}
		vars := map[string]bool{}
		for _, v := range templateParam.FindAllStringSubmatch(p, -1) {
			vars[v[1]] = true
			if !inPath[v[1]] {
				c.bad("%s: template variable {%s} has no path parameter", where, v[1])
			}
		}
		for n := range inPath {
			if !vars[n] {
				c.bad("%s: path parameter %s is not in the template", where, n)
			}
		}
		if rb, ok := op["requestBody"]; ok {
			b := c.deref(rb)
			c.allowed(where+" requestBody", b, "description", "content", "required")
			if len(asDoc(b["content"])) == 0 {
				c.bad("%s: requestBody without content", where)
			}
			c.content(where+" requestBody", b["content"])
		}
		responses, ok := op["responses"].(doc)
		if !ok || len(responses) == 0 {
			c.bad("%s: no responses", where)
		}
		for code, r := range responses {
			if !statusKey.MatchString(code) && !extension.MatchString(code) {
				c.bad("%s: response key %q is not a status, a range (4XX) or default", where, code)
			}
			resp := c.deref(r)
			c.allowed(where+" "+code, resp, "description", "headers", "content", "links")
			c.str(where+" "+code+" description", resp["description"], true)
			for hn, h := range asDoc(resp["headers"]) {
				if strings.EqualFold(hn, "Content-Type") {
					c.bad("%s %s: a Content-Type header is ignored", where, code)
				}
				c.header(where+" "+code+" header "+hn, c.deref(h))
			}
			c.content(where+" "+code, resp["content"])
		}
	}
}

func (c *checker) parameter(where string, p doc) {
	c.allowed(where, p, "name", "in", "description", "required", "deprecated", "allowEmptyValue", "style", "explode", "allowReserved", "schema", "example", "examples", "content")
	c.str(where+" name", p["name"], true)
	in, _ := p["in"].(string)
	switch in {
	case "query", "header", "path", "cookie":
	default:
		c.bad("%s: in %q", where, p["in"])
	}
	if in == "path" && p["required"] != true {
		c.bad("%s: a path parameter must be required: true", where)
	}
	if in == "header" {
		switch strings.ToLower(fmt.Sprint(p["name"])) {
		case "accept", "content-type", "authorization":
			c.bad("%s: a header parameter named %s is ignored by OpenAPI", where, p["name"])
		}
	}
	if (p["schema"] == nil) == (p["content"] == nil) {
		c.bad("%s: exactly one of schema and content", where)
	}
	if s, ok := p["schema"]; ok {
		c.schemas = append(c.schemas, s)
	}
}

func (c *checker) header(where string, h doc) {
	if h["$ref"] != nil {
		return // resolved (and checked) where it is defined
	}
	c.allowed(where, h, "description", "required", "deprecated", "style", "explode", "schema", "example", "examples", "content")
	if (h["schema"] == nil) == (h["content"] == nil) {
		c.bad("%s: exactly one of schema and content", where)
	}
	if s, ok := h["schema"]; ok {
		c.schemas = append(c.schemas, s)
	}
}

func (c *checker) content(where string, raw any) {
	for mt, m := range asDoc(raw) {
		if !regexp.MustCompile(`^[a-z*]+/[a-z0-9.+*-]+$`).MatchString(mt) {
			c.bad("%s: media type %q", where, mt)
		}
		media, ok := m.(doc)
		if !ok {
			c.bad("%s %s: not an object", where, mt)
			continue
		}
		c.allowed(where+" "+mt, media, "schema", "example", "examples", "encoding")
		if s, ok := media["schema"]; ok {
			c.schemas = append(c.schemas, s)
		}
	}
}

// allowed reports members of o that the object does not define (x- ones
// are extensions).
func (c *checker) allowed(where string, o doc, keys ...string) {
	ok := map[string]bool{}
	for _, k := range keys {
		ok[k] = true
	}
	for k := range o {
		if !ok[k] && !extension.MatchString(k) {
			c.bad("%s: unknown member %q", where, k)
		}
	}
}

func (c *checker) str(where string, v any, required bool) {
	s, ok := v.(string)
	if (required && !ok) || (ok && s == "") {
		c.bad("%s: a non-empty string is required", where)
	}
}

// deref follows an internal Reference Object (reporting one that does
// not resolve); other values are returned as they are.
func (c *checker) deref(v any) doc {
	o, _ := v.(doc)
	ref, ok := o["$ref"].(string)
	if !ok || !strings.HasPrefix(ref, "#/") {
		return o
	}
	target, err := pointer(c.root, ref)
	if err != nil {
		return doc{}
	}
	t, _ := target.(doc)
	return t
}

// refs checks every $ref: "#/…" must resolve in the document, any other
// must name a contract/schema file.
func (c *checker) refs(at string, v any) {
	switch x := v.(type) {
	case doc:
		for k, val := range x {
			if k == "$ref" {
				ref, _ := val.(string)
				switch {
				case strings.HasPrefix(ref, "#/"):
					if _, err := pointer(c.root, ref); err != nil {
						c.bad("%s: $ref %q: %v", at, ref, err)
					}
				case strings.HasPrefix(ref, openapi.SchemaRefPrefix):
					if !hasSchema(strings.TrimPrefix(ref, openapi.SchemaRefPrefix)) {
						c.bad("%s: $ref %q names no contract/schema file", at, ref)
					}
				default:
					c.bad("%s: $ref %q is neither internal nor a contract/schema file", at, ref)
				}
				continue
			}
			c.refs(at+"/"+k, val)
		}
	case []any:
		for i, val := range x {
			c.refs(fmt.Sprintf("%s/%d", at, i), val)
		}
	}
}

func hasSchema(name string) bool {
	for _, n := range schema.Names() {
		if n == name {
			return true
		}
	}
	return false
}

// pointer resolves a "#/a/b" JSON pointer in root.
func pointer(root doc, ref string) (any, error) {
	var cur any = root
	for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		o, ok := cur.(doc)
		if !ok {
			return nil, fmt.Errorf("%s does not resolve", ref)
		}
		if cur, ok = o[part]; !ok {
			return nil, fmt.Errorf("%s does not resolve", ref)
		}
	}
	return cur, nil
}

// schemaBase is where the documents' schemas are placed for the compiler;
// ../schema/X resolves to schemaDir + X.
const (
	docBase   = "file:///localeflow/contract/openapi/"
	schemaDir = "file:///localeflow/contract/schema/"
)

// newCompiler returns a draft 2020-12 compiler that knows every
// contract/schema file at its place next to the documents.
func newCompiler() (*jsonschema.Compiler, error) {
	comp := jsonschema.NewCompiler()
	comp.DefaultDraft(jsonschema.Draft2020)
	comp.AssertFormat()
	for _, name := range schema.Names() {
		raw, err := schema.Read(name)
		if err != nil {
			return nil, err
		}
		d, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			return nil, err
		}
		if err := comp.AddResource(schemaDir+name, d); err != nil {
			return nil, err
		}
	}
	return comp, nil
}

// compileSchema compiles one Schema Object of a document.
func compileSchema(comp *jsonschema.Compiler, n int, s any) (*jsonschema.Schema, error) {
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	d, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	url := fmt.Sprintf("%sschema-object-%d.json", docBase, n)
	if err := comp.AddResource(url, d); err != nil {
		return nil, err
	}
	return comp.Compile(url)
}

func (c *checker) compileSchemas() {
	comp, err := newCompiler()
	if err != nil {
		c.bad("compiler: %v", err)
		return
	}
	for i, s := range c.schemas {
		if _, err := compileSchema(comp, i, s); err != nil {
			c.bad("schema object %d: %v", i, err)
		}
	}
}

func list(v any) []any { l, _ := v.([]any); return l }
func asDoc(v any) doc  { o, _ := v.(doc); return o }

// TestDocumentsAreOpenAPI31: both documents pass the structural check.
func TestDocumentsAreOpenAPI31(t *testing.T) {
	if got := openapi.Names(); len(got) != 2 {
		t.Fatalf("documents %v", got)
	}
	for _, name := range openapi.Names() {
		if problems := checkDocument(load(t, name)); len(problems) != 0 {
			t.Errorf("%s:\n  %s", name, strings.Join(problems, "\n  "))
		}
	}
}

// TestStructureCheckRefusesBrokenDocuments: the check is not a pass-all:
// each break of a real document is reported.
func TestStructureCheckRefusesBrokenDocuments(t *testing.T) {
	lifecycle := "/v1/sites/{site_id}/changes/{event_id}/lifecycle"
	op := func(d doc) doc { return d["paths"].(doc)[lifecycle].(doc)["get"].(doc) }
	for _, tt := range []struct {
		name   string
		break_ func(d doc)
	}{
		{"openapi 3.0", func(d doc) { d["openapi"] = "3.0.3" }},
		{"no info.version", func(d doc) { delete(d["info"].(doc), "version") }},
		{"bad status key", func(d doc) { op(d)["responses"].(doc)["6XX"] = doc{"description": "x"} }},
		{"response without description", func(d doc) { delete(op(d)["responses"].(doc)["429"].(doc), "description") }},
		{"unresolved internal ref", func(d doc) {
			op(d)["parameters"] = append(list(op(d)["parameters"]), doc{"$ref": "#/components/parameters/Nope"})
		}},
		{"unresolved schema file", func(d doc) {
			op(d)["responses"].(doc)["200"].(doc)["content"].(doc)["application/json"].(doc)["schema"] = doc{"$ref": "../schema/nope.schema.json"}
		}},
		{"template variable without parameter", func(d doc) {
			d["paths"].(doc)[lifecycle].(doc)["parameters"] = list(d["paths"].(doc)[lifecycle].(doc)["parameters"])[:1]
		}},
		{"optional path parameter", func(d doc) { d["components"].(doc)["parameters"].(doc)["SiteId"].(doc)["required"] = false }},
		{"schema that does not compile", func(d doc) {
			d["components"].(doc)["parameters"].(doc)["Timestamp"].(doc)["schema"] = doc{"type": "string", "pattern": "("}
		}},
		{"unknown operation member", func(d doc) { op(d)["response"] = doc{} }},
		{"accept header parameter", func(d doc) {
			op(d)["parameters"] = append(list(op(d)["parameters"]), doc{"name": "Accept", "in": "header", "schema": doc{"type": "string"}})
		}},
	} {
		d := load(t, openapi.CMS)
		tt.break_(d)
		if problems := checkDocument(d); len(problems) == 0 {
			t.Errorf("%s: not reported", tt.name)
		}
	}
}
