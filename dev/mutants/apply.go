package mutants

import (
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
)

// Apply returns the content of m.File under root with the mutant applied;
// an error when From does not occur exactly once or the result does not
// parse as Go.
func (m Mutant) Apply(root string) ([]byte, error) {
	raw, err := os.ReadFile(filepath.Join(root, m.File))
	if err != nil {
		return nil, fmt.Errorf("mutant %s: %w", m.ID, err)
	}
	src := string(raw)
	if n := strings.Count(src, m.From); n != 1 {
		return nil, fmt.Errorf("mutant %s: its anchor occurs %d times in %s (want exactly once): re-anchor it", m.ID, n, m.File)
	}
	if m.From == m.To {
		return nil, fmt.Errorf("mutant %s changes nothing", m.ID)
	}
	out := strings.Replace(src, m.From, m.To, 1)
	if _, err := parser.ParseFile(token.NewFileSet(), m.File, out, parser.SkipObjectResolution); err != nil {
		return nil, fmt.Errorf("mutant %s does not parse: %w", m.ID, err)
	}
	return []byte(out), nil
}

// Root is the repository root above dir (the directory holding go.mod).
func Root(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("mutants: no go.mod above %s", dir)
		}
	}
}
