package harness

import (
	"reflect"
	"testing"
	"time"

	pollerconfig "github.com/localeflow/localeflow/functions/poller/config"
)

// TestPollerConfigIsTheStacks: the poller configuration the soak, the
// fault suite and the cost benchmarks run (PollerConfig) is what the
// poller's own loader makes of the environment a default stack gives it
// (infra/localeflow renders that environment with pollerconfig.Stack and
// checks its defaults are pollerconfig.DefaultStack), except for the time
// scale, the load and where things are (pollerconfig.Config.RunScale). A
// new setting that changes what is stored or accepted fails here until
// the proofs run it as deployed.
func TestPollerConfigIsTheStacks(t *testing.T) {
	deployed, err := pollerconfig.Load(func(k string) string { return pollerconfig.DeployedEnv("localeflow", pollerconfig.DefaultStack())[k] })
	if err != nil {
		t.Fatal(err)
	}
	for _, mc := range []struct {
		name string
		cfg  pollerconfig.Config
	}{
		{"cost and soak", PollerConfig(FastMonitor("cost-0", time.Second, 5))},
		{"fault suite", PollerConfig(FastMonitor("fault-0", 200*time.Millisecond, 1))},
	} {
		if got, want := mc.cfg.RunScale(), deployed.RunScale(); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the proofs' poller\n%+v\nthe deployed poller\n%+v", mc.name, got, want)
		}
	}
}
