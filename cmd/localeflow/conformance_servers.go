package main

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/localeflow/localeflow/adapters/secretkey"
	"github.com/localeflow/localeflow/adapters/signedhttp"
	"github.com/localeflow/localeflow/cmd/localeflow/internal/conformance"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/lifecycle"
	"github.com/localeflow/localeflow/core/release"
)

// Variables the server checks read keys from when the flags are absent.
const (
	envApprovalSeedHex    = "LOCALEFLOW_CONFORMANCE_APPROVAL_SEED_HEX"
	envPublicationSeedHex = "LOCALEFLOW_CONFORMANCE_PUBLICATION_SEED_HEX"
)

// serverFlags are the flags of conformance cms and evidence (and not of
// conformance event), and eventFlags the reverse.
var (
	cmsFlags      = []string{"base-url", "key-hex", "site", "change", "busy-change", "deliver", "plan-id", "website-version", "source-sequence", "job-count", "locales", "approval-seed-hex", "publication-seed-hex"}
	evidenceFlags = []string{"base-url", "key-hex", "issuers-quality", "issuers-human-review", "issuers-independent-review"}
	eventFlags    = []string{"detail-type", "key-hex", "now", "max-age", "accept-v1", "plan"}
)

// exitCodeError ends the CLI with a given exit code (already reported on
// stdout).
type exitCodeError struct {
	exit int
	code string
}

func (e exitCodeError) Error() string { return e.code }

const conformanceServersHelp = `
       localeflow [global flags] conformance cms --base-url URL --key-hex HEX
           --site SITE_ID --change EVENT_ID [--busy-change EVENT_ID]
           [--plan-id P --website-version V --source-sequence N --job-count N
            [--locales L,…]]
           [--deliver [--approval-seed-hex HEX --publication-seed-hex HEX]]
       localeflow [global flags] conformance evidence --base-url URL --key-hex HEX
           [--issuers-quality I=HEX,…] [--issuers-human-review I=HEX,…]
           [--issuers-independent-review I=HEX,…]

cms and evidence check a team's own server from the outside, as localeflow
talks to it (docs/integrating.md "Checking your servers"): one line per
named check, PASS, FAIL (code, status seen) or SKIP (why), with its level
(MUST or SHOULD). Run them against a test or staging server.
cms:
  --base-url URL       the CMS base URL (as LOCALEFLOW_CMS_BASE_URL)
  --key-hex HEX[,HEX…] the CMS HMAC key set, current first (default
                       $` + "LOCALEFLOW_CMS_KEY_HEX" + `); never printed
  --site, --change     a change the CMS knows (a test change)
  --busy-change ID     a change the CMS answers 429/503 for, to judge its
                       Retry-After (without it: only the 429/503 seen)
  --plan-id … --job-count
                       the identity the answer must carry (default: the
                       answer's own, checked for shape and consistency)
  --locales L,…        the change's required locales (--job-count of them):
                       with the pinned identity the delivery checks run
                       without a strict lifecycle answer
  --deliver            ALSO RUN THE DELIVERY CHECKS, WHICH CHANGE THE CMS:
                       they POST deliveries for --change; a conforming CMS
                       refuses each broken one and accepts (publishes) one
                       test bundle of texts "localeflow conformance check,
                       <locale>". Use a test change. Without --deliver
                       nothing is POSTed (the delivery checks are SKIP).
  --approval-seed-hex, --publication-seed-hex HEX
                       the test deployment's approval and publication
                       Ed25519 seeds whose public keys the CMS trusts
                       (default $` + envApprovalSeedHex + `,
                       $` + envPublicationSeedHex + `): they sign
                       the test bundles; without them only the checks that
                       need no valid bundle run. Never give production keys.
evidence:
  --base-url URL       the provider's base URL (as LOCALEFLOW_EVIDENCE_BASE_URL)
  --key-hex HEX[,HEX…] the evidence HMAC key set (default
                       $LOCALEFLOW_EVIDENCE_KEY_HEX)
  --issuers-*          the trusted receipt issuers per kind, as the
                       deployment's LOCALEFLOW_RECEIPT_ISSUERS_QUALITY,
                       _HUMAN_REVIEW and _INDEPENDENT_REVIEW (their default)
  It sends synthetic evidence requests (ids lf-conformance-…); a provider
  that bills per request bills 12 (more when some are answered 429/503).
Checks (cms): lifecycle.answer, lifecycle.signature, lifecycle.strict,
lifecycle.unknown_change, lifecycle.refuse_unsigned, lifecycle.refuse_bad_signature,
lifecycle.refuse_tampered, lifecycle.refuse_stale, lifecycle.refuse_future,
lifecycle.refuse_replay, retry_after, delivery.request_identity,
delivery.request_strict, bundle.signature, bundle.identity, bundle.strict,
bundle.delivery_id, bundle.approval, bundle.approval_binding,
bundle.approval_expiry, bundle.approval_expiry_instant, bundle.text_sha256,
delivery.refuse_unsigned, delivery.refuse_bad_signature, delivery.refuse_tampered,
delivery.refuse_stale, delivery.refuse_future, delivery.accept,
delivery.refuse_replay, delivery.idempotent, delivery.conflict.
Checks (evidence): evidence.answer, evidence.strict, receipt.quality,
receipt.human_review, receipt.independent_review, request.binding,
request.text_sha256, request.refuse_unsigned, request.refuse_bad_signature,
request.refuse_tampered, request.refuse_stale, request.refuse_future,
request.refuse_replay, retry_after.
A refusal passes only with the check's code in the answer's "code"
(docs/design.md "Peer rules"); a request answered 429/503 is sent again
(3 times at most).
Exit (cms, evidence): 0 every check that ran passed, 1 a MUST check failed,
2 usage, 3 the server could not be reached, 4 only SHOULD checks failed.
`

