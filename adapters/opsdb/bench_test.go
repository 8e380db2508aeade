package opsdb_test

import (
	"context"
	"os"
	"strconv"
	"testing"
)

// BenchmarkHealthCheck measures one health check (both tables) with 12
// open and attention records, first with no terminal records and then
// with N (LOCALEFLOW_BENCH_TERMINAL, default 1,000) terminal monitor
// records, and reports items read, read capacity and requests of each:
// the two must be equal (docs/performance.md "Health").
func BenchmarkHealthCheck(b *testing.B) {
	terminal := 1000
	if v := os.Getenv("LOCALEFLOW_BENCH_TERMINAL"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			b.Fatalf("LOCALEFLOW_BENCH_TERMINAL=%q", v)
		}
		terminal = n
	}
	s := setup(b)
	seedOpen(b, s)
	empty := measureCheck(b, s, 0)
	seedTerminal(b, s, terminal)
	full := measureCheck(b, s, terminal)
	for b.Loop() {
		if _, err := s.checker.Check(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	if full.items != empty.items || full.rcu != empty.rcu {
		b.Fatalf("cost grew with %d terminal records: items %d -> %d, RCU %.1f -> %.1f", terminal, empty.items, full.items, empty.rcu, full.rcu)
	}
	requests := func(c cost) float64 {
		n := 0
		for _, v := range c.requests {
			n += v
		}
		return float64(n)
	}
	b.ReportMetric(float64(terminal), "terminal-items")
	b.ReportMetric(float64(empty.items), "items-read-0-terminal")
	b.ReportMetric(float64(full.items), "items-read-N-terminal")
	b.ReportMetric(empty.rcu, "RCU-0-terminal")
	b.ReportMetric(full.rcu, "RCU-N-terminal")
	b.ReportMetric(requests(empty), "requests-0-terminal")
	b.ReportMetric(requests(full), "requests-N-terminal")
}
