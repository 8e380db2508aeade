package handler_test

import (
	"context"
	"fmt"
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
)

// cmsLatency is the CMS answer time the sweep target is stated for.
const cmsLatency = 50 * time.Millisecond

type benchEnv struct {
	svc    *monitor.Service
	reader *cms.Client
	h      *handler.Handler
}

func benchSetup(b *testing.B, fake *cmstest.CMS, url string, items int) benchEnv {
	b.Helper()
	// The sweep grace only moves what a sweep lists; 1 ms (slept below)
	// lets the sweep measured here take every change just registered.
	svc, err := monitor.NewService(memstore.New(), core.SystemClock{}, nil, monitor.Config{WorkerID: "bench", SweepGrace: time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	for i := range items {
		id := fmt.Sprintf("evt-bench-%05d", i)
		registerDirect(b, svc, id, "site-bench", 1)
		fake.Put(cmstest.Change{EventID: id, SiteID: "site-bench", PlanID: "plan-" + id, WebsiteVersion: "v1",
			SourceSequence: 1, RequiredLocales: []string{"de-DE"}})
	}
	reader, err := cms.New(cms.Config{BaseURL: url, Key: testKey, Timeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	h, err := handler.New(handler.Config{Monitor: svc, Reader: reader, Clock: core.SystemClock{},
		Queue: delayqueue.New(&fakeSQS{}, "https://sqs.local/poll"), Bus: eventbus.New(&fakeBus{}, "bus")})
	if err != nil {
		b.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond) // past the sweep grace
	return benchEnv{svc: svc, reader: reader, h: h}
}

// BenchmarkSweep measures items/s of one scheduled sweep (default
// concurrency) against a CMS that answers in 50 ms, next to the sequential
// one-at-a-time loop (monitor.Service.RunOnce until nothing is due) over
// the same store and CMS. The target is sweep ≥ 25 × sequential.
func BenchmarkSweep(b *testing.B) {
	fake := cmstest.New(testKey)
	fake.SetLatency(cmsLatency)
	srv := fake.Start()
	defer srv.Close()

	b.Run("sweep", func(b *testing.B) {
		const items = 512
		var total, cpu time.Duration
		for b.Loop() {
			b.StopTimer()
			e := benchSetup(b, fake, srv.URL, items)
			cpu0 := processCPU(b)
			b.StartTimer()
			start := time.Now()
			res, err := e.h.Sweep(context.Background())
			total += time.Since(start)
			b.StopTimer()
			cpu += processCPU(b) - cpu0
			b.StartTimer()
			if err != nil || res.Polled != items {
				b.Fatalf("sweep polled %d of %d: %v", res.Polled, items, err)
			}
		}
		b.ReportMetric(float64(items*b.N)/total.Seconds(), "items/s")
		// This process serves the CMS too: its CPU is in the figure.
		b.ReportMetric(float64(cpu.Microseconds())/float64(items*b.N), "cpu-µs/poll")
	})
	b.Run("sequential", func(b *testing.B) {
		const items = 40
		var total time.Duration
		for b.Loop() {
			b.StopTimer()
			e := benchSetup(b, fake, srv.URL, items)
			b.StartTimer()
			start := time.Now()
			polled := 0
			for {
				_, ok, err := e.svc.RunOnce(context.Background(), e.reader)
				if err != nil {
					b.Fatal(err)
				}
				if !ok {
					break
				}
				polled++
			}
			total += time.Since(start)
			if polled != items {
				b.Fatalf("polled %d of %d", polled, items)
			}
		}
		b.ReportMetric(float64(items*b.N)/total.Seconds(), "items/s")
	})
}
