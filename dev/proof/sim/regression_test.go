package sim

import (
	"flag"
	"regexp"
	"slices"
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

// answerCrashReclaimFail reports the seed-1448 shape (issue 24) as it can
// happen since an outcome is never published before its finishing write:
// for one change, an invocation got a CMS answer (200) and crashed before
// its finishing write, the lease was later reclaimed (lease_expired), and
// later still the change failed on a CMS error (an outage). Before issue
// 24 the crashed poll had already published a terminal CMS answer, and
// the change then ended failed.
func answerCrashReclaimFail(r Result) bool {
	answered := map[int]string{} // invocation -> change answered, not yet written
	stage := map[string]int{}    // change -> 1 crashed after an answer, 2 reclaimed after that
	for _, s := range r.Trace {
		if s.Inv == 0 {
			continue
		}
		switch {
		case strings.HasPrefix(s.Call, "http GET ") && strings.HasSuffix(s.Call, "/lifecycle") && s.Outcome == "200":
			parts := strings.Split(s.Call, "/")
			answered[s.Inv] = parts[len(parts)-2]
		case strings.HasPrefix(s.Call, "monitor.Transition "):
			delete(answered, s.Inv)
			id := strings.Fields(s.Call)[1]
			switch {
			case stage[id] == 1 && strings.Contains(s.Outcome, "lease_expired"):
				stage[id] = 2
			case stage[id] == 2 && strings.HasPrefix(s.Outcome, "failed ") && !strings.Contains(s.Outcome, "lease_expired"):
				return true
			}
		case s.Call == "CRASH" && answered[s.Inv] != "":
			if stage[answered[s.Inv]] == 0 {
				stage[answered[s.Inv]] = 1
			}
			delete(answered, s.Inv)
		}
	}
	return false
}

// sweepPollAnnouncesAfterTakeOver reports a sweep invocation whose CMS
// read was frozen until another worker took the change over and which then
// put a change.terminal itself (its poll, having lost the claim, found the
// outcome owed): the outbox-grace check judged that publish as the outbox
// pass's until it looked at what the outbox pass listed (seed 1765 of the
// mutants3 3,000-seed run, adapters seed 139; pinned at 1001376 since
// the merge with the sweep grace moved the histories).
func sweepPollAnnouncesAfterTakeOver(r Result) bool {
	sweeps, woken := map[int]bool{}, map[int]bool{}
	for _, s := range r.Trace {
		switch {
		case s.Call == "START" && s.Outcome == "schedule sweep":
			sweeps[s.Inv] = true
		case sweeps[s.Inv] && strings.HasPrefix(s.Call, "cms read ") && s.Outcome == "woken: taken over":
			woken[s.Inv] = true
		case woken[s.Inv] && s.Call == "bus.Put localeflow.change.terminal" && s.Outcome == "ok":
			return true
		}
	}
	return false
}

// peerAnswerThenExpiry reports whether an invocation got a 429 or 503 from
// the evidence provider or the CMS and later wrote that record's lease
// expiry itself (retry_wait or failed, lease_expired): it came back from
// its call after its lease ended, its finish was refused, and a later
// step of its batch expired the lease. checkRetryAfter took that expiry
// for the attempt's finish (seeds 489 and 2,299 with the release lease
// freeze; 517 before main moved the histories).
func peerAnswerThenExpiry(r Result) bool {
	answered := map[int]string{}
	for _, s := range r.Trace {
		if m := httpAnswer.FindStringSubmatch(s.Call + " | " + s.Outcome); m != nil {
			answered[s.Inv] = m[1]
			continue
		}
		if peer, ok := answered[s.Inv]; ok && strings.HasPrefix(s.Call, "release.Put ") &&
			strings.Contains(s.Call, map[string]string{"evidence": " evidence#", "delivery": " delivery"}[peer]) &&
			strings.Contains(s.Outcome, " lease_expired") {
			return true
		}
	}
	return false
}

// hintedEarlyFailureAfterTakeOver reports the seed-9408 shape: an
// invocation claimed a change after a hint moved its poll, its CMS read
// failed (no 200), another invocation took the change over and completed
// a poll (watching, no code) meanwhile, and the first then decided a
// hinted early failure (watching). checkSchedule judged that decision
// against the regular poll time the later holder's completion set, not
// the one of the record the first invocation claimed.
func hintedEarlyFailureAfterTakeOver(r Result) bool {
	type claim struct {
		id              string
		failed, overrun bool
	}
	hinted := map[int]string{} // invocation -> change it hinted
	claims := map[int]*claim{} // invocation -> hinted claim in flight
	for _, s := range r.Trace {
		if s.Inv == 0 {
			continue
		}
		f := strings.Fields(s.Call)
		switch {
		case len(f) == 2 && f[0] == "monitor.Hint" && s.Outcome == "hinted":
			hinted[s.Inv] = f[1]
		case len(f) == 2 && f[0] == "monitor.Claim" && strings.HasPrefix(s.Outcome, "leased") && hinted[s.Inv] == f[1]:
			claims[s.Inv] = &claim{id: f[1]}
		case strings.HasPrefix(s.Call, "http GET ") && strings.HasSuffix(s.Call, "/lifecycle") && s.Outcome != "200":
			if c := claims[s.Inv]; c != nil && strings.Contains(s.Call, "/"+c.id+"/") {
				c.failed = true
			}
		case len(f) == 4 && f[0] == "monitor.Transition" && f[3] == "watching":
			if c := claims[s.Inv]; c != nil && c.id == f[1] {
				if c.failed && c.overrun {
					return true
				}
				delete(claims, s.Inv)
				continue
			}
			if strings.HasPrefix(s.Outcome, "watching  ") {
				for inv, c := range claims {
					if inv != s.Inv && c.id == f[1] {
						c.overrun = true
					}
				}
			}
		}
	}
	return false
}

// countedFailureAfterTakeOverAndHint reports the seed-17446 shape (the
// twin of seed 9408 in checkHintedEarly): an invocation claimed a change,
// its CMS read failed (no 200), another invocation took the change over
// and completed a poll (watching, no code), a hint then moved the next
// poll, and the first invocation decided a counted failure (retry_wait)
// from the record it had claimed. checkHintedEarly judged that decision
// by the later holder's completion and the later hint, not by the claim.
func countedFailureAfterTakeOverAndHint(r Result) bool {
	type claim struct {
		id                           string
		failed, overrun, hintedAfter bool
	}
	claims := map[int]*claim{} // invocation -> claim in flight
	for _, s := range r.Trace {
		if s.Inv == 0 {
			continue
		}
		f := strings.Fields(s.Call)
		switch {
		case len(f) == 2 && f[0] == "monitor.Claim" && strings.HasPrefix(s.Outcome, "leased"):
			claims[s.Inv] = &claim{id: f[1]}
		case len(f) == 2 && f[0] == "monitor.Hint" && s.Outcome == "hinted":
			for _, c := range claims {
				if c.id == f[1] && c.overrun {
					c.hintedAfter = true
				}
			}
		case strings.HasPrefix(s.Call, "http GET ") && strings.HasSuffix(s.Call, "/lifecycle") && s.Outcome != "200":
			if c := claims[s.Inv]; c != nil && strings.Contains(s.Call, "/"+c.id+"/") {
				c.failed = true
			}
		case len(f) == 4 && f[0] == "monitor.Transition":
			if c := claims[s.Inv]; c != nil && c.id == f[1] {
				if f[3] == "retry_wait" && c.failed && c.overrun && c.hintedAfter {
					return true
				}
				delete(claims, s.Inv)
			}
			if f[3] == "watching" && strings.HasPrefix(s.Outcome, "watching  ") {
				for inv, c := range claims {
					if inv != s.Inv && c.id == f[1] {
						c.overrun = true
					}
				}
			}
		}
	}
	return false
}

// forgedApprovalThenBlocked reports a release that holds an approval the
// simulator forged for another result and whose blocked record was then
// written.
func forgedApprovalThenBlocked(r Result) bool {
	forged := map[string]bool{}
	for _, s := range r.Trace {
		f := strings.Fields(s.Call)
		switch {
		case len(f) == 4 && f[0] == "forge" && f[1] == "approval" && strings.HasPrefix(s.Outcome, "stored "):
			forged[f[2]] = true
		case len(f) >= 3 && f[0] == "release.PutAll" && s.Outcome == "written":
			for i := 1; i+1 < len(f); i++ {
				if f[i+1] == "blocked" && forged[f[i]] {
					return true
				}
			}
		}
	}
	return false
}

var httpAnswer = regexp.MustCompile(`^http (evidence|delivery) .* \| (429|503)$`)

var regressions = []regression{
	{"expiry_after_peer_retry_after_not_judged_as_finish", 1001361, peerAnswerThenExpiry},
	{"sweep_poll_after_take_over_announces_owed_outcome", 1001376, sweepPollAnnouncesAfterTakeOver},
	{"answer_crash_reclaim_then_outage_one_outcome", 1000007, answerCrashReclaimFail},
	{"hinted_early_failure_after_take_over_judged_by_its_claim", 1001865, hintedEarlyFailureAfterTakeOver},
	// 17446 on main 4c54c2f/e3ebf34 (seen failing on the check before
	// its fix); on the session-6 merge no seed of 1–14,000 or
	// 1,000,001–1,003,000 reaches the situation (skipped until a long run
	// finds one: -sim.find).
	{"counted_failure_after_take_over_and_hint_judged_by_its_claim", 0, countedFailureAfterTakeOverAndHint},
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
	{"approval_announced_after_a_later_failure", 1000009, func(r Result) bool {
		return failsAfter(r, `^release\.Put rel-\d+ approval#`)
	}},
	{"blocked_release_shows_in_health", 1000002, func(r Result) bool {
		return stepMatches(r, `^job rel-\d+ \S+ \(failed\)`)
	}},
	// Situations the checkers of issue 23 need (not defects found): a
	// finishing write refused because its lease ran out under a live
	// writer, PutEvents answering a failed entry, and a lost answer of an
	// evidence or delivery call after its effect.
	{"stale_finishing_write_refused", 1000005, func(r Result) bool {
		return r.Stats.StaleRefused > 0 && r.Stats.LeaseExpiredLive > 0
	}},
	// An approval the simulator forged for another result, in a release
	// then blocked: the situation checkBlockedCause and
	// checkBlockedRecords judge (blocked with approval.result_mismatch,
	// listed so by health; rel-approval-result-unchecked blocks it with
	// cms.delivery.bundle_mismatch instead).
	{"forged_approval_then_blocked", 1000001, forgedApprovalThenBlocked},
	// False positives of that check before it was merged (sim-fixes): an
	// evidence request used up by a reclaimed lease (lease_expired, no
	// prefix; seed 288) and by the approval step's operation guard after
	// a stall (release.operation_guard; seed 4007) blocks its release
	// with the step's code, which the failed record explains.
	{"blocked_over_evidence_failed_lease_expired", 1000394, func(r Result) bool {
		return stepMatches(r, `^release\.Put rel-\d+ evidence#\S+ \| v\d+ failed lease_expired`) &&
			stepMatches(r, `^release\.PutAll rel-\d+ blocked .*\| written`)
	}},
	// 6221 on the write-first branch; on the session-7 merge (compact
	// approvals on two seeds in three) none yet among the seeds searched
	// (docs/simulation.md): skipped until a search finds one.
	{"blocked_over_evidence_failed_operation_guard", 0, func(r Result) bool {
		return stepMatches(r, `^release\.Put rel-\d+ evidence#\S+ \| v\d+ failed release\.operation_guard`) &&
			stepMatches(r, `^release\.PutAll rel-\d+ blocked .*\| written`)
	}},
	{"put_events_failed_entry", 1000003, func(r Result) bool {
		return stepMatches(r, `^bus\.Put \S+ \| 1 of 1 entries failed`)
	}},
	{"evidence_or_delivery_answer_lost", 1000033, func(r Result) bool {
		return stepMatches(r, `^http (evidence|delivery) .* \| \d+ \(reported as failed\)`)
	}},
	// A checker false positive (seed 5859 of the 5001 block): the evidence
	// peer's two scripted 503s each asked for a Retry-After capped at an
	// hour, so the release still honoured the second when the recovery
	// ended; the run now goes on until that wait is over
	// (peerRetryAfterWake), and the release is delivered after the end.
	// Seed 5859 no longer reaches it since the job input writes its
	// result and job record as two writes (issue 29: the gated store
	// calls, and so the seed's history, changed); seeds 1–10000 and
	// 1000001–1006000 were searched without one reaching it (the case is
	// rare: one failure in the 36,000-seed long run). Choose one again
	// from a long run's block.
	// A release step failed for good with nothing of its release left in
	// the wake index (the failed evidence record is in the attention index
	// only) and the blocked record's write failed: the step must fail
	// retryable so that its retry blocks the release (seed 62877 of the
	// long run on e3ebf34, with day-2 operations: nothing retried the
	// block, a late duplicate blocked the release days after the operator
	// acknowledged it). TestSimFailedBlockIsRetried checks the retry.
	{"block_write_failed_nothing_wakes", 1000726, blockWriteFailed},
	// Seed 3345 stopped reaching it under storage format 1 and no seed
	// was found then (1,000,001–1,006,000 searched); once the hinted
	// outage draws of issue 39 moved the histories, the finder reported
	// 1002100.
	{"capped_retry_after_outlasts_recovery", 1002100, func(r Result) bool {
		o := Options{}.withDefaults()
		end := o.FaultWindow + o.Recovery
		for _, s := range r.Trace {
			if s.At > end && regexp.MustCompile(`^release\.Put rel-\d+ delivery .* succeeded`).MatchString(s.Call+" "+s.Outcome) {
				return true
			}
		}
		return false
	}},
	// The monitor's twin (seed 55947 of the long run on 2fd28ea: two
	// capped Retry-After answers, the second at 5,048 s, put the next
	// poll after the run's end; the end check called the change stranded):
	// a change reaches its terminal state after the fault window and the
	// recovery, because the run went on for its capped Retry-After.
	// Skipped since issue 39's hinted outage draws moved the histories:
	// none of 1,000,001–1,003,600 nor 55,001–56,500 reaches it.
	{"capped_retry_after_outlasts_recovery_monitor", 0, func(r Result) bool {
		o := Options{}.withDefaults()
		end := o.FaultWindow + o.Recovery
		for _, s := range r.Trace {
			if s.At > end && regexp.MustCompile(`^monitor\.Transition ch-\d+ → terminal`).MatchString(s.Call) {
				return true
			}
		}
		return false
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

var blockFailedRe = regexp.MustCompile(`^release\.PutAll (rel-\d+) blocked \| injected failure$`)

// blockWriteFailed: a blocked record written alone (nothing else of the
// release to park) failed with an injected fault.
func blockWriteFailed(r Result) bool { return blockWriteFailedRelease(r) != "" }

func blockWriteFailedRelease(r Result) string {
	for _, s := range r.Trace {
		if m := blockFailedRe.FindStringSubmatch(s.Call + " | " + s.Outcome); m != nil {
			return m[1]
		}
	}
	return ""
}

// TestSimFailedBlockIsRetried: in the seed of
// block_write_failed_nothing_wakes, the release message whose step could
// not write the blocked record is received again (the step failed
// retryable; its retry blocks the release unless another step did
// first), and no check fails. Before the fix the step returned its final
// error, its message was acknowledged and never ran again: in this seed a
// different returning message happened to block the release later, in
// seed 62877 nothing did.
func TestSimFailedBlockIsRetried(t *testing.T) {
	var seed uint64
	for _, c := range regressions {
		if c.name == "block_write_failed_nothing_wakes" {
			seed = c.seed
		}
	}
	res := runSeed(t, seed)
	if blockWriteFailedRelease(res) == "" {
		t.Fatalf("seed %d no longer reaches the situation; choose another with -sim.find", seed)
	}
	batch := map[int]string{} // invocation → the release queue messages it received
	msg, failedInv, again := "", 0, false
	for _, s := range res.Trace {
		if s.Call == "START" && strings.HasPrefix(s.Outcome, "sqs ReleaseQueue-") {
			batch[s.Inv] = strings.TrimPrefix(s.Outcome, "sqs ")
			if msg != "" && s.Inv != failedInv && slices.Contains(strings.Split(batch[s.Inv], ","), msg) {
				again = true
			}
		}
		if msg == "" && blockFailedRe.MatchString(s.Call+" | "+s.Outcome) {
			if msgs := strings.Split(batch[s.Inv], ","); len(msgs) == 1 && msgs[0] != "" {
				msg, failedInv = msgs[0], s.Inv
			}
		}
	}
	if msg == "" {
		t.Fatalf("seed %d: the failed block is not in a one-message release batch; choose another seed", seed)
	}
	if !again {
		t.Fatalf("seed %d: the step whose blocked record failed to write (message %s) was never run again", seed, msg)
	}
	if len(res.Violations) > 0 {
		t.Fatal(res.Report())
	}
}
