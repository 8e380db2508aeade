package sim

import "testing"

// TestAnnouncementsReach keeps the announcement bound non-vacuous: over a
// small block (seeds 1–48; 1–24 reached no coordinator restart once
// write-first ingest moved the histories), wide releases run,
// coordinator restarts end invocations in flight and release-queue
// messages return (receive count > 1), the occasions the bound counts.
func TestAnnouncementsReach(t *testing.T) {
	var stats Stats
	for seed := uint64(1); seed <= 48; seed++ {
		res := runSeedWith(t, seed, Options{})
		if len(res.Violations) > 0 {
			t.Errorf("seed %d: %v", seed, res.Violations)
		}
		stats.add(res.Stats)
	}
	if stats.Wide == 0 || stats.Restarted == 0 || stats.Returning == 0 {
		t.Errorf("seeds 1..48: wide releases %d, invocations ended by restarts %d, returning messages %d; want each > 0",
			stats.Wide, stats.Restarted, stats.Returning)
	}
}
