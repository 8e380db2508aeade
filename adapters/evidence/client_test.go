package evidence_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/adapters/evidence"
	"github.com/localeflow/localeflow/adapters/evidence/evidencetest"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

var key = []byte("evidence-test-key-0123456789")

func request(t *testing.T, human, independent bool) *contract.EvidenceRequest {
	t.Helper()
	job := release.PlanJob{JobID: "job-1", SourceLocale: "en-US", SourceSHA256: core.SHA256Hex([]byte("src")), TargetLocale: "de-DE", ContentType: "page"}
	r := &release.Result{
		SourceSHA256: job.SourceSHA256, TargetSHA256: core.SHA256Hex([]byte("tgt")), SourceLocale: "en-US", TargetLocale: "de-DE",
		ContentType: "page", GlossaryVersion: "g", PolicyVersion: "p", Provider: release.Provider{ID: "mt", ModelID: "m", ModelVersion: "1"},
		SoftwareVersion: "s", ReviewConfidence: map[string]string{"level": "high"}, QualityProfile: map[string]string{},
		HumanReviewRequired: human, IndependentReviewRequired: independent, Candidate: "tgt",
	}
	req, err := release.BuildEvidenceRequest("evt-1", "plan-1", job, "src", r, strings.Repeat("c", 64), "rev-1")
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func client(t *testing.T, url string, k []byte, timeout time.Duration) *evidence.Client {
	t.Helper()
	c, err := evidence.New(evidence.Config{BaseURL: url, Key: k, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestObtainAgainstSignedServer(t *testing.T) {
	fx := releasetest.NewFixture()
	tests := []struct {
		name        string
		review      releasetest.Review
		human, indp bool
		failFirst   int
		key         []byte
		code        string
		retryable   bool
	}{
		{name: "plain", review: releasetest.ReviewAuto},
		{name: "human review", review: releasetest.ReviewAuto, human: true},
		{name: "independent review", review: releasetest.ReviewAuto, indp: true},
		{name: "legal forbidden", review: releasetest.ReviewIndependent, human: true, code: release.CodeIndependentLegalForbidden},
		{name: "same provider", review: releasetest.ReviewSameProvider, indp: true, code: release.CodeIndependentNotIndependent},
		{name: "503", failFirst: 1, code: "evidence.http_503", retryable: true},
		{name: "wrong key", key: []byte("another-key-0123456789"), code: "evidence.signature_invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := evidencetest.New(key, &releasetest.Responder{Fixture: fx, Review: tt.review, FailFirst: tt.failFirst})
			defer srv.Close()
			k := key
			if tt.key != nil {
				k = tt.key
			}
			ev, err := release.ObtainEvidence(context.Background(), client(t, srv.URL, k, 0), request(t, tt.human, tt.indp))
			if tt.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				if tt.human && ev.HumanReviewReceipt == "" || tt.indp && ev.IndependentReview == nil {
					t.Fatalf("escalation missing: %+v", ev)
				}
				if _, err := fx.Verifiers().Quality.Verify(ev.QualityReceipt, request(t, tt.human, tt.indp).RequestID, strings.Repeat("c", 64), time.Now()); err != nil {
					t.Fatalf("server receipt does not verify: %v", err)
				}
				return
			}
			if !core.HasCode(err, tt.code) || core.IsRetryable(err) != tt.retryable {
				t.Fatalf("err = %v (retryable %v), want %s (%v)", err, core.IsRetryable(err), tt.code, tt.retryable)
			}
		})
	}
}

func TestStatusMapping(t *testing.T) {
	tests := []struct {
		status    int
		body      string
		code      string
		retryable bool
	}{
		{429, ``, "evidence.http_429", true},
		{500, `{"code":"x","retryable":false}`, "evidence.http_500", true},
		{422, `{"code":"policy_refused","retryable":false}`, "evidence.policy_refused", false},
		{409, `{"code":"evidence.busy","retryable":true}`, "evidence.busy", true},
		{400, `{"code":"Bad Code","retryable":false}`, "evidence.http_400", false},
		{400, `{"code":"x","retryable":false,"extra":1}`, "evidence.http_400", false},
		{404, `<html>`, "evidence.http_404", false},
		{302, ``, "evidence.http_302", false},
	}
	for _, tt := range tests {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", "http://127.0.0.1:1/")
			w.WriteHeader(tt.status)
			_, _ = w.Write([]byte(tt.body))
		}))
		_, err := client(t, srv.URL, key, 0).Obtain(context.Background(), request(t, false, false))
		srv.Close()
		if !core.HasCode(err, tt.code) || core.IsRetryable(err) != tt.retryable {
			t.Errorf("%d %s: %v retryable=%v", tt.status, tt.body, err, core.IsRetryable(err))
		}
	}
}

func TestTimeoutAndTransport(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-block }))
	defer srv.Close()
	defer close(block)
	_, err := client(t, srv.URL, key, 50*time.Millisecond).Obtain(context.Background(), request(t, false, false))
	if !core.HasCode(err, evidence.CodeTimeout) || !core.IsRetryable(err) {
		t.Fatalf("%v", err)
	}
	_, err = client(t, "http://127.0.0.1:1", key, 0).Obtain(context.Background(), request(t, false, false))
	if !core.HasCode(err, evidence.CodeUnavailable) || !core.IsRetryable(err) {
		t.Fatalf("%v", err)
	}
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(strings.Repeat(" ", evidence.DefaultMaxBodyBytes+1)))
	}))
	defer big.Close()
	_, err = client(t, big.URL, key, 0).Obtain(context.Background(), request(t, false, false))
	if !core.HasCode(err, evidence.CodeTooLarge) {
		t.Fatalf("%v", err)
	}
}

func TestConfig(t *testing.T) {
	for _, cfg := range []evidence.Config{
		{BaseURL: "ftp://x", Key: key},
		{BaseURL: "http://x?q=1", Key: key},
		{BaseURL: "http://x", Key: []byte("short")},
		{BaseURL: "http://x", Key: key, Timeout: -1},
	} {
		if _, err := evidence.New(cfg); !core.HasCode(err, evidence.CodeConfigInvalid) {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}
