package cms_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/adapters/cms"
	"github.com/localeflow/localeflow/adapters/cms/cmstest"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/lifecycle"
	"github.com/localeflow/localeflow/signing"
)

var testKey = []byte("localeflow-cms-test-key-00000001")

var target = lifecycle.Target{
	EventID:        "evt-2026-0001",
	SiteID:         "site-berlin",
	PlanID:         "plan-42",
	WebsiteVersion: "v2026.11.29",
	SourceSequence: 7,
	JobCount:       2,
}

type bundle struct {
	cms    *cmstest.CMS
	server *httptest.Server
	client *cms.Client
	now    time.Time
}

func setup(t *testing.T, timeout time.Duration) bundle {
	t.Helper()
	fake := cmstest.New(testKey)
	fake.Put(cmstest.Change{
		EventID: target.EventID, SiteID: target.SiteID, PlanID: target.PlanID,
		WebsiteVersion: target.WebsiteVersion, SourceSequence: target.SourceSequence,
		RequiredLocales: []string{"de-DE", "fr-FR"},
	})
	srv := fake.Start()
	t.Cleanup(srv.Close)
	now := time.Unix(1764460800, 0)
	fake.CheckTimestamp(core.ClockFunc(func() time.Time { return now }), 5*time.Minute)
	client, err := cms.New(cms.Config{
		BaseURL: srv.URL, Key: testKey, Timeout: timeout,
		Clock: core.ClockFunc(func() time.Time { return now }),
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return bundle{cms: fake, server: srv, client: client, now: now}
}

func TestReadLifecycleValid(t *testing.T) {
	b := setup(t, time.Second)
	b.cms.Script(target.EventID,
		cmstest.Step{Status: "processing", QueueCounts: map[string]int64{"pending": 2}},
		cmstest.Step{Status: "publishing", Approved: []string{"de-DE"}, Blocked: [][2]string{{"fr-FR", "glossary.missing"}}},
		cmstest.StatusStep("published"),
	)
	want := []string{"processing", "publishing", "published"}
	for i, status := range want {
		resp, err := b.client.ReadLifecycle(context.Background(), target)
		if err != nil {
			t.Fatalf("attempt %d: %v", i, err)
		}
		if resp.Status != status {
			t.Fatalf("attempt %d: status %q, want %q", i, resp.Status, status)
		}
		if !core.ValidSHA256(resp.SHA256) || core.SHA256Hex(resp.Canonical) != resp.SHA256 {
			t.Fatalf("attempt %d: snapshot hash %q does not match canonical body", i, resp.SHA256)
		}
	}
	reqs := b.cms.RequestsFor(target.EventID)
	if len(reqs) != len(want) {
		t.Fatalf("server saw %d requests, want %d", len(reqs), len(want))
	}
	seen := map[string]bool{}
	for i, r := range reqs {
		if !r.SignatureValid {
			t.Errorf("request %d: server could not verify the signature", i)
		}
		if !core.ValidToken(r.RequestID) || seen[r.RequestID] {
			t.Errorf("request %d: request id %q is not a fresh token", i, r.RequestID)
		}
		seen[r.RequestID] = true
		if r.Timestamp != "1764460800" {
			t.Errorf("request %d: timestamp %q is not the injected clock", i, r.Timestamp)
		}
	}
}

func TestReadLifecycleFailures(t *testing.T) {
	tests := []struct {
		name      string
		step      cmstest.Step
		code      string
		retryable bool
	}{
		{"503", cmstest.HTTPStep(503), "cms.http_503", true},
		{"500", cmstest.HTTPStep(500), "cms.http_500", true},
		{"429", cmstest.HTTPStep(429), "cms.http_429", true},
		{"404", cmstest.HTTPStep(404), "cms.http_404", false},
		{"400", cmstest.HTTPStep(400), "cms.http_400", false},
		{"204 is not the contract", cmstest.HTTPStep(204), "cms.http_204", false},
		{"302 is not followed", cmstest.HTTPStep(302), "cms.http_302", false},
		{"timeout", cmstest.Step{Status: "processing", Delay: 2 * time.Second}, cms.CodeTimeout, true},
		{"bad signature", cmstest.Step{Status: "processing", Fault: cmstest.FaultBadSignature}, lifecycle.CodeResponseInvalid, false},
		{"missing signature", cmstest.Step{Status: "processing", Fault: cmstest.FaultMissingSignature}, lifecycle.CodeResponseInvalid, false},
		{"mismatched request id", cmstest.Step{Status: "processing", Fault: cmstest.FaultMismatchedRequestID}, lifecycle.CodeResponseInvalid, false},
		{"signed for another request", cmstest.Step{Status: "processing", Fault: cmstest.FaultForeignRequestID}, lifecycle.CodeResponseInvalid, false},
		{"oversized body", cmstest.Step{Status: "processing", Fault: cmstest.FaultOversizedBody}, lifecycle.CodeResponseInvalid, false},
		{"malformed body", cmstest.Step{Status: "processing", Fault: cmstest.FaultMalformedBody}, lifecycle.CodeResponseInvalid, false},
		{"extra key", cmstest.Step{Status: "processing", Fault: cmstest.FaultExtraKey}, lifecycle.CodeResponseInvalid, false},
		{"wrong identity", cmstest.Step{Status: "processing", Fault: cmstest.FaultWrongIdentity}, lifecycle.CodeResponseInvalid, false},
		{"superseded is no poll answer", cmstest.StatusStep("superseded"), lifecycle.CodeResponseInvalid, false},
		{"unknown status", cmstest.StatusStep("exploded"), lifecycle.CodeResponseInvalid, false},
		{"unknown blocked locale", cmstest.Step{Status: "processing", Blocked: [][2]string{{"it-IT", "x"}}}, lifecycle.CodeResponseInvalid, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := setup(t, 300*time.Millisecond)
			b.cms.Script(target.EventID, tt.step)
			_, err := b.client.ReadLifecycle(context.Background(), target)
			assertCode(t, err, tt.code, tt.retryable)
		})
	}
}

func assertCode(t *testing.T, err error, code string, retryable bool) {
	t.Helper()
	var ce *core.Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %v is not a *core.Error", err)
	}
	if ce.Code != code || ce.Retryable != retryable {
		t.Fatalf("got code %q retryable %v, want %q retryable %v", ce.Code, ce.Retryable, code, retryable)
	}
}

