// Package openapi holds the OpenAPI 3.1 documents of the HTTP APIs
// localeflow is the client of: cms.json (CMS lifecycle and delivery) and
// evidence.json (evidence provider). Their bodies are $refs to the JSON
// Schemas of contract/schema (../schema/*.schema.json, resolved relative
// to the document as OpenAPI 3.1 specifies). Every response carries
// x-localeflow-outcome: what localeflow does with that status.
//
// The tests of this package check the documents' structure (the parts of
// OpenAPI 3.1 the documents use, every $ref resolving, every schema
// compiling as draft 2020-12), that the requests the product's clients
// send and the answers of the reference servers (dev/reference) validate
// against their operation, and, status by status, that the documented
// outcome is what the real client does.
package openapi

import (
	"embed"
	"io/fs"
	"sort"
	"strings"
)

//go:embed *.json
var files embed.FS

// The documents.
const (
	CMS      = "cms.json"
	Evidence = "evidence.json"
)

// Names lists the document files (sorted).
func Names() []string {
	entries, _ := fs.ReadDir(files, ".")
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".json") {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// Read returns one document's bytes.
func Read(name string) ([]byte, error) { return files.ReadFile(name) }

// SchemaRefPrefix starts every $ref to a contract/schema file.
const SchemaRefPrefix = "../schema/"
