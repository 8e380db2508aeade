package conformance_test

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/localeflow/localeflow/cmd/localeflow/internal/conformance"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/dev/reference"
	"github.com/localeflow/localeflow/peer"
)

var cmsKey = []byte("conformance-cms-key-0123456789")

// cmsServer starts a reference CMS with breaks, a test change and a busy
// change (answered 503).
func cmsServer(t *testing.T, breaks ...string) (string, releasetest.Fixture) {
	t.Helper()
	fx := releasetest.NewFixture()
	a, p := fx.Authorities()
	c, err := reference.NewCMS(reference.CMSConfig{Key: cmsKey, Publication: p.PublicKey(), Approval: a.PublicKey(), Breaks: breaks})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	for _, s := range []reference.ChangeSpec{
		{EventID: "evt-conf", SiteID: "site-berlin", PlanID: "plan-conf", WebsiteVersion: "v1", SourceSequence: 3, Locales: []string{"de-DE", "fr-FR"}},
		{EventID: "evt-busy", SiteID: "site-berlin", PlanID: "plan-busy", WebsiteVersion: "v1", SourceSequence: 3, Locales: []string{"de-DE"}, FailFirst: 100},
	} {
		if err := c.Put(s); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := reference.Serve("127.0.0.1:0", c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv.URL, fx
}

func runCMS(t *testing.T, url string, fx releasetest.Fixture) conformance.Report {
	t.Helper()
	rep, err := conformance.CMS(context.Background(), conformance.CMSOptions{BaseURL: url, Keys: [][]byte{cmsKey},
		SiteID: "site-berlin", EventID: "evt-conf", BusyEventID: "evt-busy", Deliver: true, ApprovalSeed: fx.ApprovalSeed, PublicationSeed: fx.PublicationKey})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// expect checks that exactly the checks in failing fail, that the others
// pass (none is skipped), and the exit code.
func expect(t *testing.T, rep conformance.Report, names []struct{ Name, Level string }, exit int, failing ...string) {
	t.Helper()
	if len(rep.Checks) != len(names) {
		t.Errorf("%d checks, want %d", len(rep.Checks), len(names))
	}
	for i, n := range names {
		if i >= len(rep.Checks) || rep.Checks[i].Check != n.Name || rep.Checks[i].Level != n.Level {
			t.Errorf("check %d: %+v, want %s (%s)", i, rep.Result(n.Name), n.Name, n.Level)
			continue
		}
		got := rep.Checks[i]
		want := conformance.Pass
		if slices.Contains(failing, n.Name) {
			want = conformance.Fail
		}
		if got.Result != want {
			t.Errorf("%s: %s %s (%s), want %s", n.Name, got.Result, got.Code, got.Detail, want)
		}
	}
	if rep.Exit() != exit {
		t.Errorf("exit %d, want %d", rep.Exit(), exit)
	}
}

func TestCMSReferencePasses(t *testing.T) {
	url, fx := cmsServer(t)
	expect(t, runCMS(t, url, fx), conformance.CMSChecks, conformance.ExitOK)
}

// TestCMSBreaks: each break of the reference CMS is reported by its own
// check(s), the others pass, with the documented exit code.
func TestCMSBreaks(t *testing.T) {
	must, should := conformance.ExitMustFailed, conformance.ExitShould
	for _, tc := range []struct {
		brk     string
		exit    int
		failing []string
	}{
		{"skip:" + peer.CodeRequestSignature, must, []string{"lifecycle.refuse_unsigned", "lifecycle.refuse_bad_signature", "lifecycle.refuse_tampered",
			"delivery.refuse_unsigned", "delivery.refuse_bad_signature", "delivery.refuse_tampered"}},
		{"skip:" + peer.CodeRequestStale, should, []string{"lifecycle.refuse_stale", "lifecycle.refuse_future", "delivery.refuse_stale", "delivery.refuse_future"}},
		{"skip:" + peer.CodeRequestReplayed, should, []string{"lifecycle.refuse_replay", "delivery.refuse_replay"}},
		{reference.BreakAnswerUnsigned, must, []string{"lifecycle.signature"}},
		{reference.BreakAnswerWrongSignature, must, []string{"lifecycle.signature"}},
		{reference.BreakBadRetryAfter, must, []string{"retry_after"}},
		{"skip:" + peer.CodeDeliveryRequestInvalid, must, []string{"delivery.request_identity", "delivery.request_strict"}},
		{"skip:" + peer.CodeBundleSignature, must, []string{"bundle.signature"}},
		{"skip:" + peer.CodeBundleDeliveryID, must, []string{"bundle.delivery_id"}},
		{"skip:" + peer.CodeBundleApproval, must, []string{"bundle.approval"}},
		{"skip:" + peer.CodeBundleApprovalMismatch, must, []string{"bundle.approval_binding"}},
		{"skip:" + peer.CodeBundleApprovalExpired, must, []string{"bundle.approval_expiry", "bundle.approval_expiry_instant"}},
		{"skip:" + peer.CodeBundleText, must, []string{"bundle.text_sha256"}},
		{reference.BreakNotIdempotent, must, []string{"delivery.idempotent"}},
		{reference.BreakAcceptConflict, should, []string{"delivery.conflict"}},
	} {
		t.Run(tc.brk, func(t *testing.T) {
			url, fx := cmsServer(t, tc.brk)
			expect(t, runCMS(t, url, fx), conformance.CMSChecks, tc.exit, tc.failing...)
		})
	}
}

// A non-strict answer fails lifecycle.strict; the delivery checks, which
// need the answer's plan and locales, are skipped.
func TestCMSNotStrictAnswer(t *testing.T) {
	url, fx := cmsServer(t, reference.BreakAnswerNotStrict)
	rep := runCMS(t, url, fx)
	if r := rep.Result("lifecycle.strict"); r.Result != conformance.Fail || r.Code != "lifecycle_monitor.response_invalid" {
		t.Fatalf("%+v", r)
	}
	for _, r := range rep.Checks {
		if r.Check != "lifecycle.strict" && r.Result == conformance.Fail {
			t.Errorf("%+v", r)
		}
		if strings.HasPrefix(r.Check, "bundle.") && r.Result != conformance.Skip {
			t.Errorf("%+v", r)
		}
	}
	if rep.Exit() != conformance.ExitMustFailed {
		t.Fatalf("exit %d", rep.Exit())
	}
}

// Without the authorities, the checks needing a valid bundle are
// skipped and the others still run; without --deliver nothing is POSTed.
func TestCMSWithoutAuthoritiesOrDeliver(t *testing.T) {
	url, _ := cmsServer(t)
	rep, err := conformance.CMS(context.Background(), conformance.CMSOptions{BaseURL: url, Keys: [][]byte{cmsKey},
		SiteID: "site-berlin", EventID: "evt-conf", Deliver: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"bundle.signature", "delivery.refuse_unsigned", "delivery.refuse_bad_signature", "delivery.refuse_tampered", "delivery.refuse_stale", "lifecycle.strict"} {
		if r := rep.Result(name); r.Result != conformance.Pass {
			t.Errorf("%+v", r)
		}
	}
	for _, name := range []string{"bundle.approval", "delivery.accept", "delivery.idempotent", "retry_after"} {
		if r := rep.Result(name); r.Result != conformance.Skip {
			t.Errorf("%+v", r)
		}
	}
	if rep.Exit() != conformance.ExitOK {
		t.Errorf("exit %d", rep.Exit())
	}
	// A server that skips the HMAC answers the untrusted bundle 403, not 401.
	url, _ = cmsServer(t, "skip:"+peer.CodeRequestSignature)
	rep, _ = conformance.CMS(context.Background(), conformance.CMSOptions{BaseURL: url, Keys: [][]byte{cmsKey},
		SiteID: "site-berlin", EventID: "evt-conf", Deliver: true})
	if r := rep.Result("delivery.refuse_unsigned"); r.Result != conformance.Fail || r.Code != conformance.CodeWrongRefusal {
		t.Errorf("%+v", r)
	}
	rep, _ = conformance.CMS(context.Background(), conformance.CMSOptions{BaseURL: url, Keys: [][]byte{cmsKey}, SiteID: "site-berlin", EventID: "evt-conf"})
	for _, r := range rep.Checks {
		if (strings.HasPrefix(r.Check, "delivery.") || strings.HasPrefix(r.Check, "bundle.")) && (r.Result != conformance.Skip || !strings.Contains(r.Detail, "--deliver")) {
			t.Errorf("%+v", r)
		}
	}
}

func TestUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	_ = ln.Close()
	rep, err := conformance.CMS(context.Background(), conformance.CMSOptions{BaseURL: url, Keys: [][]byte{cmsKey}, SiteID: "s", EventID: "e"})
	if err != nil || rep.Exit() != conformance.ExitUnreachable || len(rep.Checks) != len(conformance.CMSChecks) {
		t.Fatalf("%v %+v", err, rep)
	}
	rep, err = conformance.Evidence(context.Background(), conformance.EvidenceOptions{BaseURL: url, Keys: [][]byte{cmsKey}, Issuers: releasetest.NewFixture().TrustedIssuers()})
	if err != nil || rep.Exit() != conformance.ExitUnreachable || len(rep.Checks) != len(conformance.EvidenceChecks) {
		t.Fatalf("%v %+v", err, rep)
	}
}

var evidenceKey = []byte("conformance-evidence-key-0123456789")

func seed(label string) []byte {
	s := make([]byte, 32)
	copy(s, label)
	return s
}

// evidenceServer starts a reference provider with breaks and returns its
// URL and the issuers it advertises.
func evidenceServer(t *testing.T, breaks ...string) (string, release.TrustedIssuers) {
	t.Helper()
	ev, err := reference.NewEvidence(reference.EvidenceConfig{Key: evidenceKey,
		Issuer: "q-issuer", IssuerSeed: seed("quality"), HumanIssuer: "h-issuer", HumanIssuerSeed: seed("human"),
		ReviewIssuer: "r-issuer", ReviewIssuerSeed: seed("review"), Breaks: breaks})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ev.Close)
	srv, err := reference.Serve("127.0.0.1:0", ev)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv.URL, TrustedIssuers(t, ev.Issuers())
}

// TrustedIssuers parses the provider's advertised issuer values.
func TrustedIssuers(t *testing.T, r reference.ReceiptIssuers) release.TrustedIssuers {
	t.Helper()
	parse := func(v string) map[string]ed25519.PublicKey {
		name, keyHex, _ := strings.Cut(v, "=")
		key, err := hex.DecodeString(keyHex)
		if err != nil {
			t.Fatal(err)
		}
		return map[string]ed25519.PublicKey{name: key}
	}
	return release.TrustedIssuers{Quality: parse(r.Quality), HumanReview: parse(r.HumanReview), IndependentReview: parse(r.IndependentReview)}
}

func runEvidence(t *testing.T, url string, issuers release.TrustedIssuers) conformance.Report {
	t.Helper()
	rep, err := conformance.Evidence(context.Background(), conformance.EvidenceOptions{BaseURL: url, Keys: [][]byte{evidenceKey}, Issuers: issuers})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestEvidenceReferencePasses(t *testing.T) {
	url, issuers := evidenceServer(t)
	rep := runEvidence(t, url, issuers)
	// No 429/503 was answered: retry_after is skipped.
	if r := rep.Result("retry_after"); r.Result != conformance.Skip {
		t.Fatalf("%+v", r)
	}
	rep.Checks = slices.DeleteFunc(rep.Checks, func(r conformance.Result) bool { return r.Check == "retry_after" })
	expect(t, rep, conformance.EvidenceChecks[:len(conformance.EvidenceChecks)-1], conformance.ExitOK)
}

func TestEvidenceBreaks(t *testing.T) {
	must, should := conformance.ExitMustFailed, conformance.ExitShould
	for _, tc := range []struct {
		brk     string
		exit    int
		failing []string
		code    string // the first failing check's code, when fixed
	}{
		{"skip:" + peer.CodeRequestSignature, must, []string{"request.refuse_unsigned", "request.refuse_bad_signature", "request.refuse_tampered"}, conformance.CodeNotRefused},
		{"skip:" + peer.CodeRequestStale, should, []string{"request.refuse_stale", "request.refuse_future"}, conformance.CodeNotRefused},
		{"skip:" + peer.CodeRequestReplayed, should, []string{"request.refuse_replay"}, conformance.CodeNotRefused},
		{reference.BreakWrongIssuer, must, []string{"receipt.quality"}, release.CodeReceiptIssuerUntrusted},
		{reference.BreakReceiptNotBound, must, []string{"receipt.quality", "receipt.human_review", "receipt.independent_review"}, release.CodeReceiptBindingMismatch},
		{"skip:" + peer.CodeEvidenceRequestID, should, []string{"request.binding"}, conformance.CodeNotRefused},
		{"skip:" + peer.CodeEvidenceRequestText, should, []string{"request.text_sha256"}, conformance.CodeNotRefused},
		{reference.BreakAnswerNotStrict, must, []string{"evidence.strict", "receipt.human_review", "receipt.independent_review"}, release.CodeEvidenceResponseInvalid},
	} {
		t.Run(tc.brk, func(t *testing.T) {
			url, issuers := evidenceServer(t, tc.brk)
			rep := runEvidence(t, url, issuers)
			if r := rep.Result(tc.failing[0]); r.Code != tc.code {
				t.Errorf("%s: code %q, want %q", r.Check, r.Code, tc.code)
			}
			names := conformance.EvidenceChecks[:len(conformance.EvidenceChecks)-1]
			rep.Checks = slices.DeleteFunc(rep.Checks, func(r conformance.Result) bool { return r.Check == "retry_after" })
			if tc.brk == reference.BreakAnswerNotStrict {
				// receipt.quality needs a strict answer: skipped.
				if r := rep.Result("receipt.quality"); r.Result != conformance.Skip {
					t.Errorf("%+v", r)
				}
				rep.Checks = slices.DeleteFunc(rep.Checks, func(r conformance.Result) bool { return r.Check == "receipt.quality" })
				names = slices.DeleteFunc(slices.Clone(names), func(n struct{ Name, Level string }) bool { return n.Name == "receipt.quality" })
			}
			expect(t, rep, names, tc.exit, tc.failing...)
		})
	}
}