// conformanceServer runs conformance cms or evidence.
func (c *cli) conformanceServer(ctx context.Context, what string, rest []string) error {
	if len(rest) != 0 {
		return usagef("conformance %s: takes no arguments (flags only)", what)
	}
	if err := c.onlyFlags("conformance "+what, map[string][]string{"cms": cmsFlags, "evidence": evidenceFlags}[what]); err != nil {
		return err
	}
	if c.baseURL == "" {
		return usagef("conformance %s: --base-url is required", what)
	}
	envKey := contract.Hex(contract.KeyCMS)
	if what == "evidence" {
		envKey = contract.Hex(contract.KeyEvidence)
	}
	keyHex := firstNonEmpty(c.keyHex, strings.TrimSpace(c.getenv(envKey)))
	if keyHex == "" {
		return usagef("conformance %s: set --key-hex or $%s", what, envKey)
	}
	keys, err := secretkey.DecodeHexSet(keyHex, secretkey.MinBytes(signedhttp.MinKeyBytes))
	if err != nil {
		return usagef("conformance %s: --key-hex: %v", what, err)
	}
	var rep conformance.Report
	if what == "cms" {
		o, err := c.cmsOptions(keys)
		if err != nil {
			return err
		}
		rep, err = conformance.CMS(ctx, o)
		if err != nil {
			return usagef("conformance cms: %v", err)
		}
	} else {
		issuers, err := c.issuers()
		if err != nil {
			return err
		}
		rep, err = conformance.Evidence(ctx, conformance.EvidenceOptions{BaseURL: c.baseURL, Keys: keys, Issuers: issuers})
		if err != nil {
			return usagef("conformance evidence: %v", err)
		}
	}
	if c.jsonOut {
		if err := c.printJSON(struct {
			conformance.Report
			Exit int `json:"exit"`
		}{rep, rep.Exit()}); err != nil {
			return err
		}
	} else {
		counts := map[string]int{}
		for _, ch := range rep.Checks {
			counts[ch.Result]++
			line := fmt.Sprintf("%s  %-6s  %s", ch.Result, ch.Level, ch.Check)
			if ch.Code != "" {
				line += "  " + ch.Code
			}
			if ch.Detail != "" {
				line += "  (" + ch.Detail + ")"
			}
			fmt.Fprintln(c.out, line)
		}
		fmt.Fprintf(c.out, "%s: %d passed, %d failed, %d skipped\n", what, counts[conformance.Pass], counts[conformance.Fail], counts[conformance.Skip])
	}
	switch rep.Exit() {
	case conformance.ExitOK:
		return nil
	case conformance.ExitUnreachable:
		return exitCodeError{exit: exitRuntime, code: "cli.conformance.unreachable"}
	case conformance.ExitShould:
		return exitCodeError{exit: conformance.ExitShould, code: "cli.conformance.should_failed"}
	}
	return badError{code: "cli.conformance.failed"}
}

// onlyFlags refuses the conformance flags that are not allowed.
func (c *cli) onlyFlags(cmd string, allowed []string) error {
	var wrong []string
	for _, f := range c.setFlags {
		if !slices.Contains(allowed, f) && !slices.Contains(globalFlags, f) {
			wrong = append(wrong, "--"+f)
		}
	}
	if len(wrong) > 0 {
		return usagef("%s: %s is not a flag of %s", cmd, strings.Join(wrong, ", "), cmd)
	}
	return nil
}

