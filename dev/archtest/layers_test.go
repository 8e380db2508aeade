package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"
)

// module is the root module's path; the infra module is module + "/infra".
const module = "github.com/localeflow/localeflow"

// A layer is a group of packages and the layers its code may import
// besides its own. Paths are relative to the module: "x" is the package x
// only, "x/..." is x and every package below it; the longest match wins.
type layer struct {
	name  string
	paths []string
	may   []string
}

// coreAll is every layer of the domain.
var coreAll = []string{"core", "core/lifecycle", "core/monitor", "core/release", "core/health"}

func with(lists ...[]string) []string { return slices.Concat(lists...) }

// layers is the table, lowest first. What ships is every layer but dev;
// dev/ (tests, proofs, local tools) may import anything and nothing that
// ships imports it.
var layers = []layer{
	// The wire contract imports nothing of the product: every other
	// package (and a peer written in another language) builds on it.
	{name: "contract", paths: []string{"contract/..."}},
	// Signatures are part of the wire format; they import only contract.
	{name: "signing", paths: []string{"signing/..."}, may: []string{"contract"}},
	{name: "topology", paths: []string{"topology/..."}, may: []string{"contract"}},
	// The domain: no AWS, no adapters, no functions.
	{name: "core", paths: []string{"core"}, may: []string{"contract", "signing"}},
	{name: "core/lifecycle", paths: []string{"core/lifecycle/..."}, may: []string{"contract", "signing", "core"}},
	{name: "core/monitor", paths: []string{"core/monitor/..."}, may: []string{"contract", "signing", "core", "core/lifecycle"}},
	{name: "core/release", paths: []string{"core/release/..."}, may: []string{"contract", "signing", "core"}},
	{name: "core/health", paths: []string{"core/health/..."}, may: with([]string{"contract", "signing"}, coreAll)},
	// The peers' checks are built on the domain's own parsers; the
	// conformance checker (cmd) and the reference peers (dev) use them.
	{name: "peer", paths: []string{"peer/..."}, may: with([]string{"contract", "signing"}, coreAll)},
	// Plumbing every function shares: logs, metrics, env, remote calls.
	{name: "internal", paths: []string{"internal/..."}, may: []string{"contract", "signing", "topology", "core"}},
	{name: "adapters", paths: []string{"adapters/..."}, may: with([]string{"contract", "signing", "topology", "internal"}, coreAll)},
	{name: "functions", paths: []string{"functions/..."}, may: with([]string{"contract", "signing", "topology", "internal", "adapters"}, coreAll)},
	{name: "cmd", paths: []string{"cmd/..."}, may: with([]string{"contract", "signing", "topology", "internal", "adapters", "peer"}, coreAll)},
	// The CDK app (its own module) reads the functions' settings.
	{name: "infra", paths: []string{"infra/..."}, may: with([]string{"contract", "signing", "topology", "functions"}, coreAll)},
	{name: "dev", paths: []string{"dev/..."}, may: []string{"*"}},
}

// support says whether a package is test support (an in-memory store, a
// conformance suite, a signed test server): it sits in its layer but no
// shipped package imports it.
func support(rel string) bool {
	base := path.Base(rel)
	return (strings.HasSuffix(base, "test") && base != "test") || rel == "core/monitor/memstore"
}

// classify returns the layer of a package path relative to the module.
func classify(rel string) *layer {
	var best *layer
	bestLen := -1
	for i := range layers {
		for _, p := range layers[i].paths {
			sub, ok := strings.CutSuffix(p, "/...")
			if rel == sub || (ok && strings.HasPrefix(rel, sub+"/")) {
				if len(sub) > bestLen {
					best, bestLen = &layers[i], len(sub)
				}
			}
		}
	}
	return best
}

// pkg is what go list says of a package.
type pkg struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// relative returns a module package's path relative to the module, and
// false for a package of another module or the standard library.
func relative(importPath string) (string, bool) {
	return strings.CutPrefix(importPath, module+"/")
}

func (l *layer) allows(to *layer) bool {
	return to == l || slices.Contains(l.may, "*") || slices.Contains(l.may, to.name)
}

