package openapi_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/localeflow/localeflow/adapters/cms"
	"github.com/localeflow/localeflow/adapters/cmsdelivery"
	"github.com/localeflow/localeflow/adapters/evidence"
	"github.com/localeflow/localeflow/contract/openapi"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/lifecycle"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/dev/reference"
)

// exchange is one request and its answer as they crossed the wire.
type exchange struct {
	method, path string
	reqHeader    http.Header
	reqBody      []byte
	status       int
	respHeader   http.Header
	respBody     []byte
	fromClient   bool // sent by one of the product's clients
}

// recorder sits in front of a reference server and keeps every exchange.
type recorder struct {
	next http.Handler
	mu   sync.Mutex
	ex   []exchange
	// raw marks requests sent by the test itself, not by a client.
	raw bool
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	rec := httptest.NewRecorder()
	rc.next.ServeHTTP(rec, r)
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.ex = append(rc.ex, exchange{method: r.Method, path: r.URL.EscapedPath(), reqHeader: r.Header.Clone(), reqBody: body,
		status: rec.Code, respHeader: rec.Header().Clone(), respBody: rec.Body.Bytes(), fromClient: !rc.raw})
}

func (rc *recorder) exchanges() []exchange {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]exchange(nil), rc.ex...)
}

func seed(label string) []byte {
	s := sha256.Sum256([]byte(label))
	return s[:]
}

