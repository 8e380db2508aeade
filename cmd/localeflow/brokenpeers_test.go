package main

import (
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/dev/reference"
)

// brokenCMS serves a reference CMS with one defect (none for "") whose
// test change has three locales, and returns the conformance command's
// arguments and environment.
func brokenCMS(t *testing.T, defect string, faults reference.Faults) ([]string, map[string]string) {
	t.Helper()
	key, _ := hex.DecodeString(refCMSKeyHex)
	fx := releasetest.NewFixture()
	a, p := fx.Authorities()
	var breaks []string
	if defect != "" {
		breaks = []string{defect}
	}
	c, err := reference.NewCMS(reference.CMSConfig{Key: key, Publication: p.PublicKey(), Approval: a.PublicKey(), Breaks: breaks, Faults: faults})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	for _, s := range []reference.ChangeSpec{
		{EventID: "evt-three", SiteID: "site-1", PlanID: "plan-three", WebsiteVersion: "v1", SourceSequence: 2, Locales: []string{"de-DE", "fr-FR", "it-IT"}},
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
	return []string{"conformance", "cms", "--base-url", srv.URL, "--site", "site-1", "--change", "evt-three", "--busy-change", "evt-busy", "--deliver"},
		map[string]string{contract.Hex(contract.KeyCMS): refCMSKeyHex,
			envApprovalSeedHex: hex.EncodeToString(fx.ApprovalSeed), envPublicationSeedHex: hex.EncodeToString(fx.PublicationKey)}
}

// brokenEvidence serves a reference evidence provider with one defect.
func brokenEvidence(t *testing.T, defect string, faults reference.Faults) ([]string, map[string]string) {
	t.Helper()
	key := []byte("conformance-broken-evidence-key-01")
	var breaks []string
	if defect != "" {
		breaks = []string{defect}
	}
	fx := releasetest.NewFixture()
	ev, err := reference.NewEvidence(reference.EvidenceConfig{Key: key, Issuer: "q", IssuerSeed: fx.IssuerKey.Seed(),
		HumanIssuer: "h", HumanIssuerSeed: fx.HumanIssuerKey.Seed(), ReviewIssuer: "r", ReviewIssuerSeed: fx.ReviewIssuerKey.Seed(),
		Breaks: breaks, Faults: faults})
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
	return []string{"conformance", "evidence", "--base-url", srv.URL}, env
}

const producerKeyHex = "70726f64756365722d6576656e742d6b65792d30303030303030303030303031" // producer-event-key-00000000000001

// brokenProducer writes a producer's plan and job events to files and
// returns the `conformance event --plan` arguments.
func brokenProducer(t *testing.T, defect string) []string {
	t.Helper()
	key, _ := hex.DecodeString(producerKeyHex)
	plan, jobs, err := reference.ProducerEvents(defect, key, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, raw []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	args := []string{"conformance", "event", "--key-hex", producerKeyHex, "--plan", write("plan.json", plan)}
	for i, j := range jobs {
		args = append(args, write(fmt.Sprintf("job-%d.json", i), j))
	}
	return args
}

// TestConformanceCatchesBrokenPeers measures the checker the way the
// simulation is measured: every broken reference peer of dev/reference
// (Defects: each one realistic mistake of a CMS, an evidence provider or
// a producer) fails `localeflow conformance`, run as a team runs it; the
// unbroken references pass, also when they answer some requests 503.
func TestConformanceCatchesBrokenPeers(t *testing.T) {
	// Every fourth request answered 503: a single 503 is retried, as
	// localeflow retries it, and fails no check.
	flaky := reference.Faults{Every: 4}
	for _, ref := range []struct {
		name string
		run  func() result
	}{
		{"cms", func() result { args, env := brokenCMS(t, "", reference.Faults{}); return runCLI(env, args...) }},
		{"cms with 503s", func() result { args, env := brokenCMS(t, "", flaky); return runCLI(env, args...) }},
		{"evidence", func() result { args, env := brokenEvidence(t, "", reference.Faults{}); return runCLI(env, args...) }},
		{"evidence with 503s", func() result { args, env := brokenEvidence(t, "", flaky); return runCLI(env, args...) }},
		{"producer", func() result { return runCLI(nil, brokenProducer(t, "")...) }},
	} {
		if r := ref.run(); r.code != exitOK {
			t.Fatalf("the reference %s fails conformance: exit %d\n%s%s", ref.name, r.code, r.out, r.err)
		}
	}
	caught, total := map[string]int{}, map[string]int{}
	for _, d := range reference.Defects() {
		var r result
		switch d.Kind {
		case "cms":
			args, env := brokenCMS(t, d.ID, reference.Faults{})
			r = runCLI(env, args...)
		case "evidence":
			args, env := brokenEvidence(t, d.ID, reference.Faults{})
			r = runCLI(env, args...)
		case "producer":
			r = runCLI(nil, brokenProducer(t, d.ID)...)
		}
		total[d.Kind]++
		if r.code == exitOK || r.code == exitUsage {
			t.Errorf("%s %s (%s): exit %d, want a failed check\n%s%s", d.Kind, d.ID, d.What, r.code, r.out, r.err)
			continue
		}
		caught[d.Kind]++
	}
	for _, kind := range []string{"cms", "evidence", "producer"} {
		t.Logf("%s: %d of %d broken peers caught", kind, caught[kind], total[kind])
	}
	if total["cms"] < 25 || total["evidence"] < 10 || total["producer"] < 10 {
		t.Errorf("too few broken peers: %v", total)
	}
}

// TestConformanceEventPlanBindings: with --plan, the three job↔plan
// mistakes each fail the binding check with the coordinator's code and a
// message of their own; without --plan the same jobs pass.
func TestConformanceEventPlanBindings(t *testing.T) {
	for _, tc := range []struct{ defect, line string }{
		{reference.ProducerResultSourceMismatch, "binding  result.source_mismatch  (the result's source_sha256 is not the plan job's"},
		{reference.ProducerResultLocaleMismatch, "binding  result.binding_mismatch  (the result's target_locale is not the plan job's)"},
		{reference.ProducerResultContentType, "binding  result.binding_mismatch  (the result's content_type is not the plan job's)"},
		{reference.ProducerJobNotInPlan, "binding  coordinator.job.plan_mismatch  (the plan holds no job with this job_id)"},
		{reference.ProducerJobOtherPlan, "binding  coordinator.job.plan_mismatch  (the job's plan_id is not the plan's)"},
	} {
		args := brokenProducer(t, tc.defect)
		r := runCLI(nil, args...)
		if r.code != exitBad || !strings.Contains(r.out, "FAIL  ") || !strings.Contains(r.out, tc.line) || !strings.Contains(r.out, "3 of 4 files pass") {
			t.Errorf("%s: exit %d, want %q in\n%s", tc.defect, r.code, tc.line, r.out)
		}
		// Each file alone passes: only the plan tells.
		alone := append([]string{"conformance", "event", "--key-hex", producerKeyHex}, args[len(args)-1])
		if r := runCLI(nil, alone...); r.code != exitOK {
			t.Errorf("%s: the job alone: exit %d\n%s", tc.defect, r.code, r.out)
		}
	}
	// One job, two different results: the second file is refused.
	r := runCLI(nil, brokenProducer(t, reference.ProducerResultTwice)...)
	if r.code != exitBad || !strings.Contains(r.out, "binding  coordinator.job.conflict  (another file gives this job another result") || !strings.Contains(r.out, "4 of 5 files pass") {
		t.Errorf("result twice: exit %d\n%s", r.code, r.out)
	}
	// --plan must name a plan, and the files beside it jobs.
	args := brokenProducer(t, "")
	r = runCLI(nil, "conformance", "event", "--key-hex", producerKeyHex, "--plan", args[len(args)-1], args[5])
	if r.code != exitBad || !strings.Contains(r.out, codeConformanceNotPlan) || !strings.Contains(r.out, codeConformanceNotJob) {
		t.Errorf("exit %d\n%s", r.code, r.out)
	}
}

// TestConformanceDeliveryWithoutLifecycleAnswer: with the identity pinned
// and --locales, the delivery checks run even when the lifecycle answer
// is not strict (they used to be skipped).
func TestConformanceDeliveryWithoutLifecycleAnswer(t *testing.T) {
	args, env := brokenCMS(t, reference.BreakAnswerNotStrict, reference.Faults{})
	r := runCLI(env, args...)
	if r.code != exitBad || !strings.Contains(r.out, "SKIP  MUST    delivery.accept  (needs a strict lifecycle answer, or the plan and locales") {
		t.Fatalf("exit %d\n%s", r.code, r.out)
	}
	pinned := append(args, "--plan-id", "plan-three", "--website-version", "v1", "--source-sequence", "2", "--job-count", "3", "--locales", "de-DE,fr-FR,it-IT")
	r = runCLI(env, pinned...)
	for _, want := range []string{"FAIL  MUST    lifecycle.strict", "PASS  MUST    bundle.approval  (24 variants", "PASS  MUST    delivery.accept", "PASS  SHOULD  delivery.conflict"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("missing %q in\n%s", want, r.out)
		}
	}
	if r := runCLI(env, append(args, "--locales", "de-DE")...); r.code != exitUsage {
		t.Errorf("--locales without the pinned identity: exit %d", r.code)
	}
}