// check returns every violation of the table, one line each, naming the
// import.
func check(pkgs []pkg) []string {
	var out []string
	unclassified := map[string]bool{}
	layerOf := func(rel string) *layer {
		l := classify(rel)
		if l == nil && !unclassified[rel] {
			unclassified[rel] = true
			out = append(out, fmt.Sprintf("%s is in no layer: add it to the table in dev/archtest/layers_test.go", rel))
		}
		return l
	}
	for _, p := range pkgs {
		from, ok := relative(p.ImportPath)
		if !ok {
			continue
		}
		lf := layerOf(from)
		for _, imp := range p.Imports {
			to, ok := relative(imp)
			if !ok {
				continue
			}
			lt := layerOf(to)
			if lf == nil || lt == nil {
				continue
			}
			if !lf.allows(lt) {
				out = append(out, fmt.Sprintf("%s imports %s: layer %s may import only %s", from, to, lf.name, mayText(lf)))
			}
			if lf.name != "dev" && !support(from) && support(to) {
				out = append(out, fmt.Sprintf("%s imports %s: shipped code imports no test support", from, to))
			}
		}
		// A package's own test files are compiled into it: they keep
		// its layer, with dev/ and test support on top. External tests
		// (package x_test) are the package's clients and may import
		// anything: a contract test checks the product against the
		// contract from above.
		for _, imp := range p.TestImports {
			to, ok := relative(imp)
			if !ok {
				continue
			}
			lt := layerOf(to)
			if lf == nil || lt == nil {
				continue
			}
			if !lf.allows(lt) && lt.name != "dev" && !support(to) {
				out = append(out, fmt.Sprintf("%s's tests (package %s) import %s: layer %s may import only %s, dev/ and test support; move the test to an external test package", from, path.Base(from), to, lf.name, mayText(lf)))
			}
		}
		for _, imp := range p.XTestImports {
			if to, ok := relative(imp); ok {
				layerOf(to)
			}
		}
	}
	return out
}

func mayText(l *layer) string {
	if len(l.may) == 0 {
		return "itself"
	}
	return "itself, " + strings.Join(l.may, ", ")
}

// list runs `go list` over every package of the module in dir. With -e
// it lists each package's own imports even where a dependency cannot be
// loaded (the infra module's CDK packages offline): only the import
// graph is wanted here, the build is checked elsewhere.
func list(t *testing.T, dir string) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports,TestImports,XTestImports", "./...")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list in %s: %v\n%s", dir, err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(raw))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list in %s: %v", dir, err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func requirePackages(t *testing.T, pkgs []pkg, want ...string) {
	t.Helper()
	for _, w := range want {
		if !slices.ContainsFunc(pkgs, func(p pkg) bool { return p.ImportPath == module+"/"+w }) {
			t.Fatalf("go list did not list %s (%d packages): the test would check nothing", w, len(pkgs))
		}
	}
}

func TestLayers(t *testing.T) {
	root := list(t, "../..")
	requirePackages(t, root, "contract", "core/release", "functions/coordinator", "cmd/localeflow", "dev/archtest")
	infra := list(t, "../../infra")
	requirePackages(t, infra, "infra", "infra/localeflow")
	for _, v := range check(append(root, infra...)) {
		t.Error(v)
	}
}

// TestCheckReportsViolations: each kind of violation is reported, naming
// the import.
func TestCheckReportsViolations(t *testing.T) {
	m := func(rel string) string { return module + "/" + rel }
	pkgs := []pkg{
		{ImportPath: m("contract/peer"), Imports: []string{m("core"), "encoding/json"}},
		{ImportPath: m("core/monitor"), Imports: []string{m("core/lifecycle"), m("dev/logcapture")}},
		{ImportPath: m("adapters/x"), Imports: []string{m("core/release/releasetest"), m("internal/emf")}},
		{ImportPath: m("internal/conformance"), Imports: []string{m("adapters/signedhttp")}},
		{ImportPath: m("core/release"), TestImports: []string{m("adapters/secretkey"), m("dev/localtest"), m("core/release/releasetest")}},
		{ImportPath: m("contract"), XTestImports: []string{m("core/release"), m("brandnew/y")}},
		{ImportPath: m("newtop/x"), Imports: []string{m("core")}},
		{ImportPath: m("dev/proof/sim"), Imports: []string{m("functions/coordinator/handler"), m("core/release/releasetest")}},
	}
	got := check(pkgs)
	want := []string{
		"contract/peer imports core: layer contract may import only itself",
		"core/monitor imports dev/logcapture: layer core/monitor may import only itself, contract, signing, core, core/lifecycle",
		"adapters/x imports core/release/releasetest: shipped code imports no test support",
		"internal/conformance imports adapters/signedhttp: layer internal may import only",
		"core/release's tests (package release) import adapters/secretkey:",
		"brandnew/y is in no layer",
		"newtop/x is in no layer",
	}
	for _, w := range want {
		if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, w) }) {
			t.Errorf("no violation starting %q in:\n%s", w, strings.Join(got, "\n"))
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d violations, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
}
