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
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/localeflow/localeflow/localstack/reference"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "localeflow-evidence:", err)
		os.Exit(2)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	fs := flag.NewFlagSet("localeflow-evidence", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8481", "listen address (loopback only)")
	keyHex := fs.String("key-hex", "", "HMAC key shared with localeflow, hex (default $LOCALEFLOW_EVIDENCE_KEY_HEX)")
	issuer := fs.String("issuer", "evidence-local", "receipt issuer id")
	seedHex := fs.String("issuer-seed-hex", "", "issuer Ed25519 seed, 32 bytes hex (default $LOCALEFLOW_ISSUER_SEED_HEX)")
	reviewer := fs.String("reviewer", "review-beta", "provider id of the independent model reviewer")
	var faults reference.Faults
	reference.FaultFlags(fs, &faults)
	if err := fs.Parse(args); err != nil {
		return err
	}
	key, err := reference.HexKey(*keyHex, "LOCALEFLOW_EVIDENCE_KEY_HEX", getenv, 16)
	if err != nil {
		return err
	}
	seed, err := reference.HexKey(*seedHex, "LOCALEFLOW_ISSUER_SEED_HEX", getenv, 32)
	if err != nil {
		return err
	}
	ev, err := reference.NewEvidence(reference.EvidenceConfig{Key: key, Issuer: *issuer, IssuerSeed: seed, Reviewer: *reviewer, Faults: faults})
	if err != nil {
		return err
	}
	defer ev.Close()
	srv, err := reference.Serve(*addr, ev)
	if err != nil {
		return err
	}
	defer srv.Close()
	log := slog.New(slog.NewJSONHandler(out, nil))
	log.Info("reference evidence provider ready", "url", srv.URL, "receipt_issuers", ev.Issuers(),
		"latency", faults.Latency.String(), "failure_rate", faults.FailureRate)
	<-ctx.Done()
	st := ev.Stats()
	log.Info("reference evidence provider stopped", "requests", st.Requests, "rejected", st.Rejected, "injected_failures", st.Injected)
	return nil
}
