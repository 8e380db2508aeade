package cmsdelivery_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/localeflow/localeflow/adapters/cmsdelivery"
	"github.com/localeflow/localeflow/adapters/cmsdelivery/cmsdeliverytest"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/signing"
)

var key = []byte("cms-delivery-test-key-0123456789")

// TestDeliveryVector checks the request signing against the contract
// vector (testdata/signatures.json, copied from the shared vectors).
func TestDeliveryVector(t *testing.T) {
	raw, err := os.ReadFile("testdata/signatures.json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		D struct {
			KeyHex    string `json:"key_hex"`
			Path      string `json:"path"`
			RequestID string `json:"request_id"`
			Timestamp string `json:"timestamp"`
			Body      string `json:"body"`
			Signature string `json:"signature"`
		} `json:"delivery_request"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	k, _ := hex.DecodeString(v.D.KeyHex)
	if cmsdelivery.DeliveriesPath("site-berlin", "evt-2026-0001") != v.D.Path {
		t.Fatalf("path %s", cmsdelivery.DeliveriesPath("site-berlin", "evt-2026-0001"))
	}
	var seen string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Get(signing.HeaderSignature)
		if !signing.VerifyRequest(k, r.Method, r.URL.Path, r.Header.Get(signing.HeaderRequestID), r.Header.Get(signing.HeaderTimestamp), []byte(v.D.Body), seen) {
			w.WriteHeader(401)
		}
	}))
	defer srv.Close()
	c, err := cmsdelivery.New(cmsdelivery.Config{BaseURL: srv.URL, Key: k})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Deliver(context.Background(), "site-berlin", "evt-2026-0001", []byte(v.D.Body)); err != nil {
		t.Fatal(err)
	}
	if got := signing.SignRequest(k, "POST", v.D.Path, v.D.RequestID, v.D.Timestamp, []byte(v.D.Body)); got != v.D.Signature {
		t.Fatalf("vector signature %s", got)
	}
}

func TestStatusMapping(t *testing.T) {
	for status, want := range map[int]struct {
		code      string
		retryable bool
	}{
		200: {}, 201: {}, 204: {},
		400: {"cms.http_400", false}, 409: {"cms.http_409", false}, 302: {"cms.http_302", false},
		429: {"cms.http_429", true}, 503: {"cms.http_503", true},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(status) }))
		c, _ := cmsdelivery.New(cmsdelivery.Config{BaseURL: srv.URL, Key: key})
		err := c.Deliver(context.Background(), "s", "e", []byte("{}"))
		srv.Close()
		if core.CodeOf(err) != want.code || core.IsRetryable(err) != want.retryable {
			t.Errorf("%d: %v", status, err)
		}
	}
	c, _ := cmsdelivery.New(cmsdelivery.Config{BaseURL: "http://127.0.0.1:1", Key: key})
	if err := c.Deliver(context.Background(), "s", "e", []byte("{}")); !core.HasCode(err, cmsdelivery.CodeUnavailable) || !core.IsRetryable(err) {
		t.Fatal(err)
	}
	if err := c.Deliver(context.Background(), "s/x", "e", []byte("{}")); !core.HasCode(err, cmsdelivery.CodeTargetInvalid) {
		t.Fatal(err)
	}
	block := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-block }))
	defer slow.Close()
	defer close(block)
	c, _ = cmsdelivery.New(cmsdelivery.Config{BaseURL: slow.URL, Key: key, Timeout: 50 * time.Millisecond})
	if err := c.Deliver(context.Background(), "s", "e", []byte("{}")); !core.HasCode(err, cmsdelivery.CodeTimeout) || !core.IsRetryable(err) {
		t.Fatal(err)
	}
}

// TestCoordinatorDeliversToVerifyingServer runs a release through the real
// client to the verifying server, including a 503 and a re-send.
func TestCoordinatorDeliversToVerifyingServer(t *testing.T) {
	fx := releasetest.NewFixture()
	approval, publication := fx.Authorities()
	srv := cmsdeliverytest.New(key, publication.PublicKey(), approval.PublicKey())
	defer srv.Close()
	client, err := cmsdelivery.New(cmsdelivery.Config{BaseURL: srv.URL, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	clk := core.ClockFunc(func() time.Time { return now })
	c, err := release.NewCoordinator(release.Dependencies{
		Store: releasetest.NewMemStore(), EventKey: fx.EventKey,
		Evidence: releasetest.Provider{Responder: &releasetest.Responder{Fixture: fx, Clock: clk}}, CMS: client,
		Verifiers: fx.Verifiers(), Approval: approval, Publication: publication,
	}, clk, nil, release.DefaultConfig("rev-1", "worker-1"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	plan := releasetest.NewPlan("evt-cms", "de-DE", "fr-FR")
	if _, _, err := c.Ingest(ctx, "localeflow.plan.accepted", fx.Detail(plan.PlanPayload())); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"fr-FR", "de-DE"} {
		if _, _, err := c.Ingest(ctx, "localeflow.job.completed", fx.Detail(plan.ResultPayload(l, releasetest.ResultOptions{}))); err != nil {
			t.Fatal(err)
		}
		if _, err := releasetest.Step(ctx, c, "evt-cms"); err != nil {
			t.Fatal(err)
		}
	}
	srv.FailFirst(1)
	if _, err := c.Deliver(ctx, "evt-cms"); !core.HasCode(err, "cms.http_503") {
		t.Fatalf("%v", err)
	}
	now = now.Add(10 * time.Second)
	o, err := c.Deliver(ctx, "evt-cms")
	if err != nil || o.Status != release.OutcomeDelivered {
		t.Fatalf("%+v %v", o, err)
	}
	calls, rejected, _, bundles := srv.Stats()
	if calls != 2 || rejected != 0 || len(bundles) != 1 || len(bundles[o.DeliveryID].Locales) != 2 {
		t.Fatalf("calls=%d rejected=%d bundles=%v", calls, rejected, bundles)
	}
}

func TestServerRejectsForgeries(t *testing.T) {
	fx := releasetest.NewFixture()
	approval, publication := fx.Authorities()
	other, _ := release.NewPublicationAuthority(make([]byte, 32))
	srv := cmsdeliverytest.New(key, publication.PublicKey(), approval.PublicKey())
	defer srv.Close()
	bundle, _ := json.Marshal(contract.Bundle{Schema: contract.DeliveryBundleSchema, DeliveryID: "dlv-1", EventID: "e", SiteID: "s", Locales: []contract.BundleLocale{{Text: "x", TargetSHA256: core.SHA256Hex([]byte("x"))}}})
	forged, _ := other.Sign(bundle)
	body, _ := json.Marshal(contract.DeliveryRequest{Schema: contract.DeliveryRequestSchema, DeliveryID: "dlv-1", EventID: "e", SiteID: "s", Bundle: forged})
	c, _ := cmsdelivery.New(cmsdelivery.Config{BaseURL: srv.URL, Key: key})
	if err := c.Deliver(context.Background(), "s", "e", body); !core.HasCode(err, "cms.http_403") {
		t.Fatalf("forged bundle: %v", err)
	}
	wrongKey, _ := cmsdelivery.New(cmsdelivery.Config{BaseURL: srv.URL, Key: []byte("wrong-key-0123456789")})
	if err := wrongKey.Deliver(context.Background(), "s", "e", body); !core.HasCode(err, "cms.http_401") {
		t.Fatalf("wrong hmac key: %v", err)
	}
	// Correct bundle signature, approval signed by somebody else.
	good, _ := publication.Sign(bundle)
	body, _ = json.Marshal(contract.DeliveryRequest{Schema: contract.DeliveryRequestSchema, DeliveryID: "dlv-1", EventID: "e", SiteID: "s", Bundle: good})
	if err := c.Deliver(context.Background(), "s", "e", body); !core.HasCode(err, "cms.http_403") {
		t.Fatalf("unapproved locale: %v", err)
	}
	if _, rejected, _, _ := srv.Stats(); rejected != 3 {
		t.Fatalf("rejected %d", rejected)
	}
}
