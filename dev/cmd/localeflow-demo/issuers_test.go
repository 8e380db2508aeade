package main

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/adapters/evidence"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/dev/reference"
)

// coordinatorIssuers reads the per-kind issuer variables the demo gives
// the coordinator, as the function does (one set per kind).
func coordinatorIssuers(t *testing.T, env []string) release.TrustedIssuers {
	t.Helper()
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	if _, ok := vars["LOCALEFLOW_RECEIPT_ISSUERS"]; ok {
		t.Fatal("the demo still sets the retired shared LOCALEFLOW_RECEIPT_ISSUERS")
	}
	parse := func(name string) map[string]ed25519.PublicKey {
		issuer, keyHex, _ := strings.Cut(vars[name], "=")
		key, err := hex.DecodeString(keyHex)
		if issuer == "" || err != nil || len(key) != ed25519.PublicKeySize {
			t.Fatalf("%s = %q", name, vars[name])
		}
		return map[string]ed25519.PublicKey{issuer: key}
	}
	ti := release.TrustedIssuers{
		Quality:           parse("LOCALEFLOW_RECEIPT_ISSUERS_QUALITY"),
		HumanReview:       parse("LOCALEFLOW_RECEIPT_ISSUERS_HUMAN_REVIEW"),
		IndependentReview: parse("LOCALEFLOW_RECEIPT_ISSUERS_INDEPENDENT_REVIEW"),
	}
	if err := ti.Validate(); err != nil {
		t.Fatalf("demo issuers: %v", err)
	}
	return ti
}

// TestDemoLegalTextNeedsHumanReviewIssuer runs the demo's legal-text change
// against the demo's reference evidence provider with the coordinator's
// demo configuration: it is approved, and it is not once the human-review
// issuer is no longer trusted, although its quality receipts still are.
func TestDemoLegalTextNeedsHumanReviewIssuer(t *testing.T) {
	k, err := newKeys()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := startServers(k, reference.Faults{}, reference.Faults{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	trusted := coordinatorIssuers(t, functionEnv(resourceNames{}, k, srv, srv.Evidence.Issuers())["coordinator"])
	var legal change
	for _, ch := range scenario("t3") {
		if strings.HasPrefix(ch.Story, "legal text") {
			legal = ch
		}
	}
	if legal.EventID == "" {
		t.Fatal("the scenario has no legal-text change")
	}

	run := func(t *testing.T, ti release.TrustedIssuers) map[string]error {
		t.Helper()
		ev, err := evidence.New(evidence.Config{BaseURL: srv.EvidenceURL, Key: k.Evidence, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		fx := releasetest.NewFixture()
		approval, publication := fx.Authorities()
		c, err := release.NewCoordinator(release.Dependencies{
			Store: releasetest.NewMemStore(), EventKey: k.Event, Evidence: ev, CMS: &releasetest.CMS{},
			Verifiers: ti.Verifiers(), Approval: approval, Publication: publication,
		}, core.SystemClock{}, nil, release.DefaultConfig("rev-1", "worker-1"))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		plan, _ := legal.planPayload()
		pd, _ := signedDetail(k.Event, contract.DetailPlanAccepted, plan)
		if _, _, err := c.Ingest(ctx, contract.DetailPlanAccepted, pd); err != nil {
			t.Fatal(err)
		}
		errs := map[string]error{}
		for _, j := range legal.Jobs {
			p, _ := legal.jobPayload(j)
			jd, _ := signedDetail(k.Event, contract.DetailJobCompleted, p)
			if _, _, err := c.Ingest(ctx, contract.DetailJobCompleted, jd); err != nil {
				t.Fatal(err)
			}
			_, errs[j.Locale] = releasetest.Step(ctx, c, legal.EventID)
		}
		return errs
	}

	for locale, err := range run(t, trusted) {
		if err != nil {
			t.Errorf("%s with the demo's issuers: %v", locale, err)
		}
	}
	foreign := trusted
	other := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)).Public().(ed25519.PublicKey)
	foreign.HumanReview = map[string]ed25519.PublicKey{"someone-else": other}
	errs := run(t, foreign)
	// The human-review locale's refused receipt blocks the release; a
	// locale whose step runs after that meets the block and approves
	// nothing (a blocked release writes nothing new), one before it is
	// approved.
	blocked := false
	for _, j := range legal.Jobs {
		err := errs[j.Locale]
		switch {
		case j.HumanReview:
			if !core.HasCode(err, "release.receipt.issuer_unknown") {
				t.Errorf("%s (human review) without its issuer trusted: err = %v, want release.receipt.issuer_unknown", j.Locale, err)
			}
			blocked = true
		case !blocked && err != nil:
			t.Errorf("%s (no human review, before the block): %v", j.Locale, err)
		case blocked && err == nil:
			t.Errorf("%s (no human review) was approved on the blocked release", j.Locale)
		}
	}
}
