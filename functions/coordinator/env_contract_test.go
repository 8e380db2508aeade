package main

import (
	"testing"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/contract/contracttest"
)

// TestLoadConfigReadsExactlyContractEnv: the loader reads exactly the
// variables of contract.CoordinatorEnv, the list the stack's test (infra) checks
// the stack's environment against, whatever the environment holds
// (empty, or complete and valid).
func TestLoadConfigReadsExactlyContractEnv(t *testing.T) {
	envs := map[string]map[string]string{"empty": {}, "complete": baseEnv()}
	contracttest.RequireReadsExactly(t, "contract.CoordinatorEnv", contract.CoordinatorEnv, envs, func(getenv func(string) string) {
		_, _ = loadConfig(getenv)
	})
}
