package main

import (
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/localeflow/localeflow/cmd/localeflow/internal/conformance"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/dev/reference"
	"github.com/localeflow/localeflow/peer"
)

const refCMSKeyHex = "636f6e666f726d616e63652d636c692d636d732d6b65792d30303030303031" // conformance-cli-cms-key-0000001

// refCMS serves a reference CMS (with breaks) on 127.0.0.1 and returns its
// URL and the env holding the CMS key and the authority seeds.
func refCMS(t *testing.T, breaks ...string) (string, map[string]string) {
	t.Helper()
	key, _ := hex.DecodeString(refCMSKeyHex)
	fx := releasetest.NewFixture()
	a, p := fx.Authorities()
	c, err := reference.NewCMS(reference.CMSConfig{Key: key, Publication: p.PublicKey(), Approval: a.PublicKey(), Breaks: breaks})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	for _, s := range []reference.ChangeSpec{
		{EventID: "evt-cli", SiteID: "site-1", PlanID: "plan-cli", WebsiteVersion: "v1", SourceSequence: 2, Locales: []string{"de-DE"}},
		{EventID: "evt-busy", SiteID: "site-1", PlanID: "plan-busy", WebsiteVersion: "v1", SourceSequence: 2, Locales: []string{"de-DE"}, FailFirst: 100},
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
	return srv.URL, map[string]string{contract.Hex(contract.KeyCMS): refCMSKeyHex,
		envApprovalSeedHex: hex.EncodeToString(fx.ApprovalSeed), envPublicationSeedHex: hex.EncodeToString(fx.PublicationKey)}
}

func TestConformanceCMSCommand(t *testing.T) {
	url, env := refCMS(t)
	args := []string{"conformance", "cms", "--base-url", url, "--site", "site-1", "--change", "evt-cli", "--busy-change", "evt-busy"}
	r := runCLI(env, append(args, "--deliver")...)
	if r.code != exitOK {
		t.Fatalf("exit %d\n%s%s", r.code, r.out, r.err)
	}
	for _, want := range []string{"PASS  MUST    lifecycle.signature", "PASS  SHOULD  lifecycle.refuse_replay", "PASS  MUST    bundle.approval_expiry",
		"PASS  MUST    delivery.idempotent", "PASS  MUST    retry_after", "cms: 31 passed, 0 failed, 0 skipped"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("missing %q in\n%s", want, r.out)
		}
	}
	for _, secret := range []string{refCMSKeyHex, env[envApprovalSeedHex], env[envPublicationSeedHex]} {
		if strings.Contains(r.out+r.err, secret) {
			t.Fatalf("key material printed:\n%s", r.out)
		}
	}
	// Without --deliver nothing is POSTed: the delivery checks are SKIP.
	r = runCLI(map[string]string{contract.Hex(contract.KeyCMS): refCMSKeyHex}, args...)
	if r.code != exitOK || !strings.Contains(r.out, "SKIP  MUST    delivery.accept  (delivery checks POST deliveries") || !strings.Contains(r.out, "11 passed, 0 failed, 20 skipped") {
		t.Fatalf("exit %d\n%s", r.code, r.out)
	}
	// A SHOULD broken: exit 4; a MUST broken: exit 1; JSON report.
	url, env = refCMS(t, "skip:"+peer.CodeRequestStale)
	r = runCLI(env, "conformance", "cms", "--base-url", url, "--site", "site-1", "--change", "evt-cli", "--deliver")
	if r.code != 4 || !strings.Contains(r.out, "FAIL  SHOULD  lifecycle.refuse_stale  conformance.not_refused  (answered 200 (no code), want 401 with code request.stale)") {
		t.Fatalf("exit %d\n%s", r.code, r.out)
	}
	url, env = refCMS(t, reference.BreakAnswerUnsigned)
	r = runCLI(env, "conformance", "cms", "--json", "--base-url", url, "--site", "site-1", "--change", "evt-cli")
	var rep struct {
		Checks []struct{ Check, Result, Code string }
		Exit   int
	}
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil || r.code != exitBad || rep.Exit != 1 {
		t.Fatalf("exit %d %v\n%s", r.code, err, r.out)
	}
	if rep.Checks[1].Check != "lifecycle.signature" || rep.Checks[1].Result != "FAIL" {
		t.Fatalf("%+v", rep.Checks[1])
	}
	// A pinned identity: the right one passes, another plan fails
	// lifecycle.strict.
	url, env = refCMS(t)
	pin := []string{"conformance", "cms", "--base-url", url, "--site", "site-1", "--change", "evt-cli", "--website-version", "v1", "--source-sequence", "2", "--job-count", "1"}
	r = runCLI(env, append(pin, "--plan-id", "plan-cli")...)
	if r.code != exitOK || !strings.Contains(r.out, "PASS  MUST    lifecycle.strict  (status processing, 1 locale(s); identity pinned by the flags)") {
		t.Fatalf("exit %d\n%s", r.code, r.out)
	}
	r = runCLI(env, append(pin, "--plan-id", "plan-other")...)
	if r.code != exitBad || !strings.Contains(r.out, "FAIL  MUST    lifecycle.strict  lifecycle_monitor.response_invalid") {
		t.Fatalf("exit %d\n%s", r.code, r.out)
	}
	// Unreachable: exit 3.
	_, env = refCMS(t)
	r = runCLI(env, "conformance", "cms", "--base-url", "http://127.0.0.1:1", "--site", "site-1", "--change", "evt-cli")
	if r.code != exitRuntime || !strings.Contains(r.out, "FAIL  MUST    lifecycle.answer  conformance.unreachable") {
		t.Fatalf("exit %d\n%s", r.code, r.out)
	}
}

