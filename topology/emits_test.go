package topology

import (
	"testing"

	"github.com/localeflow/localeflow/contract"
)

// TestNoFunctionEmitsAnInput: the PutEvents conditions derive from Emits,
// so a function that listed an input detail-type could forge dispatches,
// plans or job results.
func TestNoFunctionEmitsAnInput(t *testing.T) {
	inputs := map[string]bool{}
	for _, dt := range contract.InputDetailTypes {
		inputs[dt] = true
	}
	seen := map[string]string{}
	for _, fn := range New(DefaultPrefix).Functions {
		if len(fn.Emits) == 0 {
			t.Errorf("%s emits nothing", fn.Dir)
		}
		for _, dt := range fn.Emits {
			if inputs[dt] {
				t.Errorf("%s emits the input %s", fn.Dir, dt)
			}
			if other, dup := seen[dt]; dup {
				t.Errorf("%s and %s both emit %s", other, fn.Dir, dt)
			}
			seen[dt] = fn.Dir
		}
	}
}
