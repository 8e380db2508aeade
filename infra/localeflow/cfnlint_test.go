package localeflow_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// cfnLintVersion is the pinned linter (dev/emulators/install.sh installs it
// where it is absent).
const cfnLintVersion = "1.51.0"

// cfnLintIgnores is the list of accepted findings, relative to this package.
const cfnLintIgnores = "../cfn-lint-ignores.txt"

// envRequireIndependent makes the independent checks fail instead of skip
// when their tool (cfn-lint) or input (the recorded AWS calls) is missing;
// `make test` sets it.
const envRequireIndependent = "LOCALEFLOW_REQUIRE_INDEPENDENT_CHECKS"

// lintIgnore is one line of cfn-lint-ignores.txt.
type lintIgnore struct {
	rule, resourceType, contains, reason string
	used                                 int
}

func readLintIgnores(t *testing.T) []*lintIgnore {
	t.Helper()
	f, err := os.Open(cfnLintIgnores)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []*lintIgnore
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parts := strings.Split(line, " | ")
		if len(parts) != 4 || parts[3] == "" {
			t.Fatalf("%s:%d: want `rule | resource type | message text | reason`", cfnLintIgnores, n)
		}
		out = append(out, &lintIgnore{rule: parts[0], resourceType: parts[1], contains: parts[2], reason: parts[3]})
	}
	return out
}

// lintMatch is one finding of `cfn-lint --format json`.
type lintMatch struct {
	Filename string
	Level    string
	Message  string
	Rule     struct{ Id string }
	Location struct{ Path []any }
}

// requireTool returns the tool's path, or skips (fails under
// LOCALEFLOW_REQUIRE_INDEPENDENT_CHECKS=1) when it is not on PATH.
func requireTool(t *testing.T, name, install string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv(envRequireIndependent) == "1" {
			t.Fatalf("%s is not on PATH (%s; dev/emulators/install.sh installs it)", name, install)
		}
		t.Skipf("%s is not on PATH (%s, or make install)", name, install)
	}
	return p
}

// TestCfnLintOnEverySynthesizedVariant runs the pinned cfn-lint on every
// synthesized variant (synthVariants: default, another prefix, two option
// combinations, the team-embed stack). Every finding of any level fails the
// test unless a line of infra/cfn-lint-ignores.txt (rule, resource type,
// message text, reason) accepts it; a line that accepts nothing fails too.
func TestCfnLintOnEverySynthesizedVariant(t *testing.T) {
	bin := requireTool(t, "cfn-lint", "pip install cfn-lint=="+cfnLintVersion)
	ver, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || strings.TrimSpace(string(ver)) != "cfn-lint "+cfnLintVersion {
		t.Fatalf("cfn-lint --version: %q (%v), want cfn-lint %s", strings.TrimSpace(string(ver)), err, cfnLintVersion)
	}
	ignores := readLintIgnores(t)
	variants := synthVariants(t)
	dir := t.TempDir()
	types := map[string]map[string]string{} // file → logical id → type
	var files []string
	for _, v := range variants {
		name := filepath.Join(dir, v.name+".template.json")
		b, err := json.MarshalIndent(v.template, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, b, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, name)
		types[name] = map[string]string{}
		for id, r := range v.template["Resources"].(map[string]any) {
			types[name][id], _ = r.(map[string]any)["Type"].(string)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, append([]string{"--format", "json", "--"}, files...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// cfn-lint's exit status is a bit mask of the levels found (2 error,
	// 4 warning, 8 informational); the findings are judged below.
	if err := cmd.Run(); err != nil && stdout.Len() == 0 {
		t.Fatalf("cfn-lint: %v: %s", err, stderr.String())
	}
	var matches []lintMatch
	if err := json.Unmarshal(stdout.Bytes(), &matches); err != nil {
		t.Fatalf("cfn-lint output: %v: %.500s", err, stdout.String())
	}
	levels := map[string]int{}
	accepted := 0
	for _, m := range matches {
		typ := ""
		if len(m.Location.Path) >= 2 && m.Location.Path[0] == "Resources" {
			typ = types[m.Filename][fmt.Sprint(m.Location.Path[1])]
		}
		ok := false
		for _, ig := range ignores {
			if ig.rule == m.Rule.Id && ig.resourceType == typ && strings.Contains(m.Message, ig.contains) {
				ig.used++
				ok = true
				break
			}
		}
		if ok {
			accepted++
			continue
		}
		levels[m.Level]++
		t.Errorf("cfn-lint %s %s in %s at %v: %s", m.Level, m.Rule.Id, filepath.Base(m.Filename), m.Location.Path, m.Message)
	}
	for _, ig := range ignores {
		if ig.used == 0 {
			t.Errorf("%s: %s on %s accepts no finding any more: remove the line", cfnLintIgnores, ig.rule, ig.resourceType)
		}
	}
	var names []string
	for _, v := range variants {
		names = append(names, v.name)
	}
	summary(t, fmt.Sprintf("cfn-lint %s on %d synthesized templates (%s): %d errors, %d warnings, %d informational; %d findings accepted by %d rules of infra/cfn-lint-ignores.txt",
		cfnLintVersion, len(variants), strings.Join(names, ", "), levels["Error"], levels["Warning"], levels["Informational"], accepted, len(ignores)))
}

// summary appends one line to the file LOCALEFLOW_CHECKS_SUMMARY names
// (`make test` prints it at the end) and logs it.
func summary(t *testing.T, line string) {
	t.Helper()
	t.Log(line)
	name := os.Getenv("LOCALEFLOW_CHECKS_SUMMARY")
	if name == "" {
		return
	}
	f, err := os.OpenFile(name, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	status := "ok"
	if t.Failed() {
		status = "FAILED"
	}
	if _, err := fmt.Fprintf(f, "%s: %s\n", status, line); err != nil {
		t.Fatal(err)
	}
}
