package reference

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/localeflow/localeflow/adapters/cms"
	"github.com/localeflow/localeflow/adapters/cmsdelivery"
	"github.com/localeflow/localeflow/adapters/evidence"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/lifecycle"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

var (
	cmsKey      = []byte("reference-cms-key-0123456789")
	evidenceKey = []byte("reference-evidence-key-0123456789")
)

func issuerSeed(kind string) []byte {
	s := sha256.Sum256([]byte("reference-issuer-" + kind))
	return s[:]
}

// evidenceConfig has one issuer and seed per receipt kind.
func evidenceConfig(faults Faults) EvidenceConfig {
	return EvidenceConfig{
		Key: evidenceKey, Issuer: "ref-quality", IssuerSeed: issuerSeed("quality"),
		HumanIssuer: "ref-human", HumanIssuerSeed: issuerSeed("human"),
		ReviewIssuer: "ref-review", ReviewIssuerSeed: issuerSeed("review"), Faults: faults,
	}
}

// trusted parses the provider's advertised issuer values, so the
// coordinator trusts exactly what the provider says it signs with.
func trusted(t *testing.T, r ReceiptIssuers) release.TrustedIssuers {
	t.Helper()
	parse := func(v string) map[string]ed25519.PublicKey {
		name, keyHex, _ := strings.Cut(v, "=")
		key, err := hex.DecodeString(keyHex)
		if err != nil || len(key) != ed25519.PublicKeySize {
			t.Fatalf("issuer value %q", v)
		}
		return map[string]ed25519.PublicKey{name: key}
	}
	ti := release.TrustedIssuers{Quality: parse(r.Quality), HumanReview: parse(r.HumanReview), IndependentReview: parse(r.IndependentReview)}
	if err := ti.Validate(); err != nil {
		t.Fatal(err)
	}
	return ti
}

// hintLog records the hints the CMS sends.
type hintLog struct {
	mu    sync.Mutex
	hints []string
}

func (h *hintLog) Hint(_ context.Context, eventID, siteID string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hints = append(h.hints, eventID+"/"+siteID)
	return nil
}

func (h *hintLog) sent() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.hints...)
}

type bundle struct {
	hints    *hintLog
	fx       releasetest.Fixture
	cms      *CMS
	cmsURL   string
	evidence *Evidence
	evURL    string
	reader   *cms.Client
}

