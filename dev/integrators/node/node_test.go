// Package node runs the Node.js integrator example (verify-vectors.mjs,
// node:crypto only) against every test vector: proof that the contract is
// implementable outside Go from docs/integrating.md.
package node

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestNodeIntegratorPassesEveryVector(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the Node.js integrator example (dev/integrators/node) was not run; install Node 20+ to run it")
	}
	dir, err := filepath.Abs("../../../contract/testdata/vectors")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		t.Fatalf("no vectors in %s: %v", dir, err)
	}
	out, err := exec.Command(node, "verify-vectors.mjs", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("node verify-vectors.mjs: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), " vectors pass") || strings.Contains(string(out), "FAIL") {
		t.Fatalf("unexpected output:\n%s", out)
	}
	t.Logf("%s", strings.TrimSpace(string(out)))
}

// TestNodeIntegratorRefusesABrokenVector: the example is not a pass-all
// script: a vector whose expected outcome is flipped fails it.
func TestNodeIntegratorRefusesABrokenVector(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	src := "../../../contract/testdata/vectors"
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == "receipts.json" {
			raw = []byte(strings.Replace(string(raw), `"receipt.expired"`, `"receipt.not_yet_valid"`, 1))
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command(node, "verify-vectors.mjs", dst).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "FAIL receipts: expired") {
		t.Fatalf("a flipped vector passed: %v\n%s", err, out)
	}
}
