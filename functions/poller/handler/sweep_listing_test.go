package handler_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/localeflow/localeflow/adapters/cms"
	"github.com/localeflow/localeflow/adapters/cms/cmstest"
	"github.com/localeflow/localeflow/adapters/delayqueue"
	"github.com/localeflow/localeflow/adapters/eventbus"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/monitor/memstore"
	"github.com/localeflow/localeflow/functions/poller/handler"
	"github.com/localeflow/localeflow/topology"
)

// countingMonitor counts the due listings a handler makes.
type countingMonitor struct {
	handler.Monitor
	mu    sync.Mutex
	pages int
}

func (c *countingMonitor) SweepPage(ctx context.Context, limit int, cursor monitor.DueCursor) ([]string, monitor.DueCursor, error) {
	c.mu.Lock()
	c.pages++
	c.mu.Unlock()
	return c.Monitor.SweepPage(ctx, limit, cursor)
}

// TestSweepListingCostsAtMostFiveHundredthsOfAQueryPerPoll: a listing page
// costs at most one DynamoDB Query per wake shard, so a default sweep over
// 1,000 due changes may list at most 1,000 × 0.05 / shards pages to stay
// within 2.05 requests per poll (claim + completion + listing). With pages
// of 100 it listed 11.
func TestSweepListingCostsAtMostFiveHundredthsOfAQueryPerPoll(t *testing.T) {
	const items = 1000
	svc, err := monitor.NewService(memstore.New(), core.SystemClock{}, nil, monitor.Config{WorkerID: "listing", SweepGrace: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	fake := cmstest.New(testKey)
	srv := fake.Start()
	defer srv.Close()
	for i := range items {
		id := fmt.Sprintf("evt-list-%05d", i)
		registerDirect(t, svc, id, "site-list", 1)
		fake.Put(cmstest.Change{EventID: id, SiteID: "site-list", PlanID: "plan-" + id, WebsiteVersion: "v1",
			SourceSequence: 1, RequiredLocales: []string{"de-DE"}})
	}
	reader, err := cms.New(cms.Config{BaseURL: srv.URL, Key: testKey, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	mon := &countingMonitor{Monitor: svc}
	h, err := handler.New(handler.Config{Monitor: mon, Reader: reader, Clock: core.SystemClock{},
		Queue: delayqueue.New(&fakeSQS{}, "https://sqs.local/poll"), Bus: eventbus.New(&fakeBus{}, "bus")})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond) // past the sweep grace
	res, err := h.Sweep(context.Background())
	if err != nil || res.Polled != items {
		t.Fatalf("sweep %+v: %v", res, err)
	}
	if worst := float64(mon.pages*topology.WakeShards) / items; worst > 0.05 {
		t.Fatalf("%d listing pages for %d polls: up to %.3f Queries per poll (want ≤ 0.05)", mon.pages, items, worst)
	}
}