func (c *cli) cmsOptions(keys [][]byte) (conformance.CMSOptions, error) {
	o := conformance.CMSOptions{BaseURL: c.baseURL, Keys: keys, SiteID: c.siteID, EventID: c.changeID, BusyEventID: c.busyChange, Deliver: c.deliver}
	if !core.ValidToken(c.siteID) || !core.ValidToken(c.changeID) {
		return o, usagef("conformance cms: --site and --change name a change the CMS knows (tokens)")
	}
	if c.busyChange != "" && !core.ValidToken(c.busyChange) {
		return o, usagef("conformance cms: --busy-change must be a token")
	}
	pinned := c.planID != "" || c.websiteVersion != "" || c.sourceSequence != "" || c.jobCount != ""
	if pinned {
		seq, err1 := strconv.ParseInt(c.sourceSequence, 10, 64)
		jobs, err2 := strconv.Atoi(c.jobCount)
		if !core.ValidToken(c.planID) || !core.ValidToken(c.websiteVersion) || err1 != nil || seq <= 0 || err2 != nil || jobs <= 0 {
			return o, usagef("conformance cms: --plan-id, --website-version, --source-sequence and --job-count go together (tokens, positive integers)")
		}
		o.Pin = lifecycle.Target{PlanID: c.planID, WebsiteVersion: c.websiteVersion, SourceSequence: seq, JobCount: jobs}
	}
	if c.locales != "" {
		if !pinned {
			return o, usagef("conformance cms: --locales goes with the pinned identity (--plan-id …)")
		}
		for _, l := range strings.Split(c.locales, ",") {
			if !core.ValidToken(strings.TrimSpace(l)) {
				return o, usagef("conformance cms: --locales is a comma-separated list of locales (tokens)")
			}
			o.Locales = append(o.Locales, strings.TrimSpace(l))
		}
		if len(o.Locales) != o.Pin.JobCount {
			return o, usagef("conformance cms: --locales must name --job-count locales")
		}
	}
	if (c.approvalSeedHex != "" || c.publicationSeedHex != "") && !c.deliver {
		return o, usagef("conformance cms: the authority seeds only serve --deliver")
	}
	if !c.deliver {
		return o, nil
	}
	apvHex := firstNonEmpty(c.approvalSeedHex, strings.TrimSpace(c.getenv(envApprovalSeedHex)))
	pubHex := firstNonEmpty(c.publicationSeedHex, strings.TrimSpace(c.getenv(envPublicationSeedHex)))
	if (apvHex == "") != (pubHex == "") {
		return o, usagef("conformance cms: give both --approval-seed-hex and --publication-seed-hex, or neither")
	}
	if apvHex != "" {
		apv, err1 := hex.DecodeString(apvHex)
		pub, err2 := hex.DecodeString(pubHex)
		if err1 != nil || err2 != nil {
			return o, usagef("conformance cms: the authority seeds must be hex (32-byte Ed25519 seeds)")
		}
		if _, err1 := release.NewApprovalAuthority(apv); err1 != nil {
			return o, usagef("conformance cms: the authority seeds must be hex (32-byte Ed25519 seeds)")
		}
		if _, err2 := release.NewPublicationAuthority(pub); err2 != nil {
			return o, usagef("conformance cms: the authority seeds must be hex (32-byte Ed25519 seeds)")
		}
		o.ApprovalSeed, o.PublicationSeed = apv, pub
	}
	return o, nil
}

// issuers reads the trusted receipt issuers per kind: "issuer=hex,…"; an
// issuer named again adds a previous key (a rotation).
func (c *cli) issuers() (release.TrustedIssuers, error) {
	t := release.TrustedIssuers{Previous: map[string][]ed25519.PublicKey{}}
	for _, kind := range []struct {
		flag, env, value string
		set              *map[string]ed25519.PublicKey
	}{
		{"issuers-quality", contract.EnvReceiptIssuersQuality, c.issuersQuality, &t.Quality},
		{"issuers-human-review", contract.EnvReceiptIssuersHumanReview, c.issuersHuman, &t.HumanReview},
		{"issuers-independent-review", contract.EnvReceiptIssuersIndependentReview, c.issuersIndependent, &t.IndependentReview},
	} {
		v := firstNonEmpty(kind.value, strings.TrimSpace(c.getenv(kind.env)))
		if v == "" {
			return t, usagef("conformance evidence: set --%s or $%s", kind.flag, kind.env)
		}
		*kind.set = map[string]ed25519.PublicKey{}
		for _, part := range strings.Split(v, ",") {
			name, keyHex, ok := strings.Cut(strings.TrimSpace(part), "=")
			key, err := hex.DecodeString(keyHex)
			if !ok || !core.ValidToken(name) || err != nil || len(key) != ed25519.PublicKeySize {
				return t, usagef("conformance evidence: --%s: entries are issuer=<64 hex digits>", kind.flag)
			}
			if _, seen := (*kind.set)[name]; seen {
				t.Previous[name] = append(t.Previous[name], key)
				continue
			}
			(*kind.set)[name] = key
		}
	}
	if len(t.Previous) == 0 {
		t.Previous = nil
	}
	if err := t.Validate(); err != nil {
		return t, usagef("conformance evidence: the issuers: %s", core.CodeOf(err))
	}
	return t, nil
}
