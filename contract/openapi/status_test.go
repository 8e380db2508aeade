package openapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/adapters/cms"
	"github.com/localeflow/localeflow/adapters/cmsdelivery"
	"github.com/localeflow/localeflow/adapters/evidence"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/contract/openapi"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/lifecycle"
	"github.com/localeflow/localeflow/core/release"
)

var testKey = []byte("openapi-test-key-0123456789abcdef")

// outcomeOf is the x-localeflow-outcome of the response that applies to
// status in an operation: the exact status, else its range (4XX), else
// default.
func outcomeOf(t *testing.T, d doc, path, method string, status int) (key string, o doc) {
	t.Helper()
	responses := d["paths"].(doc)[path].(doc)[method].(doc)["responses"].(doc)
	for _, k := range []string{strconv.Itoa(status), strconv.Itoa(status/100) + "XX", "default"} {
		if r, ok := responses[k].(doc); ok {
			o, ok := r["x-localeflow-outcome"].(doc)
			if !ok {
				t.Fatalf("%s %s %s: no x-localeflow-outcome", method, path, k)
			}
			return k, o
		}
	}
	return "", nil
}

// observed is what a client did with one answer.
type observed struct {
	err        error
	code       string
	retryable  bool
	retryAfter bool
}

func (o observed) String() string {
	if o.err == nil {
		return "success"
	}
	return fmt.Sprintf("code %s retryable %v retry_after %v", o.code, o.retryable, o.retryAfter)
}

// answering serves every request with status, Retry-After: 7 and body.
func answering(t *testing.T, status *int, body *string) string {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "7")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(*status)
		_, _ = w.Write([]byte(*body))
	}))
	t.Cleanup(s.Close)
	return s.URL
}

func observe(err error) observed {
	return observed{err: err, code: core.CodeOf(err), retryable: core.IsRetryable(err), retryAfter: core.RetryAfterOf(err) == 7*time.Second}
}

// expect compares what the client did with the documented outcome.
func expect(t *testing.T, what string, status int, o doc, got observed, body string) {
	t.Helper()
	want := observed{}
	switch o["outcome"] {
	case "delivered":
	case "read":
		if code, ok := o["invalid_code"].(string); ok {
			// The answer here is not a valid body: the documented
			// refusal.
			want = observed{err: fmt.Errorf("x"), code: code}
		}
	case "error":
		code := strings.ReplaceAll(o["code"].(string), "{status}", strconv.Itoa(status))
		retryable, _ := o["retryable"].(bool)
		retryAfter, _ := o["retry_after"].(bool)
		if o["error_body"] == true && strings.HasPrefix(body, `{"code"`) {
			code, retryable = "evidence.quota_exceeded", true
		}
		want = observed{err: fmt.Errorf("x"), code: code, retryable: retryable, retryAfter: retryAfter}
	default:
		t.Fatalf("%s: outcome %v", what, o["outcome"])
	}
	if (got.err == nil) != (want.err == nil) || got.code != want.code || got.retryable != want.retryable || got.retryAfter != want.retryAfter {
		t.Errorf("%s http %d: the client does %s, the document says %s", what, status, got, want)
	}
}

// TestClientsHandleStatusesAsDocumented answers each real client with
// every status from 200 to 599 (1xx are informational to Go's client and
// cannot be a final answer here) and checks what the client does against
// the document's x-localeflow-outcome for that status. A client that
// starts treating a status differently (retrying it, honouring
// Retry-After, accepting it) fails here until the document says so, and
// a document that promises another handling fails until the client does
// it. Every response key of the documents is exercised by some status.
func TestClientsHandleStatusesAsDocumented(t *testing.T) {
	cmsDoc, evDoc := load(t, openapi.CMS), load(t, openapi.Evidence)
	status, body := 200, "{}"
	url := answering(t, &status, &body)
	ctx := context.Background()
	reader, err := cms.New(cms.Config{BaseURL: url, Key: testKey, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	deliverer, err := cmsdelivery.New(cmsdelivery.Config{BaseURL: url, Key: testKey, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := evidence.New(evidence.Config{BaseURL: url, Key: testKey, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	req := sampleEvidenceRequest(t)
	target := lifecycle.Target{EventID: "evt-1", SiteID: "site-1", PlanID: "plan-1", WebsiteVersion: "v1", SourceSequence: 1, JobCount: 1}
	const (
		lifecyclePath = "/v1/sites/{site_id}/changes/{event_id}/lifecycle"
		deliveryPath  = "/v1/sites/{site_id}/changes/{event_id}/deliveries"
	)
	used := map[string]bool{}
	for status = 200; status <= 599; status++ {
		body = "{}"
		k, o := outcomeOf(t, cmsDoc, lifecyclePath, "get", status)
		used["cms lifecycle "+k] = true
		_, err := reader.ReadLifecycle(ctx, target)
		expect(t, "lifecycle", status, o, observe(err), body)

		k, o = outcomeOf(t, cmsDoc, deliveryPath, "post", status)
		used["cms delivery "+k] = true
		expect(t, "delivery", status, o, observe(deliverer.Deliver(ctx, "site-1", "evt-1", []byte(`{}`))), body)

		k, o = outcomeOf(t, evDoc, "/v1/evidence", "post", status)
		used["evidence "+k] = true
		_, err = ev.Obtain(ctx, req)
		expect(t, "evidence", status, o, observe(err), body)
		if o["error_body"] == true {
			body = `{"code":"quota_exceeded","retryable":true}`
			_, err = ev.Obtain(ctx, req)
			expect(t, "evidence (error body)", status, o, observe(err), body)
		}
	}
	for name, d := range map[string]doc{"cms": cmsDoc, "evidence": evDoc} {
		for p, item := range d["paths"].(doc) {
			for m, op := range item.(doc) {
				if !methods[m] {
					continue
				}
				api := "evidence"
				if name == "cms" {
					api = map[bool]string{true: "cms lifecycle", false: "cms delivery"}[m == "get"]
				}
				for k := range op.(doc)["responses"].(doc) {
					if !used[api+" "+k] {
						t.Errorf("%s %s %s: response %s is never the one that applies", name, m, p, k)
					}
				}
			}
		}
	}
}

// sampleEvidenceRequest is an evidence request as the coordinator builds
// it.
func sampleEvidenceRequest(t *testing.T) *contract.EvidenceRequest {
	t.Helper()
	src, cand := "Welcome to our shop", "Willkommen in unserem Shop"
	r := &release.Result{
		SourceSHA256: core.SHA256Hex([]byte(src)), TargetSHA256: core.SHA256Hex([]byte(cand)),
		SourceLocale: "en-US", TargetLocale: "de-DE", ContentType: "page", GlossaryVersion: "gl-3", PolicyVersion: "pol-2",
		Provider: release.Provider{ID: "mt-alpha", ModelID: "m-1", ModelVersion: "2026-10"}, SoftwareVersion: "sw-1.4.0",
		ReviewConfidence: map[string]string{"level": "high"}, QualityProfile: map[string]string{"tier": "standard"},
		CommercialReview: []byte(`null`), Candidate: cand,
	}
	req, err := release.BuildEvidenceRequest("evt-1", "plan-1", release.PlanJob{JobID: "job-de-DE", SourceLocale: "en-US", TargetLocale: "de-DE", ContentType: "page"},
		src, r, strings.Repeat("ab", 32), "rev-1")
	if err != nil {
		t.Fatal(err)
	}
	return req
}
