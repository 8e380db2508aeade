// Command localeflow-evidence is the reference evidence provider for local
// use: POST /v1/evidence of docs/design.md on a 127.0.0.1 port, HMAC-verified,
// answering with Ed25519-signed receipts (human review and independent
// model review when the request asks for them), with configurable latency
// and failure rate (package dev/reference).
//
//	localeflow-evidence -addr 127.0.0.1:8481 -issuer evidence-local \
//	  -latency 50ms -failure-rate 0.05
//
// Keys: -key-hex or LOCALEFLOW_EVIDENCE_KEY_HEX (HMAC), and one Ed25519
// seed (32 bytes hex) per receipt kind, all different: -issuer-seed-hex or
// LOCALEFLOW_ISSUER_SEED_HEX (quality), -human-issuer-seed-hex or
// LOCALEFLOW_HUMAN_ISSUER_SEED_HEX (human review), -review-issuer-seed-hex
// or LOCALEFLOW_REVIEW_ISSUER_SEED_HEX (independent model review). The
// ready line carries the coordinator's LOCALEFLOW_RECEIPT_ISSUERS_QUALITY,
// _HUMAN_REVIEW and _INDEPENDENT_REVIEW values. It stops on
// SIGINT/SIGTERM.
package main

import (
	"context"
	"io"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/dev/reference"
)

func main() { reference.Main("localeflow-evidence", run) }

func run(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	cmd := reference.NewCommand("localeflow-evidence", "reference evidence provider", "127.0.0.1:8481", contract.Hex(contract.KeyEvidence))
	issuer := cmd.Flags.String("issuer", "evidence-local", "quality receipt issuer id")
	seedHex := cmd.Flags.String("issuer-seed-hex", "", "quality issuer Ed25519 seed, 32 bytes hex (default $LOCALEFLOW_ISSUER_SEED_HEX)")
	humanIssuer := cmd.Flags.String("human-issuer", "human-review-local", "human-review receipt issuer id")
	humanSeedHex := cmd.Flags.String("human-issuer-seed-hex", "", "human-review issuer Ed25519 seed, 32 bytes hex (default $LOCALEFLOW_HUMAN_ISSUER_SEED_HEX)")
	reviewIssuer := cmd.Flags.String("review-issuer", "independent-review-local", "independent-review receipt issuer id")
	reviewSeedHex := cmd.Flags.String("review-issuer-seed-hex", "", "independent-review issuer Ed25519 seed, 32 bytes hex (default $LOCALEFLOW_REVIEW_ISSUER_SEED_HEX)")
	reviewer := cmd.Flags.String("reviewer", "review-beta", "provider id of the independent model reviewer")
	key, err := cmd.Parse(args, getenv)
	if err != nil {
		return err
	}
	seed, err := reference.HexKey(*seedHex, "LOCALEFLOW_ISSUER_SEED_HEX", getenv, 32)
	if err != nil {
		return err
	}
	humanSeed, err := reference.HexKey(*humanSeedHex, "LOCALEFLOW_HUMAN_ISSUER_SEED_HEX", getenv, 32)
	if err != nil {
		return err
	}
	reviewSeed, err := reference.HexKey(*reviewSeedHex, "LOCALEFLOW_REVIEW_ISSUER_SEED_HEX", getenv, 32)
	if err != nil {
		return err
	}
	ev, err := reference.NewEvidence(reference.EvidenceConfig{
		Key: key, Issuer: *issuer, IssuerSeed: seed, HumanIssuer: *humanIssuer, HumanIssuerSeed: humanSeed,
		ReviewIssuer: *reviewIssuer, ReviewIssuerSeed: reviewSeed, Reviewer: *reviewer, Faults: cmd.Faults, Breaks: cmd.Breaks,
	})
	if err != nil {
		return err
	}
	defer ev.Close()
	iss := ev.Issuers()
	ready := []any{"receipt_issuers_quality", iss.Quality, "receipt_issuers_human_review", iss.HumanReview, "receipt_issuers_independent_review", iss.IndependentReview}
	return cmd.Serve(ctx, ev, out, ready, func() []any {
		st := ev.Stats()
		return []any{"requests", st.Requests, "rejected", st.Rejected, "injected_failures", st.Injected}
	})
}
