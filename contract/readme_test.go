package contract

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// readmeVariables are the LOCALEFLOW_ variables named in the first column
// of README.md's function settings table ("| variable | function(s) |").
func readmeVariables(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile("`((?:LOCALEFLOW|AWS_LAMBDA)_[A-Z0-9_<>]+)`")
	var out []string
	in := false
	for line := range strings.Lines(string(raw)) {
		switch {
		case strings.HasPrefix(line, "| variable | function(s) |"):
			in = true
		case in && !strings.HasPrefix(line, "|"):
			return out
		case in:
			first := strings.Split(line, "|")[1]
			for _, m := range name.FindAllStringSubmatch(first, -1) {
				out = append(out, m[1])
			}
		}
	}
	if !in {
		t.Fatal(`README.md has no "| variable | function(s) |" table`)
	}
	return out
}

// TestReadmeTableListsEveryVariable: the README's settings table and
// contract.FunctionEnv name the same variables (the key variables as the
// two LOCALEFLOW_<K>_KEY_* rows; the retired variable is in the text).
func TestReadmeTableListsEveryVariable(t *testing.T) {
	documented := readmeVariables(t)
	var read []string
	for _, vars := range FunctionEnv {
		for _, v := range vars {
			name := v.Name
			switch {
			case v.SetBy == Retired:
				continue
			case strings.HasSuffix(name, "_KEY"+SecretARNSuffix):
				name = "LOCALEFLOW_<K>_KEY" + SecretARNSuffix
			case strings.HasSuffix(name, "_KEY"+HexSuffix):
				name = "LOCALEFLOW_<K>_KEY" + HexSuffix
			}
			if !slices.Contains(read, name) {
				read = append(read, name)
			}
		}
	}
	for _, name := range read {
		if !slices.Contains(documented, name) {
			t.Errorf("README.md's settings table has no row for %s", name)
		}
	}
	for _, name := range documented {
		if !slices.Contains(read, name) {
			t.Errorf("README.md's settings table names %s, which no function reads", name)
		}
	}
}
