package cost

import (
	"math"
	"reflect"
	"testing"

	"github.com/localeflow/localeflow/dev/proof/harness"
	coordinatorconfig "github.com/localeflow/localeflow/functions/coordinator/config"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9*math.Max(1, math.Abs(b)) }

func TestCostPricesEachUnit(t *testing.T) {
	for _, tt := range []struct {
		name string
		u    Usage
		want float64
	}{
		{"million writes", Usage{WriteUnits: 1e6}, 0.625},
		{"million reads", Usage{ReadUnits: 1e6}, 0.125},
		{"million SQS requests", Usage{SQSRequests: 1e6}, 0.40},
		{"million Lambda requests", Usage{LambdaRequests: 1e6}, 0.20},
		{"GB-second", Usage{LambdaGBSeconds: 1}, 0.0000133334},
		{"million events", Usage{Events: 1e6}, 1.00},
		{"thousand transitions", Usage{StateTransitions: 1000}, 0.025},
		{"nothing", Usage{}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := ListPrices.Cost(tt.u); !near(got, tt.want) {
				t.Fatalf("cost %v, want %v", got, tt.want)
			}
		})
	}
}

func TestStepFunctionsPollLoop(t *testing.T) {
	u := StepFunctionsPollLoop(10, 2, 0.001)
	if u.StateTransitions != 31 || u.LambdaRequests != 10 || !near(u.LambdaGBSeconds, 0.01) || u.Events != 2 ||
		u.WriteUnits != 0 || u.SQSRequests != 0 {
		t.Fatalf("usage %+v", u)
	}
	// 10 polls: 31 transitions ($0.000775) + 10 requests ($0.000002) +
	// 0.01 GB-s + 2 events ($0.000002).
	want := 31*0.025/1000 + 10*0.2/1e6 + 0.01*0.0000133334 + 2*1.0/1e6
	if got := ListPrices.Cost(u); !near(got, want) {
		t.Fatalf("cost %v, want %v", got, want)
	}
	if s := u.Scale(0.5); s.StateTransitions != 15.5 || s.Events != 1 {
		t.Fatalf("scaled %+v", s)
	}
}

// TestCostBenchmarkRunsTheDeployedCoordinator: the coordinator the cost
// benchmarks (and the soak and the fault suite, which build theirs the
// same way) measure runs exactly the configuration the coordinator
// function's loader makes of the environment the stack gives it with no
// operator setting (coordinatorconfig.DeployedRelease over StackEnv):
// every release.Config field but the worker id.
func TestCostBenchmarkRunsTheDeployedCoordinator(t *testing.T) {
	stack := harness.NewStack(t, 1)
	clock := harness.NewClock(40)
	srv := harness.NewReleaseServers(t, clock)
	c := stack.NewCoordinator(t, srv, clock, "cost", nil)
	got := c.Coordinator.Config()
	want, err := coordinatorconfig.DeployedRelease(got.WorkerID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the benchmark's coordinator runs\n%+v\nthe deployed function loads\n%+v", got, want)
	}
}
