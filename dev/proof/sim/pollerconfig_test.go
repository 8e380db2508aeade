package sim

import (
	"reflect"
	"testing"

	"github.com/localeflow/localeflow/core/monitor"
	pollerconfig "github.com/localeflow/localeflow/functions/poller/config"
)

// TestPollerConfigIsTheStacks: the poller configuration the simulation
// deploys (pollerConfig, both blocks) is what the poller's own loader
// makes of the environment a default stack gives it, except for the time
// scale, the load and where things are (pollerconfig.Config.RunScale).
func TestPollerConfigIsTheStacks(t *testing.T) {
	deployed, err := pollerconfig.Load(func(k string) string { return pollerconfig.DeployedEnv("sim", pollerconfig.DefaultStack())[k] })
	if err != nil {
		t.Fatal(err)
	}
	d := deployment{monitor: monitor.Config{PollInterval: 7}.WithDefaults(), cmsTimeout: 3}
	if got, want := pollerConfig(d, 3).RunScale(), deployed.RunScale(); !reflect.DeepEqual(got, want) {
		t.Fatalf("the simulation's poller\n%+v\nthe deployed poller\n%+v", got, want)
	}
}
