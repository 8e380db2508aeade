// Package schema holds localeflow's machine-readable contracts: one JSON
// Schema (draft 2020-12) per event detail and per HTTP body, embedded so
// that tools and tests read the same files a non-Go integrator downloads
// from contract/schema/. docs/integrating.md explains what each schema
// cannot state (signatures, hashes, cross-member rules); the test vectors
// in contract/testdata/vectors cover those.
//
// The tests of this package check the schemas against the code both ways:
// what the product emits validates, and for each input the product reads,
// a set of documents the schema refuses is refused by the product's strict
// parser too (and a set the schema accepts is accepted).
package schema

import (
	"embed"
	"io/fs"
	"sort"
	"strings"
)

//go:embed *.schema.json
var files embed.FS

// Suffix ends every schema file name.
const Suffix = ".schema.json"

// Names lists the schema files (sorted).
func Names() []string {
	entries, _ := fs.ReadDir(files, ".")
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), Suffix) {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// Read returns one schema file's bytes.
func Read(name string) ([]byte, error) { return files.ReadFile(name) }

// The schema file of each detail-type and body.
const (
	SignedEvent             = "signed-event.schema.json"
	ChangeDispatchedPayload = "change-dispatched.payload.schema.json"
	PlanAcceptedPayload     = "plan-accepted.payload.schema.json"
	JobCompletedPayload     = "job-completed.payload.schema.json"
	ChangeHint              = "change-hint.schema.json"
	ChangeTerminal          = "change-terminal.schema.json"
	ReleaseApproved         = "release-approved.schema.json"
	DeliveryEvent           = "delivery-event.schema.json"
	HealthBlocked           = "health-blocked.schema.json"
	CMSLifecycleResponse    = "cms-lifecycle-response.schema.json"
	DeliveryRequest         = "delivery-request.schema.json"
	EvidenceRequest         = "evidence-request.schema.json"
	EvidenceResponse        = "evidence-response.schema.json"
	EvidenceError           = "evidence-error.schema.json"
	ReceiptPayload          = "receipt-payload.schema.json"
	ApprovalPayload         = "approval-payload.schema.json"
	DeliveryBundle          = "delivery-bundle.schema.json"
)

// Outputs are the schemas of localeflow's output details. They are
// additive: a later localeflow may add members under the same schema
// version, and a consumer ignores members it does not know (no
// additionalProperties: false). localeflow's own tests hold its outputs
// to exactly the listed members (schematest.ValidateStrict).
var Outputs = []string{ChangeTerminal, ReleaseApproved, DeliveryEvent, HealthBlocked}

// ForDetailType names the schema of an event detail-type's detail (for a
// signed input, the envelope; PayloadFor names its payload's).
var ForDetailType = map[string]string{
	"localeflow.change.dispatched":  SignedEvent,
	"localeflow.plan.accepted":      SignedEvent,
	"localeflow.job.completed":      SignedEvent,
	"localeflow.change.hint":        ChangeHint,
	"localeflow.change.terminal":    ChangeTerminal,
	"localeflow.release.approved":   ReleaseApproved,
	"localeflow.delivery.ready":     DeliveryEvent,
	"localeflow.delivery.delivered": DeliveryEvent,
	"localeflow.health.blocked":     HealthBlocked,
}

// PayloadFor names the schema of a signed input's payload.
var PayloadFor = map[string]string{
	"localeflow.change.dispatched": ChangeDispatchedPayload,
	"localeflow.plan.accepted":     PlanAcceptedPayload,
	"localeflow.job.completed":     JobCompletedPayload,
}