func TestReadLifecycleWrongKeyIsRefusedByServer(t *testing.T) {
	b := setup(t, time.Second)
	other, err := cms.New(cms.Config{BaseURL: b.server.URL, Key: []byte("another-key-of-sufficient-size!!"),
		Clock: core.ClockFunc(func() time.Time { return b.now })})
	if err != nil {
		t.Fatal(err)
	}
	_, err = other.ReadLifecycle(context.Background(), target)
	assertCode(t, err, "cms.http_401", false)
	if r := b.cms.Requests(); len(r) != 1 || r[0].SignatureValid {
		t.Fatalf("server should have seen one request with an invalid signature: %+v", r)
	}
}

func TestReadLifecycleStaleTimestampIsRefused(t *testing.T) {
	b := setup(t, time.Second)
	late, err := cms.New(cms.Config{BaseURL: b.server.URL, Key: testKey,
		Clock: core.ClockFunc(func() time.Time { return b.now.Add(-time.Hour) })})
	if err != nil {
		t.Fatal(err)
	}
	_, err = late.ReadLifecycle(context.Background(), target)
	assertCode(t, err, "cms.http_401", false)
}

func TestReadLifecycleConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	client, err := cms.New(cms.Config{BaseURL: "http://" + addr, Key: testKey, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.ReadLifecycle(context.Background(), target)
	assertCode(t, err, cms.CodeUnavailable, true)
}

func TestReadLifecycleCallerCancelled(t *testing.T) {
	b := setup(t, 5*time.Second)
	b.cms.Script(target.EventID, cmstest.Step{Status: "processing", Delay: 5 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := b.client.ReadLifecycle(ctx, target)
	assertCode(t, err, cms.CodeCancelled, true)
}

func TestReadLifecycleTargetInvalid(t *testing.T) {
	b := setup(t, time.Second)
	bad := target
	bad.SiteID = "site/../x"
	_, err := b.client.ReadLifecycle(context.Background(), bad)
	assertCode(t, err, cms.CodeTargetInvalid, false)
	if n := len(b.cms.Requests()); n != 0 {
		t.Fatalf("invalid target reached the server (%d requests)", n)
	}
}

func TestReadLifecycleJobCountMismatch(t *testing.T) {
	b := setup(t, time.Second)
	three := target
	three.JobCount = 3
	_, err := b.client.ReadLifecycle(context.Background(), three)
	assertCode(t, err, lifecycle.CodeResponseInvalid, false)
}

// The signed path includes a base-URL prefix: the server sees and verifies
// the full path.
func TestReadLifecycleBasePrefixIsSigned(t *testing.T) {
	var got struct{ path, id, ts, sig string }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.path = r.URL.EscapedPath()
		got.id = r.Header.Get(signing.HeaderRequestID)
		got.ts = r.Header.Get(signing.HeaderTimestamp)
		got.sig = r.Header.Get(signing.HeaderSignature)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	client, err := cms.New(cms.Config{BaseURL: srv.URL + "/cms/", Key: testKey})
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.ReadLifecycle(context.Background(), target)
	assertCode(t, err, "cms.http_503", true)
	if want := "/cms/v1/sites/site-berlin/changes/evt-2026-0001/lifecycle"; got.path != want {
		t.Fatalf("path %q, want %q", got.path, want)
	}
	if !signing.VerifyRequest(testKey, "GET", got.path, got.id, got.ts, nil, got.sig) {
		t.Fatal("signature does not cover the full path")
	}
}

func TestNewConfigValidation(t *testing.T) {
	tests := []struct {
		name string
		cfg  cms.Config
	}{
		{"empty url", cms.Config{Key: testKey}},
		{"ftp url", cms.Config{BaseURL: "ftp://cms.example", Key: testKey}},
		{"no host", cms.Config{BaseURL: "https://", Key: testKey}},
		{"query", cms.Config{BaseURL: "https://cms.example/?a=1", Key: testKey}},
		{"credentials", cms.Config{BaseURL: "https://u:p@cms.example", Key: testKey}},
		{"no key", cms.Config{BaseURL: "https://cms.example"}},
		{"short key", cms.Config{BaseURL: "https://cms.example", Key: []byte("short")}},
		{"negative timeout", cms.Config{BaseURL: "https://cms.example", Key: testKey, Timeout: -time.Second}},
		{"huge timeout", cms.Config{BaseURL: "https://cms.example", Key: testKey, Timeout: time.Hour}},
		{"negative body limit", cms.Config{BaseURL: "https://cms.example", Key: testKey, MaxBodyBytes: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := cms.New(tt.cfg)
			assertCode(t, err, cms.CodeConfigInvalid, false)
			if strings.Contains(err.Error(), string(testKey)) {
				t.Fatal("error leaks the key")
			}
		})
	}
	c, err := cms.New(cms.Config{BaseURL: "https://cms.example", Key: testKey})
	if err != nil {
		t.Fatal(err)
	}
	if c.Timeout() != cms.DefaultTimeout {
		t.Fatalf("default timeout %s", c.Timeout())
	}
}
