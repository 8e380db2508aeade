package localtest

import (
	"strings"
	"testing"

	"github.com/localeflow/localeflow/topology"
)

func TestUniquePrefix(t *testing.T) {
	tests := []string{
		"simple",
		"With Spaces and CAPS",
		"a/very/long/subtest/name/that/goes/on/and/on/forever/and/ever",
		"ünïcode—dashes__and..dots",
		"123-starts-with-digits",
	}
	for _, name := range tests {
		t.Run(name, func(t *testing.T) {
			a, b := UniquePrefix(t), UniquePrefix(t)
			for _, p := range []string{a, b} {
				if err := topology.ValidatePrefix(p); err != nil {
					t.Fatalf("invalid prefix: %v", err)
				}
				if !strings.HasPrefix(p, "t-") || strings.Contains(p, "--") && !strings.HasPrefix(p, "t--") {
					t.Errorf("prefix %q is not readable", p)
				}
			}
			if a == b {
				t.Fatalf("two prefixes for one test are equal: %q", a)
			}
		})
	}
}

func TestRequireSkipsWithoutIntegration(t *testing.T) {
	t.Setenv(EnvIntegration, "")
	ran := false
	t.Run("inner", func(t *testing.T) {
		Require(t)
		ran = true
	})
	if ran {
		t.Fatal("Require did not skip with integration off")
	}
}
