package mutants

import (
	"os"
	"strings"
	"testing"
)

// TestEveryMutantApplies keeps the list from rotting: every mutant's anchor
// occurs exactly once in its file and the mutated file still parses. When
// this fails after a code change, re-anchor the mutant (or replace it by an
// equally realistic one) and re-run make mutants.
func TestEveryMutantApplies(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := Root(wd)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range List {
		if _, err := m.Apply(root); err != nil {
			t.Error(err)
		}
	}
}

// TestListShape: at least 30 mutants that are run, unique ids, each with
// a description, spread over the monitor and release cores, the function
// handlers and the adapters; an equivalent mutant says why.
func TestListShape(t *testing.T) {
	ids := map[string]bool{}
	areas := map[string]int{}
	run := 0
	for _, m := range List {
		if m.ID == "" || ids[m.ID] || strings.ContainsAny(m.ID, " \t|") {
			t.Errorf("mutant id %q is empty, repeated or has a space or |", m.ID)
		}
		ids[m.ID] = true
		if m.What == "" {
			t.Errorf("mutant %s says nothing about what it does", m.ID)
		}
		if m.Equivalent == "" {
			run++
		}
		area := m.Area()
		if strings.HasPrefix(area, "functions/") {
			area = "functions"
		}
		if strings.HasPrefix(area, "adapters/") {
			area = "adapters"
		}
		areas[area]++
	}
	if run < 30 {
		t.Errorf("%d mutants are run, want at least 30", run)
	}
	for _, a := range []string{"core/monitor", "core/release", "functions", "adapters"} {
		if areas[a] < 3 {
			t.Errorf("%d mutants in %s, want at least 3", areas[a], a)
		}
	}
}
