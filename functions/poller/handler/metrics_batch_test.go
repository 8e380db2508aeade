package handler_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/localeflow/localeflow/adapters/cms/cmstest"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/functions/poller/handler"
	"github.com/localeflow/localeflow/internal/emf"
)

// lockedBuffer is a bytes.Buffer safe for the handler's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Split(strings.TrimSuffix(b.buf.String(), "\n"), "\n")
}

// TestOneMetricsDocumentPerInvocation: the poller wrote one EMF line per
// poll (issue 28: log bytes grow with the polls). A batch of N polls
// through the Lambda entry point now writes one document when every poll
// left its change in the same state, whose Polls is N under the same
// names and dimensions; a sweep likewise; polls ending in different
// states write one document per state, summing to N.
func TestOneMetricsDocumentPerInvocation(t *testing.T) {
	var out lockedBuffer
	e := setup(t, func(c *handler.Config) { c.Metrics = emf.NewWriter(&out, "dep-a", nil) })
	ids := e.registerMany(10, "processing")
	var bodies []string
	for _, id := range ids {
		bodies = append(bodies, pollBody(t, id, e.clock.Now()))
	}
	if resp := e.invokeSQS(batchOf(t, 1, bodies...)); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %+v", resp.BatchItemFailures)
	}
	lines := out.lines()
	if len(lines) != 1 {
		t.Fatalf("%d EMF documents for one batch of 10 polls, want 1: %q", len(lines), lines)
	}
	names, err := emf.Names([]byte(lines[0]))
	if err != nil || len(names) != 1 || names[0] != contract.MetricPolls {
		t.Fatalf("names %v, %v", names, err)
	}
	var doc struct {
		Polls int
		State string
		AWS   struct {
			CloudWatchMetrics []struct{ Dimensions [][]string }
		} `json:"_aws"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Polls != 10 || doc.State != "watching" {
		t.Fatalf("document %s: want Polls 10 in state watching", lines[0])
	}
	if dims := doc.AWS.CloudWatchMetrics[0].Dimensions; len(dims) != 2 || strings.Join(dims[1], ",") != "Deployment,State" {
		t.Fatalf("dimension sets %v", dims)
	}

	// A sweep over changes that end in two states: one document each,
	// Polls summing to the polls.
	out.mu.Lock()
	out.buf.Reset()
	out.mu.Unlock()
	e.clock.Advance(e.svc.Config().PollInterval)
	for _, id := range ids[:4] {
		e.cms.Script(id, cmstest.StatusStep("published"))
	}
	if res := e.sweep(); res.Polled != 10 || res.Errors != 0 {
		t.Fatalf("sweep %+v", res)
	}
	lines = out.lines()
	if len(lines) != 2 {
		t.Fatalf("%d EMF documents for a sweep ending in 2 states, want 2: %q", len(lines), lines)
	}
	byState := map[string]int{}
	for _, l := range lines {
		var d struct {
			Polls int
			State string
		}
		if err := json.Unmarshal([]byte(l), &d); err != nil {
			t.Fatal(err)
		}
		byState[d.State] += d.Polls
	}
	if byState["watching"] != 6 || byState["terminal"] != 4 {
		t.Fatalf("polls by state %v, want watching 6, terminal 4", byState)
	}
}
