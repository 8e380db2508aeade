package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/localeflow/localeflow/dev/localtest"
)

// TestIntegrationDemoEndsAsExpected runs the whole demo on the local stack
// with the functions built for this machine, as make demo does, and
// expects exit code 0: every change in its expected final state, health
// blocked exactly by the change that fails on purpose until it is
// acknowledged, then ok, DLQs empty, logs content-free.
func TestIntegrationDemoEndsAsExpected(t *testing.T) {
	localtest.Require(t)
	rie := os.Getenv("LOCALEFLOW_RIE")
	if rie == "" {
		t.Skip("LOCALEFLOW_RIE is not set (make test sets it)")
	}
	binDir := t.TempDir()
	for _, fn := range []string{"poller", "coordinator", "health"} {
		if _, err := os.Stat(filepath.Join("..", "..", "..", "functions", fn, "main.go")); err != nil {
			continue
		}
		build := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", filepath.Join(binDir, fn, "bootstrap"), "../../../functions/"+fn)
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", fn, err, out)
		}
	}
	var out bytes.Buffer
	code := run(context.Background(), []string{"-rie", rie, "-prefix", localtest.UniquePrefix(t), "-bin-dir", binDir,
		"-out", t.TempDir(), "-tty", "never", "-timeout", "120s"}, &out)
	if code != 0 || !strings.Contains(out.String(), "DEMO OK") {
		t.Fatalf("demo exit %d:\n%s", code, out.String())
	}
	// It ends the way on-call would: the failure on purpose acknowledged,
	// health ok again.
	if !strings.Contains(out.String(), "$ localeflow ack ") || !strings.Contains(out.String(), "health is ok") {
		t.Fatalf("demo did not end with an acknowledgement and health ok:\n%s", out.String())
	}
	if testing.Verbose() {
		t.Log(out.String())
	}
}