// TestClientRequestsAndReferenceAnswersValidate drives the product's real
// clients (the CMS lifecycle reader, the coordinator's evidence and
// delivery clients) against the reference servers and validates every
// exchange against its operation: the path and its parameters, every
// header parameter, the request body, the status (listed by the
// document), the response headers and the response body. Unsigned
// requests sent by the test add the reference servers' refusals (their
// answers only are checked).
func TestClientRequestsAndReferenceAnswersValidate(t *testing.T) {
	key, evKey := []byte("reference-cms-key-0123456789"), []byte("reference-evidence-key-0123456789")
	fx := releasetest.NewFixture()
	approval, publication := fx.Authorities()
	refCMS, err := reference.NewCMS(reference.CMSConfig{Key: key, Publication: publication.PublicKey(), Approval: approval.PublicKey()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(refCMS.Close)
	refEv, err := reference.NewEvidence(reference.EvidenceConfig{Key: evKey,
		Issuer: "ref-quality", IssuerSeed: seed("quality"), HumanIssuer: "ref-human", HumanIssuerSeed: seed("human"),
		ReviewIssuer: "ref-review", ReviewIssuerSeed: seed("review")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(refEv.Close)
	cmsRec, evRec := &recorder{next: refCMS}, &recorder{next: refEv}
	cmsSrv, evSrv := httptest.NewServer(cmsRec), httptest.NewServer(evRec)
	t.Cleanup(cmsSrv.Close)
	t.Cleanup(evSrv.Close)

	spec := reference.ChangeSpec{EventID: "evt-openapi-1", SiteID: "site-berlin", PlanID: "plan-openapi-1", WebsiteVersion: "v2026.12.01",
		SourceSequence: 7, Locales: []string{"de-DE", "fr-FR"}, FailFirst: 1}
	if err := refCMS.Put(spec); err != nil {
		t.Fatal(err)
	}
	target := lifecycle.Target{EventID: spec.EventID, SiteID: spec.SiteID, PlanID: spec.PlanID, WebsiteVersion: spec.WebsiteVersion,
		SourceSequence: spec.SourceSequence, JobCount: len(spec.Locales)}
	reader, err := cms.New(cms.Config{BaseURL: cmsSrv.URL, Key: key, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := reader.ReadLifecycle(ctx, target); !core.HasCode(err, "cms.http_503") {
		t.Fatalf("first read: %v, want the scripted 503", err)
	}
	if resp, err := reader.ReadLifecycle(ctx, target); err != nil || resp.Status != "processing" {
		t.Fatalf("read: %+v %v", resp, err)
	}

	// A release through the real evidence and delivery clients.
	ev, err := evidence.New(evidence.Config{BaseURL: evSrv.URL, Key: evKey, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	dl, err := cmsdelivery.New(cmsdelivery.Config{BaseURL: cmsSrv.URL, Key: key, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	issuers := refEv.Issuers()
	ti := release.TrustedIssuers{Quality: issuer(t, issuers.Quality), HumanReview: issuer(t, issuers.HumanReview), IndependentReview: issuer(t, issuers.IndependentReview)}
	c, err := release.NewCoordinator(release.Dependencies{Store: releasetest.NewMemStore(), EventKey: fx.EventKey, Evidence: ev, CMS: dl,
		Verifiers: ti.Verifiers(), Approval: approval, Publication: publication}, core.SystemClock{}, nil, release.DefaultConfig("rev-1", "worker-1"))
	if err != nil {
		t.Fatal(err)
	}
	plan := releasetest.PlanSpec{EventID: spec.EventID, SiteID: spec.SiteID, PlanID: spec.PlanID}
	for _, l := range spec.Locales {
		plan.Jobs = append(plan.Jobs, releasetest.JobSpec{JobID: "job-" + l, SourceLocale: "en-US", SourceText: "Welcome", TargetLocale: l, ContentType: "page"})
	}
	if _, _, err := c.Ingest(ctx, "localeflow.plan.accepted", fx.Detail(plan.PlanPayload())); err != nil {
		t.Fatal(err)
	}
	for _, l := range spec.Locales {
		opts := releasetest.ResultOptions{HumanReviewRequired: l == "fr-FR"}
		if _, _, err := c.Ingest(ctx, "localeflow.job.completed", fx.Detail(plan.ResultPayload(l, opts))); err != nil {
			t.Fatal(err)
		}
		if o, err := releasetest.Step(ctx, c, spec.EventID); err != nil || !o.Changed {
			t.Fatalf("release %s: %+v %v", l, o, err)
		}
	}
	if o, err := c.Deliver(ctx, spec.EventID); err != nil || o.Status != release.OutcomeDelivered {
		t.Fatalf("deliver: %+v %v", o, err)
	}
	if resp, err := reader.ReadLifecycle(ctx, target); err != nil || resp.Status != "published" {
		t.Fatalf("read after delivery: %+v %v", resp, err)
	}

	// The reference servers' refusals of unsigned requests.
	cmsRec.raw, evRec.raw = true, true
	for _, r := range []struct{ method, url, body string }{
		{http.MethodGet, cmsSrv.URL + "/v1/sites/site-berlin/changes/evt-openapi-1/lifecycle", ""},
		{http.MethodPost, cmsSrv.URL + "/v1/sites/site-berlin/changes/evt-openapi-1/deliveries", "{}"},
		{http.MethodPost, evSrv.URL + "/v1/evidence", "{}"},
	} {
		req, _ := http.NewRequestWithContext(ctx, r.method, r.url, strings.NewReader(r.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}

	cmsDoc, evDoc := load(t, openapi.CMS), load(t, openapi.Evidence)
	seen := map[string]bool{}
	for _, x := range cmsRec.exchanges() {
		seen[check(t, cmsDoc, x)] = true
	}
	for _, x := range evRec.exchanges() {
		seen[check(t, evDoc, x)] = true
	}
	var got []string
	for k := range seen {
		got = append(got, k)
	}
	sort.Strings(got)
	for _, want := range []string{
		"client GET /v1/sites/{site_id}/changes/{event_id}/lifecycle 200",
		"client GET /v1/sites/{site_id}/changes/{event_id}/lifecycle 503",
		"client POST /v1/sites/{site_id}/changes/{event_id}/deliveries 201",
		"client POST /v1/evidence 200",
		"raw GET /v1/sites/{site_id}/changes/{event_id}/lifecycle 401",
		"raw POST /v1/sites/{site_id}/changes/{event_id}/deliveries 401",
		"raw POST /v1/evidence 401",
	} {
		if !seen[want] {
			t.Errorf("no exchange %q checked (got %v)", want, got)
		}
	}
}

func issuer(t *testing.T, v string) map[string]ed25519.PublicKey {
	t.Helper()
	name, keyHex, _ := strings.Cut(v, "=")
	k, err := hex.DecodeString(keyHex)
	if err != nil || len(k) != ed25519.PublicKeySize {
		t.Fatalf("issuer %q", v)
	}
	return map[string]ed25519.PublicKey{name: k}
}

// check validates one exchange against its operation in d and returns
// "client|raw METHOD template status".
func check(t *testing.T, d doc, x exchange) string {
	t.Helper()
	c := &checker{root: d}
	var tmpl string
	var op doc
	var params []any
	for p, item := range d["paths"].(doc) {
		// QuoteMeta escapes the template's braces: match the escaped form.
		re := regexp.MustCompile("^" + regexp.MustCompile(`\\\{[^/]+?\\\}`).ReplaceAllString(regexp.QuoteMeta(p), `([^/]+)`) + "$")
		m := re.FindStringSubmatch(x.path)
		if m == nil {
			continue
		}
		o, ok := item.(doc)[strings.ToLower(x.method)].(doc)
		if !ok {
			t.Errorf("%s %s: the document has no such operation", x.method, x.path)
			return ""
		}
		tmpl, op = p, o
		params = append(append([]any{}, list(item.(doc)["parameters"])...), list(o["parameters"])...)
		names := templateParam.FindAllStringSubmatch(p, -1)
		for i, n := range names {
			v, err := url.PathUnescape(m[i+1])
			if err != nil {
				t.Errorf("%s: path segment %q", x.path, m[i+1])
			}
			for _, pr := range params {
				pp := c.deref(pr)
				if pp["in"] == "path" && pp["name"] == n[1] {
					validateValue(t, fmt.Sprintf("%s path %s", x.path, n[1]), pp["schema"], fmt.Sprintf("%q", v))
				}
			}
		}
		break
	}
	if op == nil {
		t.Errorf("%s %s: no path of the document matches", x.method, x.path)
		return ""
	}
	where := fmt.Sprintf("%s %s", x.method, tmpl)
	if x.fromClient {
		for _, pr := range params {
			p := c.deref(pr)
			if p["in"] != "header" {
				continue
			}
			name := p["name"].(string)
			vals := x.reqHeader.Values(name)
			if len(vals) == 0 {
				if p["required"] == true {
					t.Errorf("%s: the client sent no %s", where, name)
				}
				continue
			}
			if len(vals) > 1 {
				t.Errorf("%s: the client sent %s %d times", where, name, len(vals))
			}
			validateValue(t, where+" header "+name, p["schema"], fmt.Sprintf("%q", vals[0]))
		}
		if rb, ok := op["requestBody"]; ok {
			b := c.deref(rb)
			if b["required"] == true && len(x.reqBody) == 0 {
				t.Errorf("%s: the client sent no body", where)
			}
			mt, _, _ := mime.ParseMediaType(x.reqHeader.Get("Content-Type"))
			media, ok := asDoc(b["content"])[mt].(doc)
			if !ok {
				t.Errorf("%s: request content type %q not in the document", where, mt)
			} else {
				validateValue(t, where+" request body", media["schema"], string(x.reqBody))
			}
		} else if len(x.reqBody) != 0 {
			t.Errorf("%s: the client sent a body the document does not describe", where)
		}
	}
	responses := op["responses"].(doc)
	var resp doc
	for _, k := range []string{fmt.Sprint(x.status), fmt.Sprint(x.status/100) + "XX", "default"} {
		if r, ok := responses[k]; ok {
			resp = c.deref(r)
			break
		}
	}
	if resp == nil {
		t.Errorf("%s: status %d is not in the document", where, x.status)
	} else {
		for hn, h := range asDoc(resp["headers"]) {
			hd := c.deref(h)
			vals := x.respHeader.Values(hn)
			if len(vals) == 0 {
				if hd["required"] == true {
					t.Errorf("%s %d: the answer has no %s", where, x.status, hn)
				}
				continue
			}
			validateValue(t, fmt.Sprintf("%s %d header %s", where, x.status, hn), hd["schema"], fmt.Sprintf("%q", vals[0]))
		}
		if content := asDoc(resp["content"]); len(content) > 0 && len(x.respBody) > 0 {
			mt, _, _ := mime.ParseMediaType(x.respHeader.Get("Content-Type"))
			media, ok := content[mt].(doc)
			if !ok {
				t.Errorf("%s %d: answer content type %q not in the document", where, x.status, mt)
			} else {
				validateValue(t, fmt.Sprintf("%s %d body", where, x.status), media["schema"], string(x.respBody))
			}
		}
	}
	who := "client"
	if !x.fromClient {
		who = "raw"
	}
	return fmt.Sprintf("%s %s %s %d", who, x.method, tmpl, x.status)
}

var schemaN struct {
	sync.Mutex
	n int
}

// validateValue validates a JSON text against a Schema Object.
func validateValue(t *testing.T, what string, s any, jsonText string) {
	t.Helper()
	if s == nil {
		t.Errorf("%s: no schema", what)
		return
	}
	comp, err := newCompiler()
	if err != nil {
		t.Fatal(err)
	}
	schemaN.Lock()
	schemaN.n++
	n := schemaN.n
	schemaN.Unlock()
	sch, err := compileSchema(comp, n, s)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(jsonText))
	if err != nil {
		t.Errorf("%s: not JSON: %v", what, err)
		return
	}
	if err := sch.Validate(inst); err != nil {
		t.Errorf("%s: %s does not validate: %v", what, jsonText, err)
	}
}
