package sim

import (
	"reflect"
	"testing"

	coordinatorconfig "github.com/localeflow/localeflow/functions/coordinator/config"
)

// TestSimRunsTheDeployedCoordinator: a seed that draws the deployed
// defaults (drawConfig) runs every coordinator with exactly the
// configuration the coordinator function's loader makes of the
// environment the stack gives it with no operator setting
// (coordinatorconfig.DeployedRelease over StackEnv, the environment
// infra/localeflow deploys): every release.Config field but the worker
// id. It fails when the simulation sets a policy of its own, or when its
// defaults drift from the function's.
func TestSimRunsTheDeployedCoordinator(t *testing.T) {
	defaults := deployedSimConfig()
	seed := uint64(0)
	for s := uint64(1); s < 200 && seed == 0; s++ {
		if newWorld(s).Faults.Config == defaults {
			seed = s
		}
	}
	if seed == 0 {
		t.Fatal("no seed of 1..199 draws the deployed defaults")
	}
	res := runSeed(t, seed)
	if len(res.Coordinators) == 0 {
		t.Fatalf("seed %d built no coordinator", seed)
	}
	for _, got := range res.Coordinators {
		want, err := coordinatorconfig.DeployedRelease(got.WorkerID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: coordinator %s runs\n%+v\nthe deployed function loads\n%+v", seed, got.WorkerID, got, want)
		}
	}
}
