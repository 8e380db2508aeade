package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/dev/reference"
	"github.com/localeflow/localeflow/signing"
)

// Expected final states of a change.
const (
	expectPublished  = "published"           // delivered, then published by the CMS
	expectSuperseded = "superseded"          // replaced before localization: no release
	expectBlocked    = "publication_blocked" // delivered, then blocked by the CMS on purpose
)

// job is one locale of a change: the source text and the translation the
// (simulated) translation provider returns.
type job struct {
	Locale      string
	Source      string
	Translation string
	HumanReview bool
}

// change is one scenario entry.
type change struct {
	EventID string
	SiteID  string
	Version string
	Seq     int64
	Path    string
	Story   string
	Jobs    []job
	// RemoteStatus of the dispatch: enqueued, or superseded.
	RemoteStatus string
	// CMSFailFirst lifecycle answers are HTTP 503.
	CMSFailFirst int
	// AfterDelivery is the CMS's status once the delivery arrived.
	AfterDelivery string
	Blocked       [][2]string
	Expect        string
}

func (c change) PlanID() string { return "plan-" + c.EventID }

func (c change) Locales() []string {
	out := make([]string, len(c.Jobs))
	for i, j := range c.Jobs {
		out[i] = j.Locale
	}
	return out
}

func (c change) JobID(j job) string { return "job-" + c.EventID + "-" + j.Locale }

// scenario returns the demo's changes, ids made unique by run.
func scenario(run string) []change {
	id := func(s string) string { return "evt-" + run + "-" + s }
	return []change{
		{
			EventID: id("pricing"), SiteID: "shop-berlin", Version: "v2026.11.30", Seq: 41, Path: "/pricing",
			Story: "new prices, 2 locales", Expect: expectPublished, RemoteStatus: "enqueued",
			Jobs: []job{
				{"de-DE", "New: free shipping on orders over 50 EUR", "Neu: kostenloser Versand ab 50 EUR Bestellwert", false},
				{"fr-FR", "New: free shipping on orders over 50 EUR", "Nouveau : livraison gratuite dès 50 EUR d'achat", false},
			},
		},
		{
			EventID: id("checkout"), SiteID: "shop-paris", Version: "v2026.11.30", Seq: 17, Path: "/checkout/terms",
			Story: "legal text: it-IT needs human review", Expect: expectPublished, RemoteStatus: "enqueued",
			Jobs: []job{
				{"fr-FR", "By placing the order you accept our terms.", "En passant commande, vous acceptez nos conditions.", false},
				{"it-IT", "By placing the order you accept our terms.", "Effettuando l'ordine accetti i nostri termini.", true},
				{"es-ES", "By placing the order you accept our terms.", "Al realizar el pedido aceptas nuestras condiciones.", false},
			},
		},
		{
			EventID: id("landing"), SiteID: "travel-tokyo", Version: "v2026.11.29", Seq: 8, Path: "/winter",
			Story: "CMS answers 503 twice, then recovers", Expect: expectPublished, RemoteStatus: "enqueued", CMSFailFirst: 2,
			Jobs: []job{
				{"ja-JP", "Winter deals to Hokkaido", "北海道への冬のお得なプラン", false},
				{"ko-KR", "Winter deals to Hokkaido", "홋카이도 겨울 특가", false},
			},
		},
		{
			EventID: id("banner"), SiteID: "shop-berlin", Version: "v2026.11.28", Seq: 40, Path: "/",
			Story: "superseded by a newer version", Expect: expectSuperseded, RemoteStatus: "superseded",
			Jobs: []job{{"de-DE", "Black Friday banner", "Black-Friday-Banner", false}},
		},
		{
			EventID: id("promo"), SiteID: "shop-madrid", Version: "v2026.11.30", Seq: 5, Path: "/promo",
			Story: "FAILS ON PURPOSE: CMS blocks pt-BR (legal hold)", Expect: expectBlocked, RemoteStatus: "enqueued",
			AfterDelivery: "publication_blocked", Blocked: [][2]string{{"pt-BR", "legal_hold"}},
			Jobs: []job{
				{"es-ES", "Two for one on all sneakers", "Dos por uno en todas las zapatillas", false},
				{"pt-BR", "Two for one on all sneakers", "Leve dois, pague um em todos os tênis", false},
			},
		},
	}
}

