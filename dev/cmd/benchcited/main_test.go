package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// moduleRoot is the repository root (this package is dev/cmd/benchcited).
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s", root)
	}
	return root
}

// Every benchmark docs/performance.md and docs/scale.md cite is declared
// by some package (the cheap half of the check; `make bench-cited` runs
// each once and fails unless it passes).
func TestEveryCitedBenchmarkExists(t *testing.T) {
	root := moduleRoot(t)
	index, err := Index(root)
	if err != nil {
		t.Fatal(err)
	}
	targets, missing, err := Resolve(root, DefaultDocs, index)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Fatalf("cited benchmarks no package declares: %v", missing)
	}
	if len(targets) < 10 {
		t.Fatalf("only %d cited benchmarks found in %v: is the citation pattern still right?", len(targets), DefaultDocs)
	}
}

// A cited name that no package declares is reported with its document.
func TestMissingCitedBenchmarkIsReported(t *testing.T) {
	dir := t.TempDir()
	write := func(path, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, path), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/performance.md", "`BenchmarkHere` and `BenchmarkGone`; Benchmarks in general; BenchmarkHelperNotABench")
	write("pkg/a_test.go", "package pkg\nimport \"testing\"\nfunc BenchmarkHere(b *testing.B) {}\nfunc BenchmarkHelperNotABench(n int) {}\n")
	index, err := Index(dir)
	if err != nil {
		t.Fatal(err)
	}
	targets, missing, err := Resolve(dir, []string{"docs/performance.md"}, index)
	if err != nil {
		t.Fatal(err)
	}
	if len(targets) != 1 || targets[0].Name != "BenchmarkHere" || targets[0].Pkg != "./pkg" {
		t.Fatalf("targets %+v", targets)
	}
	want := []string{"docs/performance.md: BenchmarkGone", "docs/performance.md: BenchmarkHelperNotABench"}
	if !slices.Equal(missing, want) {
		t.Fatalf("missing %v, want %v", missing, want)
	}
	if err := check(dir, []string{"docs/performance.md"}, false, "", &strings.Builder{}); err == nil || !strings.Contains(err.Error(), "BenchmarkGone") {
		t.Fatalf("check: %v", err)
	}
}

// Only a result line counts as passed; a benchmark that failed or skipped
// (an integration benchmark without the local stack) does not.
func TestPassedNeedsAResultLine(t *testing.T) {
	out := `goos: linux
BenchmarkGood-2   	       1	 533419348 ns/op	         4.000 RCU-0
BenchmarkSub/small-2   	       1	 1000 ns/op
--- SKIP: BenchmarkSkipped
    bench_test.go:10: set LOCALEFLOW_INTEGRATION=1
BenchmarkFailed-2   	       1	 100 ns/op
--- FAIL: BenchmarkFailed-2
--- FAIL: BenchmarkBroken
    bench_test.go:248: ClaimDue = 0 claims, <nil>
FAIL
`
	passed, err := Passed(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"BenchmarkGood": true, "BenchmarkSub": true, "BenchmarkSkipped": false,
		"BenchmarkFailed": false, "BenchmarkBroken": false} {
		if passed[name] != want {
			t.Errorf("%s passed = %v, want %v (all: %v)", name, passed[name], want, passed)
		}
	}
}
