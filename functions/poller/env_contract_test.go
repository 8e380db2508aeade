package main

import (
	"slices"
	"testing"

	"github.com/localeflow/localeflow/contract"
)

// TestLoadConfigReadsExactlyContractEnv: the loader reads exactly the
// variables of contract.PollerEnv, the list the stack's test (infra) checks
// the stack's environment against, whatever the environment holds
// (empty, or complete and valid).
func TestLoadConfigReadsExactlyContractEnv(t *testing.T) {
	want := contract.Names(contract.PollerEnv)
	slices.Sort(want)
	for name, env := range map[string]map[string]string{"empty": {}, "complete": baseEnv()} {
		read := map[string]bool{}
		_, _ = loadConfig(func(k string) string {
			read[k] = true
			return env[k]
		})
		var got []string
		for k := range read {
			got = append(got, k)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s environment: the loader reads\n%v\ncontract.PollerEnv lists\n%v", name, got, want)
		}
	}
}
