// Command localeflow-evidence is the reference evidence provider for local
// use: POST /v1/evidence of DESIGN.md on a 127.0.0.1 port, HMAC-verified,
// answering with Ed25519-signed receipts (human review and independent
// model review when the request asks for them), with configurable latency
// and failure rate (package localstack/reference).
//
//	localeflow-evidence -addr 127.0.0.1:8481 -issuer evidence-local \
//	  -latency 50ms -failure-rate 0.05
//
// Keys: -key-hex or LOCALEFLOW_EVIDENCE_KEY_HEX (HMAC), -issuer-seed-hex
// or LOCALEFLOW_ISSUER_SEED_HEX (Ed25519 seed, 32 bytes). The ready line
// carries the LOCALEFLOW_RECEIPT_ISSUERS value the coordinator needs. It
// stops on SIGINT/SIGTERM.
package main

import (
	"context"
	"io"

	"github.com/localeflow/localeflow/localstack/reference"
)

func main() { reference.Main("localeflow-evidence", run) }

func run(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	cmd := reference.NewCommand("localeflow-evidence", "reference evidence provider", "127.0.0.1:8481", "LOCALEFLOW_EVIDENCE_KEY_HEX")
	issuer := cmd.Flags.String("issuer", "evidence-local", "receipt issuer id")
	seedHex := cmd.Flags.String("issuer-seed-hex", "", "issuer Ed25519 seed, 32 bytes hex (default $LOCALEFLOW_ISSUER_SEED_HEX)")
	reviewer := cmd.Flags.String("reviewer", "review-beta", "provider id of the independent model reviewer")
	key, err := cmd.Parse(args, getenv)
	if err != nil {
		return err
	}
	seed, err := reference.HexKey(*seedHex, "LOCALEFLOW_ISSUER_SEED_HEX", getenv, 32)
	if err != nil {
		return err
	}
	ev, err := reference.NewEvidence(reference.EvidenceConfig{Key: key, Issuer: *issuer, IssuerSeed: seed, Reviewer: *reviewer, Faults: cmd.Faults})
	if err != nil {
		return err
	}
	defer ev.Close()
	return cmd.Serve(ctx, ev, out, []any{"receipt_issuers", ev.Issuers()}, func() []any {
		st := ev.Stats()
		return []any{"requests", st.Requests, "rejected", st.Rejected, "injected_failures", st.Injected}
	})
}
