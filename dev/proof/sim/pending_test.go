package sim

import (
	"strings"
	"testing"
)

// TestPendingFixIsCountedNotSilent: a finding of a check pending a named
// fix is counted (and fails with -sim.strict); an unnamed one panics.
func TestPendingFixIsCountedNotSilent(t *testing.T) {
	pendingFixes["test-fix"] = "a test entry"
	defer delete(pendingFixes, "test-fix")
	w := newWorld(1)
	w.pendingFix("test-fix", "finding %d", 1)
	if w.Stats.Pending["test-fix"] != 1 || len(w.violations) != 0 {
		t.Fatalf("pending finding: counts %v, violations %v", w.Stats.Pending, w.violations)
	}
	w.strict = true
	w.pendingFix("test-fix", "finding %d", 2)
	if len(w.violations) != 1 || !strings.Contains(w.violations[0], "[test-fix] finding 2") {
		t.Fatalf("strict: violations %v", w.violations)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("an unlisted pending fix did not panic")
		}
	}()
	w.pendingFix("no-such-fix", "x")
}
