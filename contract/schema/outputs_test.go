package schema_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/contract/schema"
	"github.com/localeflow/localeflow/contract/schema/schematest"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/health"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/signing"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// recordingProvider is the fixture's evidence provider, recording every
// request body (the canonical form the HTTP client sends) and answer.
type recordingProvider struct {
	releasetest.Provider
	mu        sync.Mutex
	requests  [][]byte
	responses [][]byte
}

func (p *recordingProvider) Obtain(ctx context.Context, req *contract.EvidenceRequest) ([]byte, error) {
	body, err := release.EvidenceBody(req)
	if err != nil {
		return nil, err
	}
	resp, err := p.Provider.Obtain(ctx, req)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests = append(p.requests, body)
	if err == nil {
		p.responses = append(p.responses, resp)
	}
	return resp, err
}

// release run: one plan of three locales (one plain, one with human
// review, one with independent review) through the real coordinator to a
// delivered bundle. It returns everything the coordinator put on a wire.
type released struct {
	fx                     releasetest.Fixture
	plan                   releasetest.PlanSpec
	outcomes               []release.Outcome
	delivery               []byte
	evidenceRequests       [][]byte
	evidenceResponses      [][]byte
	approvalPub, bundlePub []byte
}

func runRelease(t *testing.T) released {
	t.Helper()
	fx := releasetest.NewFixture()
	now := t0
	clk := core.ClockFunc(func() time.Time { return now })
	prov := &recordingProvider{Provider: releasetest.Provider{Responder: &releasetest.Responder{Fixture: fx, Clock: clk}}}
	cms := &releasetest.CMS{}
	approval, publication := fx.Authorities()
	c, err := release.NewCoordinator(release.Dependencies{
		Store: releasetest.NewMemStore(), EventKey: fx.EventKey, Evidence: prov, CMS: cms,
		Verifiers: fx.Verifiers(), Approval: approval, Publication: publication,
	}, clk, slog.New(slog.NewJSONHandler(io.Discard, nil)), release.DefaultConfig("rev-1", "worker-1"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	plan := releasetest.NewPlan("evt-schema", "de-DE", "fr-FR", "it-IT")
	if _, _, err := c.Ingest(ctx, contract.DetailPlanAccepted, fx.Detail(plan.PlanPayload())); err != nil {
		t.Fatal(err)
	}
	opts := map[string]releasetest.ResultOptions{
		"de-DE": {}, "fr-FR": {HumanReviewRequired: true}, "it-IT": {IndependentReviewRequired: true},
	}
	r := released{fx: fx, plan: plan, approvalPub: approval.PublicKey(), bundlePub: publication.PublicKey()}
	for _, l := range []string{"de-DE", "fr-FR", "it-IT"} {
		if _, _, err := c.Ingest(ctx, contract.DetailJobCompleted, fx.Detail(plan.ResultPayload(l, opts[l]))); err != nil {
			t.Fatal(err)
		}
		o, err := releasetest.Step(ctx, c, plan.EventID)
		if err != nil {
			t.Fatal(err)
		}
		r.outcomes = append(r.outcomes, o)
		now = now.Add(time.Second)
	}
	d, err := c.Deliver(ctx, plan.EventID)
	if err != nil || d.Status != release.OutcomeDelivered {
		t.Fatalf("deliver: %+v %v", d, err)
	}
	r.outcomes = append(r.outcomes, d)
	r.delivery = cms.Deliveries[d.DeliveryID]
	r.evidenceRequests, r.evidenceResponses = prov.requests, prov.responses
	if len(r.delivery) == 0 || len(r.evidenceRequests) != 3 || len(r.evidenceResponses) != 3 {
		t.Fatalf("delivery %d bytes, %d evidence requests, %d answers", len(r.delivery), len(r.evidenceRequests), len(r.evidenceResponses))
	}
	return r
}

func marshal(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestReleaseOutputsValidate: the coordinator's evidence requests, the
// delivery request, its bundle and every approval token inside it, and the
// output events built from its outcomes validate against their schemas.
func TestReleaseOutputsValidate(t *testing.T) {
	r := runRelease(t)
	for _, body := range r.evidenceRequests {
		mustValidate(t, schema.EvidenceRequest, body)
	}
	for _, body := range r.evidenceResponses {
		mustValidate(t, schema.EvidenceResponse, body)
		var resp map[string]any
		_ = json.Unmarshal(body, &resp)
		receipts := []any{resp["quality_receipt"], resp["human_review_receipt"]}
		if imr, ok := resp["independent_model_review"].(map[string]any); ok {
			receipts = append(receipts, imr["receipt"])
		}
		for _, rc := range receipts {
			s, ok := rc.(string)
			if !ok {
				continue
			}
			payload, err := signing.PeekReceiptPayload(s)
			if err != nil {
				t.Fatal(err)
			}
			mustValidate(t, schema.ReceiptPayload, payload)
		}
	}
	mustValidate(t, schema.DeliveryRequest, r.delivery)
	var req contract.DeliveryRequest
	if err := json.Unmarshal(r.delivery, &req); err != nil {
		t.Fatal(err)
	}
	bundle, err := release.OpenToken(release.PublicationContext, r.bundlePub, req.Bundle)
	if err != nil {
		t.Fatal(err)
	}
	mustValidate(t, schema.DeliveryBundle, bundle)
	var b contract.Bundle
	if err := json.Unmarshal(bundle, &b); err != nil || len(b.Locales) != 3 {
		t.Fatalf("bundle: %v, %d locales", err, len(b.Locales))
	}
	kinds := map[string]bool{}
	for _, l := range b.Locales {
		payload, err := release.OpenToken(release.ApprovalContext, r.approvalPub, l.Approval)
		if err != nil {
			t.Fatal(err)
		}
		mustValidate(t, schema.ApprovalPayload, payload)
		var p contract.ApprovalPayload
		_ = json.Unmarshal(payload, &p)
		kinds[map[bool]string{true: "human"}[p.HumanReviewReceiptSHA256 != ""]+map[bool]string{true: "independent"}[p.IndependentReviewProvider != ""]] = true
	}
	if !kinds[""] || !kinds["human"] || !kinds["independent"] {
		t.Fatalf("approvals of every review kind expected, got %v", kinds)
	}
	for _, o := range r.outcomes {
		switch o.Status {
		case release.OutcomeApproved, release.OutcomeDeliveryReady:
			mustValidate(t, schema.ReleaseApproved, marshal(t, contract.ReleaseApproved{
				Schema: contract.SchemaReleaseApproved, EventID: o.EventID, PlanID: o.PlanID, JobID: o.JobID, TargetLocale: o.TargetLocale, ApprovalID: o.ApprovalID,
			}))
		}
		if o.DeliveryID != "" {
			mustValidate(t, schema.DeliveryEvent, marshal(t, contract.Delivery{Schema: contract.SchemaDelivery, EventID: o.EventID, PlanID: o.PlanID, DeliveryID: o.DeliveryID, Status: o.Status}))
		}
	}
}

// TestInputFixturesValidate: the payloads the test fixtures sign (what a
// producer sends) and their signed envelopes validate.
func TestInputFixturesValidate(t *testing.T) {
	fx := releasetest.NewFixture()
	plan := releasetest.NewPlan("evt-in", "de-DE", "fr-FR")
	mustValidate(t, schema.PlanAcceptedPayload, plan.PlanPayload())
	mustValidate(t, schema.JobCompletedPayload, plan.ResultPayload("de-DE", releasetest.ResultOptions{}))
	mustValidate(t, schema.JobCompletedPayload, plan.FailedPayload("fr-FR"))
	mustValidate(t, schema.SignedEvent, fx.Detail(plan.PlanPayload()))
	v2, err := signing.EventDetailV2(fx.EventKey, contract.DetailPlanAccepted, t0, plan.PlanPayload())
	if err != nil {
		t.Fatal(err)
	}
	mustValidate(t, schema.SignedEvent, v2)
	mustValidate(t, schema.ChangeDispatchedPayload, dispatchedPayload(t, nil))
}

// TestOutputEventsValidate: change.terminal (as the poller builds it, in
// each shape) and health.blocked (both shapes) validate.
func TestOutputEventsValidate(t *testing.T) {
	str := func(s string) *string { return &s }
	outcome := monitor.OutcomeID("evt-1", monitor.StateTerminal, core.Millis(t0))
	for _, d := range []contract.ChangeTerminal{
		{Schema: contract.SchemaChangeTerminal, EventID: "evt-1", OutcomeID: outcome, SiteID: str("site-1"), PlanID: str("plan-1"), State: string(monitor.StateTerminal),
			RemoteStatus: str("published"), LifecycleSHA256: str(strings.Repeat("a", 64))},
		{Schema: contract.SchemaChangeTerminal, EventID: "evt-2", OutcomeID: monitor.OutcomeID("evt-2", monitor.StateFailed, 1), State: string(monitor.StateFailed),
			ErrorCode: str("lifecycle_monitor.state_invalid")},
	} {
		mustValidate(t, schema.ChangeTerminal, marshal(t, d))
	}
	type blocked = contract.HealthBlocked
	mustValidate(t, schema.HealthBlocked, marshal(t, blocked{Schema: "localeflow.health.v1", CheckedAtMS: 1, Reasons: []string{"health.unavailable"}}))
	mustValidate(t, schema.HealthBlocked, marshal(t, blocked{Schema: "localeflow.health.v1", CheckedAtMS: 1, Reasons: []string{"monitor.failed"},
		Monitor: &contract.MonitorHealth{}, Release: &contract.ReleaseHealth{}}))
}

// TestOutputVectorsCarryTheirSchema: output_events.json has a detail for
// every output detail-type, each validates against its schema and carries
// the version the schema's "schema" const names.
func TestOutputVectorsCarryTheirSchema(t *testing.T) {
	if contract.SchemaHealthBlocked != health.Schema {
		t.Fatalf("contract.SchemaHealthBlocked %q, health.Schema %q", contract.SchemaHealthBlocked, health.Schema)
	}
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "vectors", "output_events.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Vectors []struct {
			DetailType string `json:"detail_type"`
			Schema     string `json:"schema"`
			Detail     string `json:"detail"`
		} `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, v := range f.Vectors {
		seen[v.DetailType] = true
		if err := schematest.ValidateDetail(v.DetailType, []byte(v.Detail)); err != nil {
			t.Fatal(err)
		}
		if got := schemaConst(t, schema.ForDetailType[v.DetailType]); got != v.Schema {
			t.Fatalf("%s: vector schema %q, the schema file's const %q", v.DetailType, v.Schema, got)
		}
	}
	for _, dt := range contract.OutputDetailTypes {
		if !seen[dt] {
			t.Errorf("no output vector for %s", dt)
		}
		// Every output schema requires a "schema" member with a const.
		if schemaConst(t, schema.ForDetailType[dt]) == "" {
			t.Errorf("%s: the schema has no required \"schema\" const", dt)
		}
	}
}

// schemaConst is the const of the schema file's required "schema" member
// ("" when there is none or it is not required).
func schemaConst(t *testing.T, name string) string {
	t.Helper()
	raw, err := schema.Read(name)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Properties struct {
			Schema struct {
				Const string `json:"const"`
			} `json:"schema"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	for _, r := range s.Required {
		if r == "schema" {
			return s.Properties.Schema.Const
		}
	}
	return ""
}
