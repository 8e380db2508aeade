package localeflow

import (
	"slices"
	"testing"

	"github.com/localeflow/localeflow/contract"
)

// TestStackSetsExactlyWhatEachFunctionReads: every function's environment
// is exactly the variables of its contract.FunctionEnv list that the stack
// sets (contract.Stack): none missing, none the function does not read,
// no local-only or retired variable. The functions' own tests check that
// their config loaders read exactly those lists.
func TestStackSetsExactlyWhatEachFunctionReads(t *testing.T) {
	s := defaultSynth(t)
	for _, fn := range s.topo.Functions {
		t.Run(fn.Dir, func(t *testing.T) {
			reads, ok := contract.FunctionEnv[fn.Dir]
			if !ok {
				t.Fatalf("contract.FunctionEnv has no list for %s", fn.Dir)
			}
			want := contract.Names(reads, contract.Stack)
			slices.Sort(want)
			vars := s.props(t, "AWS::Lambda::Function", fn.Logical)["Environment"].(map[string]any)["Variables"].(map[string]any)
			var got []string
			for name := range vars {
				got = append(got, name)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("the stack sets\n%v\n%s reads (set by the stack)\n%v", got, fn.Dir, want)
			}
		})
	}
}
