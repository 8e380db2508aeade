package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/dev/reference"
)

// TestDemoSetsOnlyVariablesTheFunctionsRead: every variable the demo gives
// a function is one that function reads (contract.FunctionEnv), never a
// retired one, and the demo sets every variable the stack sets but the
// key secrets (the demo passes the keys as hex) and the settings it leaves
// at their defaults.
func TestDemoSetsOnlyVariablesTheFunctionsRead(t *testing.T) {
	k, err := newKeys()
	if err != nil {
		t.Fatal(err)
	}
	srv := &servers{CMSURL: "http://127.0.0.1:1", EvidenceURL: "http://127.0.0.1:2"}
	env := functionEnv(resourceNames{}, k, srv, reference.ReceiptIssuers{})
	env[contract.FunctionPoller] = append(env[contract.FunctionPoller], pollerTiming(time.Minute, 1)...)
	for fn, vars := range contract.FunctionEnv {
		set := map[string]bool{}
		for _, kv := range env[fn] {
			name, _, _ := strings.Cut(kv, "=")
			set[name] = true
			i := slices.IndexFunc(vars, func(v contract.EnvVar) bool { return v.Name == name })
			switch {
			case i < 0:
				t.Errorf("the demo sets %s on %s, which does not read it", name, fn)
			case vars[i].SetBy == contract.Retired:
				t.Errorf("the demo sets the retired %s on %s", name, fn)
			}
		}
		for _, name := range contract.Names(vars, contract.Stack) {
			if !set[name] && !strings.HasSuffix(name, contract.SecretARNSuffix) &&
				name != contract.EnvDeployment && name != contract.EnvMaxConsecutiveFailures && name != contract.EnvMonitorRetention && name != contract.EnvTextRetention {
				t.Errorf("the demo does not set %s on %s", name, fn)
			}
		}
	}
}
