package releasedb

import (
	"crypto/ed25519"
	"strings"
	"testing"

	"github.com/localeflow/localeflow/adapters/monitordb"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/signing"
)

// approvalIDs are the ids an approval's item holds, and which optional
// receipts its payload binds.
type approvalIDs struct {
	event, site, plan, job, locale, provider string
	human, independent                       bool
}

// approvalItemSize is the size, by DynamoDB's rule (attribute names and
// values), of the item of an approval with ids, as the store writes it
// (conditionalPut: index attributes, schema_version and TTL included) in
// its largest state: completing the plan (awaiting_delivery, wake_shard,
// wake_ms).
func approvalItemSize(t *testing.T, ids approvalIDs) int {
	t.Helper()
	const ms = 1_764_460_800_000
	p := contract.ApprovalPayload{
		Schema: contract.ApprovalSchema, EventID: ids.event, SiteID: ids.site, PlanID: ids.plan, JobID: ids.job,
		TargetLocale: ids.locale, ResultSHA256: core.SHA256Hex([]byte("result")),
		EvidenceRequestID:    contract.EvidenceRequestIDPrefix + core.SHA256Hex([]byte("request")),
		QualityReceiptSHA256: core.SHA256Hex([]byte("quality")),
		ApprovedAtMS:         ms, ExpiresAtMS: ms + 30*24*3_600_000,
	}
	if ids.human {
		p.HumanReviewReceiptSHA256 = core.SHA256Hex([]byte("human"))
	}
	if ids.independent {
		p.IndependentReviewSHA256, p.IndependentReviewProvider = core.SHA256Hex([]byte("review")), ids.provider
	}
	h, err := core.HashCanonical(p)
	if err != nil {
		t.Fatal(err)
	}
	p.ApprovalID = "apv-" + h[:40]
	body, err := core.Canonical(p)
	if err != nil {
		t.Fatal(err)
	}
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	auth, err := release.NewApprovalAuthority(key.Seed())
	if err != nil {
		t.Fatal(err)
	}
	token, err := auth.Sign(body)
	if err != nil {
		t.Fatal(err)
	}
	rec := &release.ApprovalRecord{
		EventID: p.EventID, PlanID: p.PlanID, JobID: p.JobID, TargetLocale: p.TargetLocale, ResultSHA256: p.ResultSHA256,
		RequestID: p.EvidenceRequestID, ApprovalID: p.ApprovalID, KeyID: auth.KeyID(),
		ApprovedMS: p.ApprovedAtMS, ExpiresMS: p.ExpiresAtMS, AwaitingDelivery: true, Version: 1,
	}
	parts := strings.Split(token, ".")
	sig, err := signing.DecodeB64URL(parts[2])
	if err != nil {
		t.Fatal(err)
	}
	rec.SetSigned(body, sig)
	if rec.Token != token {
		t.Fatal("rebuilt token differs from the signed one")
	}
	item, _, err := New(nil, "t").conditionalPut(rec, 0)
	if err != nil {
		t.Fatal(err)
	}
	return monitordb.ItemSize(item)
}

// benchmarkIDs are ids as BenchmarkReleaseCost's releases have them
// (dev/proof/cost, releasetest.NewPlan; locales past the eighth are
// generated "x08-ZZ" …), with the quality receipt alone, as its evidence
// provider answers; the independent reviewer's id is made up.
var benchmarkIDs = approvalIDs{
	event: "evt-costrel-0-0000", site: "site-berlin", plan: "plan-evt-costrel-0-0000",
	job: "job-x29-ZZ", locale: "x29-ZZ", provider: "reviewer-model-b",
}

// TestCompactApprovalItemUnderOneKilobyte (docs/design.md "Compact
// approvals", size budget): an approval of the benchmark's ids, in its
// largest state, is one write unit (< 1,024 bytes), with a human review
// receipt too. The sizes with an independent review, and with the longest
// ids the validators accept (every id a token of up to 256 characters),
// are logged: those need 2 units.
func TestCompactApprovalItemUnderOneKilobyte(t *testing.T) {
	compact := approvalItemSize(t, benchmarkIDs)
	t.Logf("benchmark ids, quality receipt: %d bytes", compact)
	if compact > 1023 {
		t.Fatalf("approval item is %d bytes, want ≤ 1,023 (one write unit)", compact)
	}
	human := benchmarkIDs
	human.human = true
	if n := approvalItemSize(t, human); n > 1023 {
		t.Errorf("with a human review receipt: compact approval item is %d bytes, want ≤ 1,023", n)
	} else {
		t.Logf("benchmark ids, human review receipt: compact %d bytes", n)
	}
	review := benchmarkIDs
	review.independent = true
	both := review
	both.human = true
	t.Logf("benchmark ids, independent review: compact %d bytes; with human review too: %d bytes", approvalItemSize(t, review), approvalItemSize(t, both))
	longest := strings.Repeat("x", core.MaxTokenLength)
	maxIDs := approvalIDs{event: longest, site: longest, plan: longest, job: longest, locale: longest, provider: longest}
	t.Logf("longest ids (%d characters each), quality receipt: %d bytes", core.MaxTokenLength, approvalItemSize(t, maxIDs))
	maxIDs.human, maxIDs.independent = true, true
	t.Logf("longest ids, every receipt: %d bytes", approvalItemSize(t, maxIDs))
	// Headroom: each character of the event id or job id is stored three
	// times (key, top-level id, body), of the site, plan, locale and
	// reviewer ids once.
	for _, c := range []struct {
		name string
		grow func(*approvalIDs)
		want int
	}{
		{"event", func(ids *approvalIDs) { ids.event += "x" }, 3},
		{"job", func(ids *approvalIDs) { ids.job += "x" }, 3},
		{"plan", func(ids *approvalIDs) { ids.plan += "x" }, 1},
		{"site", func(ids *approvalIDs) { ids.site += "x" }, 1},
		{"locale", func(ids *approvalIDs) { ids.locale += "x" }, 1},
	} {
		grown := benchmarkIDs
		c.grow(&grown)
		if d := approvalItemSize(t, grown) - compact; d != c.want {
			t.Errorf("one more %s id character adds %d bytes, want %d", c.name, d, c.want)
		}
	}
	t.Logf("headroom under 1,024 bytes with the quality receipt: %d bytes (3 per event or job id character, 1 per site, plan or locale character)", 1023-compact)
}
