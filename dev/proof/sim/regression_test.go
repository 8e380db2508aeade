package sim

import (
	"flag"
	"regexp"
	"strings"
	"testing"
)

var flagFind = flag.Int("sim.find", 0, "search this many seeds from -sim.start for one that reaches each regression's situation and print it")

// regression is a defect the simulator found, kept as one seed that reaches
// the situation the defect needs. The situation check keeps the case
// honest: when a code change moves the seed's history elsewhere, the case
// fails and asks for a new seed (go test -run TestSimRegressions -sim.start=1000001 -sim.find=3000).
type regression struct {
	name    string
	seed    uint64
	reaches func(r Result) bool
}

func stepMatches(r Result, pattern string) bool {
	re := regexp.MustCompile(pattern)
	for _, s := range r.Trace {
		if re.MatchString(s.Call + " | " + s.Outcome) {
			return true
		}
	}
	return false
}

// inSweepAfter reports whether some schedule-sweep invocation has a step
// matching pattern.
func inSweep(r Result, pattern string) bool {
	re := regexp.MustCompile(pattern)
	sweeps := map[int]bool{}
	for _, s := range r.Trace {
		if s.Call == "START" && s.Outcome == "schedule sweep" {
			sweeps[s.Inv] = true
		}
		if sweeps[s.Inv] && re.MatchString(s.Call+" | "+s.Outcome) {
			return true
		}
	}
	return false
}

// failsAfter reports whether an invocation failed (injected failure, an
// error or a crash) after a step matching pattern.
func failsAfter(r Result, pattern string) bool {
	re := regexp.MustCompile(pattern)
	after := map[int]bool{}
	for _, s := range r.Trace {
		if after[s.Inv] && (s.Call == "CRASH" || strings.Contains(s.Outcome, "injected") ||
			strings.Contains(s.Outcome, "reported as failed") || strings.HasPrefix(s.Outcome, "refused")) {
			return true
		}
		if s.Inv != 0 && re.MatchString(s.Call+" | "+s.Outcome) {
			after[s.Inv] = true
		}
	}
	return false
}

// crashesBetweenPublishAndWrite reports whether an invocation published a
// terminal outcome right after a CMS answer (before any finishing write)
// and then crashed before writing.
func crashesBetweenPublishAndWrite(r Result) bool {
	type inv struct{ answered, published bool }
	invs := map[int]*inv{}
	for _, s := range r.Trace {
		if s.Inv == 0 {
			continue
		}
		v := invs[s.Inv]
		if v == nil {
			v = &inv{}
			invs[s.Inv] = v
		}
		switch {
		case strings.HasPrefix(s.Call, "http GET ") && s.Outcome == "200":
			v.answered = true
		case strings.HasPrefix(s.Call, "monitor.Transition "):
			v.answered, v.published = false, false
		case s.Call == "bus.Put localeflow.change.terminal" && s.Outcome == "ok" && v.answered:
			v.published = true
		case s.Call == "CRASH" && v.published:
			return true
		}
	}
	return false
}

var regressions = []regression{
	{"terminal_published_before_its_write_then_lease_reclaimed", 1000015, func(r Result) bool {
		return crashesBetweenPublishAndWrite(r) && stepMatches(r, `^monitor\.Transition .* \| \S+ lease_expired`)
	}},
	{"outcome_after_lease_expiry_reclaim", 1000001, func(r Result) bool {
		return stepMatches(r, `^monitor\.Transition .* \| failed lease_expired`)
	}},
	{"outcome_after_integrity_failure", 1000002, func(r Result) bool {
		return stepMatches(r, `^monitor\.MarkInvalid `)
	}},
	{"outcome_after_publish_failure_on_sweep", 1000001, func(r Result) bool {
		return inSweep(r, `^bus\.Put localeflow\.change\.terminal \| injected failure`)
	}},
	{"schema_altered_record_not_left_leased", 1000001, func(r Result) bool {
		return stepMatches(r, `^tamper schema `)
	}},
	{"sweep_reaches_records_behind_unclaimable_head", 1000001, func(r Result) bool {
		return stepMatches(r, `^tamper schema `) && inSweep(r, `^monitor\.Transition .* \| (retry_wait|failed) lease_expired`)
	}},
	{"refused_result_never_delivered", 1000005, func(r Result) bool {
		return r.Faults.Concurrency > 1 && stepMatches(r, `^job rel-\d+ \S+ \(second result\)`)
	}},
	{"approval_announced_after_a_later_failure", 1000006, func(r Result) bool {
		return failsAfter(r, `^release\.Put rel-\d+ approval#`)
	}},
	{"blocked_release_shows_in_health", 1000009, func(r Result) bool {
		return stepMatches(r, `^job rel-\d+ \S+ \(failed\)`)
	}},
	// Situations the checkers of issue 23 need (not defects found): a
	// finishing write refused because its lease ran out under a live
	// writer, PutEvents answering a failed entry, and a lost answer of an
	// evidence or delivery call after its effect.
	{"stale_finishing_write_refused", 1000076, func(r Result) bool {
		return r.Stats.StaleRefused > 0 && r.Stats.LeaseExpiredLive > 0
	}},
	{"put_events_failed_entry", 1000002, func(r Result) bool {
		return stepMatches(r, `^bus\.Put \S+ \| 1 of 1 entries failed`)
	}},
	{"evidence_or_delivery_answer_lost", 1000010, func(r Result) bool {
		return stepMatches(r, `^http (evidence|delivery) .* \| \d+ \(reported as failed\)`)
	}},
}

// TestSimRegressions replays one seed per defect the simulator found and
// checks that the seed still reaches the defect's situation.
func TestSimRegressions(t *testing.T) {
	if *flagFind > 0 {
		findRegressionSeeds(t)
		return
	}
	for _, c := range regressions {
		t.Run(c.name, func(t *testing.T) {
			if c.seed == 0 {
				t.Skip("no seed chosen yet: go test -run TestSimRegressions -sim.start=1000001 -sim.find=3000")
			}
			res := runSeed(t, c.seed)
			if !c.reaches(res) {
				t.Fatalf("seed %d no longer reaches the situation; choose another with -sim.find", c.seed)
			}
			if len(res.Violations) > 0 {
				t.Fatal(res.Report())
			}
		})
	}
}

func findRegressionSeeds(t *testing.T) {
	found := map[string]uint64{}
	for seed := *flagStart; seed < *flagStart+uint64(*flagFind) && len(found) < len(regressions); seed++ {
		res := runSeed(t, seed)
		for _, c := range regressions {
			if _, ok := found[c.name]; !ok && c.reaches(res) {
				found[c.name] = seed
				t.Logf("%s: seed %d (violations: %d)", c.name, seed, len(res.Violations))
			}
		}
	}
	for _, c := range regressions {
		if _, ok := found[c.name]; !ok {
			t.Errorf("%s: no seed among %d reaches it", c.name, *flagFind)
		}
	}
}
