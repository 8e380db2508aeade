package main

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	u := "http://127.0.0.1:9001/2015-03-31/functions/function/invocations"
	c, err := parse([]string{"-function", "poller=" + u, "-function", "health=" + u, "-speedup", "12"})
	if err != nil || len(c.functions) != 2 || c.functions["poller"] != u || c.speedup != 12 {
		t.Fatalf("%+v %v", c, err)
	}
	tests := map[string][]string{
		"NoFunction":      {},
		"UnknownFunction": {"-function", "mailer=" + u},
		"NotAURL":         {"-function", "poller=127.0.0.1:9001"},
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