// cmsSpec is what the reference CMS knows about the change.
func (c change) cmsSpec() reference.ChangeSpec {
	return reference.ChangeSpec{
		EventID: c.EventID, SiteID: c.SiteID, PlanID: c.PlanID(), WebsiteVersion: c.Version, SourceSequence: c.Seq,
		Locales: c.Locales(), FailFirst: c.CMSFailFirst, AfterDelivery: c.AfterDelivery, Blocked: c.Blocked,
	}
}

// dispatchedDetail is the localeflow.change.dispatched detail.
func (c change) dispatchedDetail() ([]byte, error) {
	ch := map[string]any{
		"event_id": c.EventID, "site_id": c.SiteID, "website_version": c.Version, "source_sequence": c.Seq,
		"paths": []string{c.Path},
	}
	sum, err := core.HashCanonical(ch)
	if err != nil {
		return nil, fmt.Errorf("hash change %s: %w", c.EventID, err)
	}
	resp, err := core.HashCanonical(map[string]any{"plan_id": c.PlanID(), "accepted": true})
	if err != nil {
		return nil, fmt.Errorf("hash response %s: %w", c.EventID, err)
	}
	return json.Marshal(map[string]any{
		"change": ch,
		"dispatch": map[string]any{
			"event_id": c.EventID, "payload_sha256": sum, "status": "succeeded", "remote_plan_id": c.PlanID(),
			"remote_job_count": len(c.Jobs), "remote_status": c.RemoteStatus, "response_sha256": resp,
		},
	})
}

// planPayload is the localeflow.plan.accepted payload.
func (c change) planPayload() ([]byte, error) {
	jobs := make([]map[string]any, 0, len(c.Jobs))
	for _, j := range c.Jobs {
		jobs = append(jobs, map[string]any{
			"job_id": c.JobID(j), "source": map[string]any{"locale": "en-US", "text": j.Source},
			"target": map[string]any{"locale": j.Locale}, "content_type": "page", "commercial_profile": nil,
		})
	}
	return json.Marshal(map[string]any{
		"event": map[string]any{"event_id": c.EventID, "site_id": c.SiteID, "website_version": c.Version, "source_sequence": c.Seq},
		"plan":  map[string]any{"plan_id": c.PlanID(), "jobs": jobs},
	})
}

// jobPayload is the localeflow.job.completed payload of a succeeded job.
func (c change) jobPayload(j job) ([]byte, error) {
	return json.Marshal(map[string]any{
		"event_id": c.EventID, "plan_id": c.PlanID(), "job_id": c.JobID(j), "status": "succeeded",
		"source_sha256": core.SHA256Hex([]byte(j.Source)), "target_sha256": core.SHA256Hex([]byte(j.Translation)),
		"source_locale": "en-US", "target_locale": j.Locale, "content_type": "page",
		"glossary_version": "gl-2026-11", "policy_version": "pol-7",
		"provider":         map[string]any{"id": "mt-alpha", "model_id": "alpha-large", "model_version": "2026-10"},
		"software_version": "localeflow-demo-1", "review_confidence": map[string]any{"level": "high"},
		"quality_profile": map[string]any{"tier": "standard"}, "commercial_review": nil,
		"human_review_required": j.HumanReview, "independent_review_required": false,
		"candidate": j.Translation,
	})
}

// signedDetail wraps a payload as a v2 signed detail
// {"payload", "timestamp", "signature"} of detailType, signed now.
func signedDetail(eventKey []byte, detailType string, payload []byte) ([]byte, error) {
	return signing.EventDetailV2(eventKey, detailType, time.Now(), payload)
}