func setup(t *testing.T, cmsFaults, evFaults Faults) bundle {
	t.Helper()
	fx := releasetest.NewFixture()
	approval, publication := fx.Authorities()
	hints := &hintLog{}
	c, err := NewCMS(CMSConfig{Key: cmsKey, Publication: publication.PublicKey(), Approval: approval.PublicKey(), Faults: cmsFaults, Hinter: hints})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cs, err := Serve("127.0.0.1:0", c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	ev, err := NewEvidence(evidenceConfig(evFaults))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ev.Close)
	es, err := Serve("127.0.0.1:0", ev)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = es.Close() })
	reader, err := cms.New(cms.Config{BaseURL: cs.URL, Key: cmsKey, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return bundle{hints: hints, fx: fx, cms: c, cmsURL: cs.URL, evidence: ev, evURL: es.URL, reader: reader}
}

func spec(eventID string, locales ...string) ChangeSpec {
	return ChangeSpec{EventID: eventID, SiteID: "site-berlin", PlanID: "plan-" + eventID, WebsiteVersion: "v2026.11.29", SourceSequence: 7, Locales: locales}
}

func target(s ChangeSpec) lifecycle.Target {
	return lifecycle.Target{EventID: s.EventID, SiteID: s.SiteID, PlanID: s.PlanID, WebsiteVersion: s.WebsiteVersion, SourceSequence: s.SourceSequence, JobCount: len(s.Locales)}
}

// coordinator is an in-memory release coordinator that talks to the
// reference servers through the real signed clients.
func (b bundle) coordinator(t *testing.T) *release.Coordinator {
	t.Helper()
	verifiers := trusted(t, b.evidence.Issuers()).Verifiers()
	approval, publication := b.fx.Authorities()
	ev, err := evidence.New(evidence.Config{BaseURL: b.evURL, Key: evidenceKey, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	dl, err := cmsdelivery.New(cmsdelivery.Config{BaseURL: b.cmsURL, Key: cmsKey, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c, err := release.NewCoordinator(release.Dependencies{
		Store: releasetest.NewMemStore(), EventKey: b.fx.EventKey, Evidence: ev, CMS: dl,
		Verifiers: verifiers, Approval: approval, Publication: publication,
	}, core.SystemClock{}, nil, release.DefaultConfig("rev-1", "worker-1"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCMSLifecycleFollowsDelivery plays a change whose CMS fails twice,
// answers processing until the coordinator's signed delivery (with a
// human-reviewed locale, evidence from the reference provider) is
// verified, then published.
func TestCMSLifecycleFollowsDelivery(t *testing.T) {
	b := setup(t, Faults{}, Faults{})
	s := spec("evt-ref-1", "de-DE", "fr-FR")
	s.FailFirst = 2
	if err := b.cms.Put(s); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 2 {
		if _, err := b.reader.ReadLifecycle(ctx, target(s)); !core.HasCode(err, "cms.http_503") || !core.IsRetryable(err) {
			t.Fatalf("read %d: %v, want a retryable cms.http_503", i, err)
		}
	}
	resp, err := b.reader.ReadLifecycle(ctx, target(s))
	if err != nil || resp.Status != "processing" || len(resp.ApprovedLocales) != 0 {
		t.Fatalf("before delivery: %+v %v", resp, err)
	}

	c := b.coordinator(t)
	plan := releasetest.PlanSpec{EventID: s.EventID, SiteID: s.SiteID, PlanID: s.PlanID}
	for _, l := range s.Locales {
		plan.Jobs = append(plan.Jobs, releasetest.JobSpec{JobID: "job-" + l, SourceLocale: "en-US", SourceText: "Welcome", TargetLocale: l, ContentType: "page"})
	}
	if _, _, err := c.Ingest(ctx, "localeflow.plan.accepted", b.fx.Detail(plan.PlanPayload())); err != nil {
		t.Fatal(err)
	}
	for _, l := range s.Locales {
		opts := releasetest.ResultOptions{HumanReviewRequired: l == "fr-FR"}
		if _, _, err := c.Ingest(ctx, "localeflow.job.completed", b.fx.Detail(plan.ResultPayload(l, opts))); err != nil {
			t.Fatal(err)
		}
		if o, err := releasetest.Step(ctx, c, s.EventID); err != nil || !o.Changed {
			t.Fatalf("release %s: %+v %v", l, o, err)
		}
	}
	if h := b.hints.sent(); len(h) != 0 {
		t.Fatalf("hints before the status changed: %v", h)
	}
	if o, err := c.Deliver(ctx, s.EventID); err != nil || o.Status != release.OutcomeDelivered {
		t.Fatalf("deliver: %+v %v", o, err)
	}
	// The status changed (processing → published): one hint, no status in it.
	if h := b.hints.sent(); len(h) != 1 || h[0] != s.EventID+"/"+s.SiteID {
		t.Fatalf("hints after the delivery: %v", h)
	}
	resp, err = b.reader.ReadLifecycle(ctx, target(s))
	if err != nil || resp.Status != "published" || len(resp.ApprovedLocales) != 2 {
		t.Fatalf("after delivery: %+v %v", resp, err)
	}
	st := b.cms.Stats()
	if st.LifecycleFailures[s.EventID] != 2 || st.LifecycleRequests[s.EventID] != 4 || st.Deliveries[s.EventID] != 1 || st.Rejected != 0 ||
		st.Hints != 1 || st.HintFailures != 0 {
		t.Fatalf("cms stats %+v", st)
	}
	if es := b.evidence.Stats(); es.Answered != 2 || es.Rejected != 0 {
		t.Fatalf("evidence stats %+v", es)
	}
}

func TestCMSAfterDeliveryStatusAndBlockedLocales(t *testing.T) {
	b := setup(t, Faults{}, Faults{})
	s := spec("evt-ref-2", "de-DE", "fr-FR")
	s.AfterDelivery, s.Blocked = "publication_blocked", [][2]string{{"fr-FR", "legal_hold"}}
	if err := b.cms.Put(s); err != nil {
		t.Fatal(err)
	}
	b.cms.mu.Lock()
	b.cms.delivered[s.EventID] = 1
	b.cms.scriptLocked(s.EventID)
	b.cms.mu.Unlock()
	resp, err := b.reader.ReadLifecycle(context.Background(), target(s))
	if err != nil || resp.Status != "publication_blocked" || len(resp.BlockedLocales) != 1 || !lifecycle.IsRemoteFailure(resp.Status) {
		t.Fatalf("%+v %v", resp, err)
	}
}

func TestCMSRejectsUnsignedDelivery(t *testing.T) {
	b := setup(t, Faults{}, Faults{})
	if err := b.cms.Put(spec("evt-ref-3", "de-DE")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(b.cmsURL+"/v1/sites/site-berlin/changes/evt-ref-3/deliveries", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || b.cms.Stats().Deliveries["evt-ref-3"] != 0 {
		t.Fatalf("status %d, stats %+v", resp.StatusCode, b.cms.Stats())
	}
}

func TestFaultsFailureRate(t *testing.T) {
	b := setup(t, Faults{FailureRate: 1, Latency: 20 * time.Millisecond}, Faults{})
	s := spec("evt-ref-4", "de-DE")
	if err := b.cms.Put(s); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := b.reader.ReadLifecycle(context.Background(), target(s))
	if !core.HasCode(err, "cms.http_503") || time.Since(start) < 20*time.Millisecond {
		t.Fatalf("%v after %s", err, time.Since(start))
	}
	if st := b.cms.Stats(); st.Injected != 1 || st.LifecycleRequests[s.EventID] != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestAdminRegistersChanges(t *testing.T) {
	b := setup(t, Faults{}, Faults{})
	tests := []struct {
		name string
		body string
		want int
	}{
		{"Valid", `{"event_id":"evt-adm","site_id":"site-1","plan_id":"plan-1","website_version":"v1","source_sequence":3,"locales":["de-DE"],"fail_first":1}`, http.StatusCreated},
		{"UnknownField", `{"event_id":"evt-adm","extra":1}`, http.StatusBadRequest},
		{"BadToken", `{"event_id":"evt adm","site_id":"site-1","plan_id":"plan-1","website_version":"v1","source_sequence":3,"locales":["de-DE"]}`, http.StatusBadRequest},
		{"SupersededIsNoPollAnswer", `{"event_id":"evt-adm2","site_id":"site-1","plan_id":"plan-1","website_version":"v1","source_sequence":3,"locales":["de-DE"],"after_delivery":"superseded"}`, http.StatusBadRequest},
		{"BlockedLocaleNotRequired", `{"event_id":"evt-adm3","site_id":"site-1","plan_id":"plan-1","website_version":"v1","source_sequence":3,"locales":["de-DE"],"blocked":[["fr-FR","x"]]}`, http.StatusBadRequest},
		{"NoLocales", `{"event_id":"evt-adm4","site_id":"site-1","plan_id":"plan-1","website_version":"v1","source_sequence":3,"locales":[]}`, http.StatusBadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post(b.cmsURL+"/_admin/v1/changes", "application/json", bytes.NewReader([]byte(tc.body)))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
	_, err := b.reader.ReadLifecycle(context.Background(), lifecycle.Target{EventID: "evt-adm", SiteID: "site-1", PlanID: "plan-1", WebsiteVersion: "v1", SourceSequence: 3, JobCount: 1})
	if !core.HasCode(err, "cms.http_503") {
		t.Fatalf("registered change's first answer: %v", err)
	}
}

func TestServeRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "localhost:0", "192.0.2.1:0"} {
		if s, err := Serve(addr, http.NotFoundHandler()); err == nil {
			_ = s.Close()
			t.Errorf("%s accepted", addr)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	fx := releasetest.NewFixture()
	a, p := fx.Authorities()
	if _, err := NewCMS(CMSConfig{Key: []byte("short"), Publication: p.PublicKey(), Approval: a.PublicKey()}); err == nil {
		t.Error("short CMS key accepted")
	}
	if _, err := NewCMS(CMSConfig{Key: cmsKey, Publication: p.PublicKey(), Approval: a.PublicKey(), Faults: Faults{FailureRate: 1.5}}); err == nil {
		t.Error("failure rate 1.5 accepted")
	}
	for name, change := range map[string]func(*EvidenceConfig){
		"bad issuer":                      func(c *EvidenceConfig) { c.Issuer = "bad issuer" },
		"short seed":                      func(c *EvidenceConfig) { c.IssuerSeed = []byte("short") },
		"no human issuer":                 func(c *EvidenceConfig) { c.HumanIssuer = "" },
		"no review seed":                  func(c *EvidenceConfig) { c.ReviewIssuerSeed = nil },
		"quality seed signs human review": func(c *EvidenceConfig) { c.HumanIssuerSeed = c.IssuerSeed },
		"human seed signs review":         func(c *EvidenceConfig) { c.ReviewIssuerSeed = c.HumanIssuerSeed },
	} {
		c := evidenceConfig(Faults{})
		change(&c)
		if _, err := NewEvidence(c); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}
