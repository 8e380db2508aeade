// Command localeflow-cms is the reference CMS for local use: the signed
// lifecycle API and the verifying delivery API of docs/design.md on one
// 127.0.0.1 port, with configurable latency and failure rate (package
// dev/reference).
//
//	localeflow-cms -addr 127.0.0.1:8480 -changes changes.json \
//	  -publication-public-key <hex> -approval-public-key <hex> \
//	  -latency 50ms -jitter 50ms -failure-rate 0.05
//
// The HMAC key comes from -key-hex or LOCALEFLOW_CMS_KEY_HEX. Changes come
// from -changes (a JSON list of reference.ChangeSpec) and from
// POST /_admin/v1/changes. With -hint-bus it puts localeflow.change.hint
// on that EventBridge bus (endpoints from the standard AWS_ENDPOINT_URL*
// variables) whenever a change's status changes. It logs one JSON line when ready and stops on
// SIGINT/SIGTERM.
package main

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/localeflow/localeflow/adapters/awsclient"
	"github.com/localeflow/localeflow/adapters/awsconfig"
	"github.com/localeflow/localeflow/adapters/eventbus"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/dev/reference"
)

func main() { reference.Main("localeflow-cms", run) }

func run(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	cmd := reference.NewCommand("localeflow-cms", "reference CMS", "127.0.0.1:8480", contract.Hex(contract.KeyCMS))
	pubHex := cmd.Flags.String("publication-public-key", "", "localeflow's publication Ed25519 public key, hex")
	apvHex := cmd.Flags.String("approval-public-key", "", "localeflow's approval Ed25519 public key, hex")
	changes := cmd.Flags.String("changes", "", "JSON file with a list of changes to register")
	hintBus := cmd.Flags.String("hint-bus", "", "EventBridge bus to put localeflow.change.hint on when a change's status changes (default: no hints)")
	key, err := cmd.Parse(args, getenv)
	if err != nil {
		return err
	}
	pub, err := publicKey(*pubHex, "-publication-public-key")
	if err != nil {
		return err
	}
	apv, err := publicKey(*apvHex, "-approval-public-key")
	if err != nil {
		return err
	}
	cfg := reference.CMSConfig{Key: key, Publication: pub, Approval: apv, Faults: cmd.Faults, Breaks: cmd.Breaks}
	if *hintBus != "" {
		awsCfg, err := awsconfig.Load(ctx)
		if err != nil {
			return fmt.Errorf("hint bus: %w", err)
		}
		cfg.Hinter = eventbus.New(awsclient.EventBridge(awsCfg), *hintBus)
	}
	cms, err := reference.NewCMS(cfg)
	if err != nil {
		return err
	}
	defer cms.Close()
	n, err := load(cms, *changes)
	if err != nil {
		return err
	}
	return cmd.Serve(ctx, cms, out, []any{"changes", n}, func() []any {
		st := cms.Stats()
		return []any{"delivery_calls", st.DeliveryCalls, "rejected", st.Rejected, "injected_failures", st.Injected,
			"hints", st.Hints, "hint_failures", st.HintFailures}
	})
}

func publicKey(h, name string) (ed25519.PublicKey, error) {
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%s must be a hex Ed25519 public key (64 hex digits)", name)
	}
	return ed25519.PublicKey(b), nil
}

func load(cms *reference.CMS, path string) (int, error) {
	if path == "" {
		return 0, nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("changes: %w", err)
	}
	var specs []reference.ChangeSpec
	if err := json.Unmarshal(raw, &specs); err != nil {
		return 0, errors.New("changes: the file must hold a JSON list of changes")
	}
	for i, s := range specs {
		if err := cms.Put(s); err != nil {
			return 0, fmt.Errorf("changes[%d]: %w", i, err)
		}
	}
	return len(specs), nil
}