func TestConformanceEvidenceCommand(t *testing.T) {
	for _, tc := range []struct {
		brk  string
		exit int
		line string
	}{
		{"", exitOK, "PASS  MUST    receipt.independent_review"},
		{reference.BreakWrongIssuer, exitBad, "FAIL  MUST    receipt.quality  receipt.issuer_untrusted"},
		{"skip:" + peer.CodeEvidenceRequestID, 4, "FAIL  SHOULD  request.binding  conformance.not_refused"},
	} {
		t.Run(tc.brk, func(t *testing.T) {
			key := []byte("conformance-cli-evidence-key-01")
			var breaks []string
			if tc.brk != "" {
				breaks = []string{tc.brk}
			}
			fx := releasetest.NewFixture()
			ev, err := reference.NewEvidence(reference.EvidenceConfig{Key: key, Issuer: "q", IssuerSeed: fx.IssuerKey.Seed(),
				HumanIssuer: "h", HumanIssuerSeed: fx.HumanIssuerKey.Seed(), ReviewIssuer: "r", ReviewIssuerSeed: fx.ReviewIssuerKey.Seed(), Breaks: breaks})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(ev.Close)
			srv, err := reference.Serve("127.0.0.1:0", ev)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = srv.Close() })
			env := map[string]string{contract.Hex(contract.KeyEvidence): hex.EncodeToString(key)}
			for _, kv := range ev.Issuers().Env() {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
			r := runCLI(env, "conformance", "evidence", "--base-url", srv.URL)
			if r.code != tc.exit || !strings.Contains(r.out, tc.line) {
				t.Fatalf("exit %d, want %d; want %q in\n%s%s", r.code, tc.exit, tc.line, r.out, r.err)
			}
		})
	}
}

func TestConformanceServersUsage(t *testing.T) {
	env := map[string]string{contract.Hex(contract.KeyCMS): refCMSKeyHex}
	for _, args := range [][]string{
		{"conformance", "cms", "--site", "s", "--change", "e"},
		{"conformance", "cms", "--base-url", "http://127.0.0.1:1", "--change", "e"},
		{"conformance", "cms", "--base-url", "http://127.0.0.1:1", "--site", "s", "--change", "e", "--approval-seed-hex", "00"},
		{"conformance", "cms", "--base-url", "http://127.0.0.1:1", "--site", "s", "--change", "e", "--plan-id", "p"},
		{"conformance", "cms", "--base-url", "http://127.0.0.1:1", "--site", "s", "--change", "e", "--detail-type", "x"},
		{"conformance", "cms", "--base-url", "ftp://x", "--site", "s", "--change", "e"},
		{"conformance", "event", "--deliver", "x.json"},
		{"conformance", "evidence", "--base-url", "http://127.0.0.1:1"},
		{"conformance", "evidence", "--base-url", "http://127.0.0.1:1", "--key-hex", refCMSKeyHex, "--issuers-quality", "q=00"},
		{"conformance", "other"},
	} {
		if r := runCLI(env, args...); r.code != exitUsage {
			t.Errorf("%v: exit %d, want %d\n%s%s", args, r.code, exitUsage, r.out, r.err)
		}
	}
	r := runCLI(nil, "conformance", "--help")
	if r.code != exitOK || !strings.Contains(r.out, "--deliver            ALSO RUN THE DELIVERY CHECKS, WHICH CHANGE THE CMS") || !strings.Contains(r.out, "4 only SHOULD checks failed") {
		t.Fatalf("help: %d %s", r.code, r.out)
	}
	// The help names every check.
	help := strings.Join(strings.Fields(r.out), " ")
	for _, list := range [][]struct{ Name, Level string }{conformance.CMSChecks, conformance.EvidenceChecks} {
		for _, c := range list {
			if !strings.Contains(help, " "+c.Name+",") && !strings.Contains(help, " "+c.Name+".") {
				t.Errorf("help does not name %s", c.Name)
			}
		}
	}
}
