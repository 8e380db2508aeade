// Command benchcited checks the benchmarks the documentation cites: every
// `BenchmarkName` a cited document names must exist (a func BenchmarkName(b
// *testing.B) in a _test.go file of the module), and, with -run, must run
// once and pass. A benchmark that skips (an integration benchmark without
// LOCALEFLOW_INTEGRATION=1) or fails counts as failed: every figure a
// document cites comes from a benchmark that passes (issue 29).
//
//	go run ./dev/cmd/benchcited                    # existence only (cheap)
//	go run ./dev/cmd/benchcited -run               # run each once (-benchtime 1x; needs the local stack)
//	go run ./dev/cmd/benchcited -results FILE      # check a `go test -bench` output holds a result for each
//
// `make bench-cited` runs it with -run inside the local stack.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// DefaultDocs are the documents whose cited benchmarks are checked.
var DefaultDocs = []string{"docs/performance.md", "docs/scale.md"}

var citedName = regexp.MustCompile(`\bBenchmark[A-Z][A-Za-z0-9_]*`)

// Cited lists the benchmark names text cites, sorted, without duplicates.
func Cited(text string) []string {
	names := citedName.FindAllString(text, -1)
	sort.Strings(names)
	return slices.Compact(names)
}

// Index maps each benchmark function of the module under root to the
// package directories (relative, "./"-prefixed) that declare it.
func Index(root string) (map[string][]string, error) {
	out := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "build", "infra", ".cache", "testdata":
				if path != root {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("parse %s: %w", path, err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Benchmark") || !takesB(fn) {
				continue
			}
			rel, err := filepath.Rel(root, filepath.Dir(path))
			if err != nil {
				return err
			}
			dir := "./" + filepath.ToSlash(rel)
			if !slices.Contains(out[fn.Name.Name], dir) {
				out[fn.Name.Name] = append(out[fn.Name.Name], dir)
			}
		}
		return nil
	})
	return out, err
}

// takesB reports whether fn's only parameter is a *testing.B.
func takesB(fn *ast.FuncDecl) bool {
	params := fn.Type.Params.List
	if len(params) != 1 || len(params[0].Names) > 1 {
		return false
	}
	star, ok := params[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "B"
}

// Target is one cited benchmark and where it lives.
type Target struct {
	Doc, Name, Pkg string
}

// Resolve finds each cited name of each document in the index; missing
// lists "doc: name" for names no package declares.
func Resolve(root string, docs []string, index map[string][]string) (targets []Target, missing []string, err error) {
	for _, doc := range docs {
		raw, err := os.ReadFile(filepath.Join(root, doc))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		for _, name := range Cited(string(raw)) {
			pkgs := index[name]
			if len(pkgs) == 0 {
				missing = append(missing, doc+": "+name)
			}
			for _, p := range pkgs {
				targets = append(targets, Target{Doc: doc, Name: name, Pkg: p})
			}
		}
	}
	return targets, missing, nil
}

var resultLine = regexp.MustCompile(`^(Benchmark[A-Za-z0-9_]*)(/\S*?)?(-\d+)?\s+\d+\s+[0-9.]+ ns/op`)

// Passed lists the benchmarks a `go test -bench` output reports a result
// line for (a benchmark that failed or skipped prints none, or a
// "--- FAIL"/"--- SKIP" line, which removes it).
func Passed(r io.Reader) (map[string]bool, error) {
	out := map[string]bool{}
	bad := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := resultLine.FindStringSubmatch(line); m != nil {
			out[m[1]] = true
		}
		for _, verdict := range []string{"--- FAIL: ", "--- SKIP: "} {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), verdict); ok {
				name, _, _ := strings.Cut(rest, " ")
				name, _, _ = strings.Cut(name, "/")
				if i := strings.LastIndex(name, "-"); i > 0 && strings.Trim(name[i+1:], "0123456789") == "" {
					name = name[:i]
				}
				bad[name] = true
			}
		}
	}
	for name := range bad {
		delete(out, name)
	}
	return out, sc.Err()
}

func main() {
	root := flag.String("root", ".", "module root")
	docs := flag.String("docs", strings.Join(DefaultDocs, ","), "documents whose cited benchmarks are checked (comma-separated)")
	run := flag.Bool("run", false, "run each cited benchmark once (-benchtime 1x) and fail unless it passes")
	results := flag.String("results", "", "a `go test -bench` output that must hold a result for each cited benchmark")
	flag.Parse()
	if err := check(*root, strings.Split(*docs, ","), *run, *results, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchcited:", err)
		os.Exit(1)
	}
}

func check(root string, docs []string, run bool, results string, w io.Writer) error {
	index, err := Index(root)
	if err != nil {
		return err
	}
	targets, missing, err := Resolve(root, docs, index)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return fmt.Errorf("cited benchmarks that no package declares: %s", strings.Join(missing, "; "))
	}
	fmt.Fprintf(w, "%d cited benchmarks exist\n", len(targets))
	var failed []string
	if results != "" {
		f, err := os.Open(results)
		if err != nil {
			return err
		}
		passed, err := Passed(f)
		_ = f.Close()
		if err != nil {
			return err
		}
		for _, t := range targets {
			if !passed[t.Name] {
				failed = append(failed, t.Doc+": "+t.Name+" (no passing result in "+results+")")
			}
		}
	}
	if run {
		ran := map[string]bool{}
		for _, t := range targets {
			// A benchmark two documents cite runs once.
			if ran[t.Pkg+" "+t.Name] {
				continue
			}
			ran[t.Pkg+" "+t.Name] = true
			cmd := exec.Command("go", "test", "-count=1", "-run", "^$", "-bench", "^"+t.Name+"$", "-benchtime", "1x", "-timeout", "30m", t.Pkg)
			cmd.Dir = root
			out, err := cmd.CombinedOutput()
			passed, perr := Passed(strings.NewReader(string(out)))
			ok := err == nil && perr == nil && passed[t.Name]
			verdict := "ok"
			if !ok {
				verdict = "FAILED"
				failed = append(failed, t.Doc+": "+t.Name)
				fmt.Fprintf(w, "%s", out)
			}
			fmt.Fprintf(w, "%-40s %-40s %s\n", t.Name, t.Pkg, verdict)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("cited benchmarks that did not pass: %s", strings.Join(failed, "; "))
	}
	return nil
}
