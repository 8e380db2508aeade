package main

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/localeflow/localeflow/dev/localtest"
	"github.com/localeflow/localeflow/dev/runner"
	"github.com/localeflow/localeflow/topology"
)

func TestParse(t *testing.T) {
	u := "http://127.0.0.1:9001/2015-03-31/functions/function/invocations"
	u2 := "http://127.0.0.1:9011/2015-03-31/functions/function/invocations"
	c, err := parse([]string{"-function", "poller=" + u, "-function", "health=" + u, "-speedup", "12"})
	if err != nil || len(c.functions) != 2 || len(c.functions["poller"]) != 1 || c.functions["poller"][0] != u || c.speedup != 12 || c.create {
		t.Fatalf("%+v %v", c, err)
	}
	c, err = parse([]string{"-function", "poller=" + u + "," + u2, "-create"})
	if err != nil || len(c.functions["poller"]) != 2 || c.functions["poller"][1] != u2 || !c.create {
		t.Fatalf("two instances: %+v %v", c, err)
	}
	tests := map[string][]string{
		"NoFunction":      {},
		"UnknownFunction": {"-function", "mailer=" + u},
		"NotAURL":         {"-function", "poller=127.0.0.1:9001"},
		"SecondNotAURL":   {"-function", "poller=" + u + ",127.0.0.1:9002"},
		"NoName":          {"-function", "=" + u},
		"BadPrefix":       {"-prefix", "Bad", "-function", "poller=" + u},
		"SlowDown":        {"-function", "poller=" + u, "-speedup", "0.5"},
	}
	for name, args := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := parse(args); err == nil {
				t.Fatalf("%s accepted", strings.Join(args, " "))
			}
		})
	}
}

// TestEveryInstanceGetsItsMappingLoop: the runner drove one instance per
// function, so a local run never had Lambda's concurrency; each instance
// of -function poller=URL1,URL2 now has its own loop on the poll queue.
func TestEveryInstanceGetsItsMappingLoop(t *testing.T) {
	topo := topology.New("lf")
	one := runner.InvokerFunc(func(context.Context, []byte) ([]byte, error) { return nil, nil })
	two := runner.InvokerFunc(func(context.Context, []byte) ([]byte, error) { return []byte("x"), nil })
	var poller, coordinator topology.Function
	for _, fn := range topo.Functions {
		switch fn.Dir {
		case "poller":
			poller = fn
		case "coordinator":
			coordinator = fn
		}
	}
	in := []*runner.Mapping{
		{Function: poller.Name, QueueURL: "q-poll", BatchSize: 10},
		{Function: coordinator.Name, QueueURL: "q-release", BatchSize: 10, Invoker: one},
	}
	out := perInstance(in, topo, map[string][]runner.Invoker{"poller": {one, two}, "coordinator": {one}})
	if len(out) != 3 || out[0].QueueURL != "q-poll" || out[1].QueueURL != "q-poll" || out[2].QueueURL != "q-release" {
		t.Fatalf("mappings %+v", out)
	}
	a, _ := out[0].Invoker.Invoke(context.Background(), nil)
	b, _ := out[1].Invoker.Invoke(context.Background(), nil)
	if a != nil || string(b) != "x" || out[0].BatchSize != 10 {
		t.Fatalf("instances not distinct: %q %q", a, b)
	}
	rr := &roundRobin{instances: []runner.Invoker{one, two}}
	r1, _ := rr.Invoke(context.Background(), nil)
	r2, _ := rr.Invoke(context.Background(), nil)
	if r1 != nil || string(r2) != "x" {
		t.Fatalf("round robin %q %q", r1, r2)
	}
}

// TestRefusesAPrefixWithoutResources: a typo in -prefix silently created a
// second, empty deployment and drove it; without -create the runner now
// refuses a prefix whose tables and queues do not exist.
func TestRefusesAPrefixWithoutResources(t *testing.T) {
	localtest.Require(t)
	prefix := localtest.UniquePrefix(t)
	err := run(context.Background(), []string{"-prefix", prefix, "-function",
		"poller=http://127.0.0.1:9/2015-03-31/functions/function/invocations"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "do not exist") || !strings.Contains(err.Error(), "table "+prefix+"-monitor") ||
		!strings.Contains(err.Error(), "-create") {
		t.Fatalf("run on a missing prefix: %v", err)
	}
}
