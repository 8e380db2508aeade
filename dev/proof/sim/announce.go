package sim

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/localeflow/localeflow/contract"
)

// Wide releases, coordinator restarts and the exact announcement bound
// (issue 25 finding 6, docs/simulation.md "Announcements").
//
// One seed in WideEvery gets a release with 12–30 locales and, while it
// runs, up to three coordinator restarts: every coordinator invocation in
// flight ends, its messages return after the visibility timeout (receive
// count > 1), as after a redeploy or a crashed execution environment. The
// draws come from a stream of their own, so the other seeds' histories do
// not change.
//
// The checker bounds the release.approved events of each approval by
// what docs/design.md "Owed events of compact approvals" allows, counted
// in this history. An approval is owed while release.ApprovalOwed says so
// (its evidence record is not succeeded):
//
//	events ≤ 1 + R + S + F + W
//
// R: returning release-queue messages (receive count > 1) naming the
// approval's release whose invocation ran while the approval was owed;
// S: release sweeps that ran while it was owed; F: settling writes of the
// approval (its evidence record's succeeded write) that failed (refused,
// injected or ambiguous); W: coordinator invocations whose batch names
// the approval's release and that ran while it was owed (a run that finds
// it owed after its step is gone, the completing read, a blocked or ended
// release's run, publishes and settles it). "Ran while owed" is the
// overlap of the invocation's virtual-time span with a span in which the
// stored records made it owed: an over-approximation of the occasions, so
// the bound is never tighter than the design's.
const WideEvery = 8

const wideStream = 0x77696465_72656c73

// wideLocales are the target locales a wide release draws from.
var wideLocales = []string{
	"de-DE", "fr-FR", "ja-JP", "es-ES", "it-IT", "nl-NL", "pt-BR", "pt-PT", "sv-SE", "da-DK",
	"fi-FI", "nb-NO", "pl-PL", "cs-CZ", "hu-HU", "ro-RO", "el-GR", "tr-TR", "ru-RU", "uk-UA",
	"ko-KR", "zh-CN", "zh-TW", "th-TH", "vi-VN", "id-ID", "ms-MY", "he-IL", "ar-SA", "hi-IN",
}

// announceTracker holds what the bound counts.
type announceTracker struct {
	// release of each approval id.
	release map[string]string
	// failedClears: per approval id, settling writes that failed (its
	// evidence record's succeeded write).
	failedClears map[string]int
	// compactOwed: per approval id, the virtual-time spans in which it
	// was owed (release.ApprovalOwed; [from, to], to zero: still owed).
	compactOwed map[string][]span
	// batches: every release-queue batch, with the invocation that got
	// it (W).
	batches []returned
	// returning: release-queue messages received again, with the
	// invocation that got them.
	returning []returned
	// restarts counts the coordinator invocations a restart ended.
	restarts int
}

type span struct{ from, to time.Time }

type returned struct {
	inv  int
	body string
}

func newAnnounceTracker() *announceTracker {
	return &announceTracker{release: map[string]string{}, failedClears: map[string]int{}, compactOwed: map[string][]span{}}
}

// noteCompact records whether the approval aid of release rel is owed
// through its evidence record now (after a write of the approval or of
// its evidence record).
func (t *announceTracker) noteCompact(rel, aid string, owed bool) {
	now := time.Now()
	t.release[aid] = rel
	spans := t.compactOwed[aid]
	open := len(spans) > 0 && spans[len(spans)-1].to.IsZero()
	switch {
	case owed && !open:
		t.compactOwed[aid] = append(spans, span{from: now})
	case !owed && open:
		spans[len(spans)-1].to = now
	}
}

// noteBatch records the messages of a release-queue batch that return.
func (t *announceTracker) noteBatch(inv int, batch []*message) {
	for _, m := range batch {
		t.batches = append(t.batches, returned{inv: inv, body: m.body})
		if m.receives > 1 {
			t.returning = append(t.returning, returned{inv: inv, body: m.body})
		}
	}
}

// invSpans reads every invocation's virtual-time span from the trace.
func invSpans(w *World, fn string) (spans map[int]span, sweeps []int) {
	spans = map[int]span{}
	for _, st := range w.trace {
		if st.Inv == 0 || st.Fn != fn {
			continue
		}
		at := w.start.Add(st.At)
		switch st.Call {
		case "START":
			spans[st.Inv] = span{from: at}
			if st.Outcome == "schedule sweep" {
				sweeps = append(sweeps, st.Inv)
			}
		case "END":
			s := spans[st.Inv]
			s.to = at
			spans[st.Inv] = s
		}
	}
	return spans, sweeps
}

// overlaps: the invocation span s (to zero: still running at the end)
// meets one of the owed spans.
func overlaps(s span, owed []span) bool {
	for _, o := range owed {
		if (s.to.IsZero() || !o.from.After(s.to)) && (o.to.IsZero() || !o.to.Before(s.from)) {
			return true
		}
	}
	return false
}

// checkAnnouncements bounds each approval's release.approved events.
func (r *Release) checkAnnouncements(approved map[string][]contract.ReleaseApproved) {
	t := r.announce
	if !r.w.dry {
		r.w.Stats.Restarted += t.restarts
		r.w.Stats.Returning += len(t.returning)
		if wideRelease(r.w.Seed) != nil {
			r.w.Stats.Wide++
		}
	}
	spans, sweeps := invSpans(r.w, r.fn.name)
	for _, aid := range slices.Sorted(maps.Keys(approved)) {
		n := len(approved[aid])
		r.w.Stats.MaxApproved = max(r.w.Stats.MaxApproved, n)
		if n <= 1 {
			continue
		}
		owed := t.compactOwed[aid]
		rel := t.release[aid]
		if rel == "" {
			rel = approved[aid][0].EventID // stored behind the ports (a forged approval)
		}
		ret := 0
		for _, m := range t.returning {
			if holds([]*message{{body: m.body}}, rel) && overlaps(spans[m.inv], owed) {
				ret++
			}
		}
		sw := 0
		for _, id := range sweeps {
			if overlaps(spans[id], owed) {
				sw++
			}
		}
		runs := 0
		counted := map[int]bool{}
		for _, m := range t.batches {
			if !counted[m.inv] && holds([]*message{{body: m.body}}, rel) && overlaps(spans[m.inv], owed) {
				counted[m.inv] = true
				runs++
			}
		}
		bound := 1 + ret + sw + t.failedClears[aid] + runs
		if n > bound {
			locale := ""
			if evs := approved[aid]; len(evs) > 0 {
				locale = evs[0].TargetLocale
			}
			r.w.violate("release %s: approval of %s published %d times, more than its bound %d "+
				"(1 + %d returning messages and %d sweeps while it was owed + %d failed settlings "+
				"+ %d runs of the release while owed; "+
				"docs/design.md \"Owed events of compact approvals\")", rel, locale, n, bound, ret, sw, t.failedClears[aid], runs)
		}
	}
}

// wideRelease draws, from a stream of its own, whether this seed's first
// release is a wide one (nil: not) and its locales.
func wideRelease(seed uint64) []string {
	rng := rand.New(rand.NewPCG(seed, wideStream))
	if rng.IntN(WideEvery) != 0 {
		return nil
	}
	n := 12 + rng.IntN(len(wideLocales)-12+1)
	out := slices.Clone(wideLocales)
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out[:n]
}

// restarts schedules up to three coordinator restarts from t0 on, within
// the fault window. A restart is armed at its time and happens at the
// next release.approved a coordinator invocation puts (the moment a
// restart hurts the outbox most: after the publish, before the marker is
// cleared): every coordinator invocation in flight ends, its messages
// return after the visibility timeout.
func (r *Release) restarts(seed uint64, t0 time.Time) {
	rng := rand.New(rand.NewPCG(seed, wideStream^0x72657374))
	w := r.w
	armed := 0
	r.bus.Observe(func(inv *Invocation, e Event) {
		if armed == 0 || inv == nil || inv.Fn != r.fn.name || e.DetailType != contract.DetailReleaseApproved || !w.faultsOn() {
			return
		}
		armed--
		var ids []int
		for id, other := range w.running {
			if other.Fn == r.fn.name && !other.crashed.Load() {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		for _, id := range ids {
			other := w.running[id]
			other.fault()
			other.crashed.Store(true)
			other.cancel()
			w.record(other, "CRASH", "coordinator restart")
		}
		r.announce.restarts += len(ids)
		w.record(nil, "RESTART", fmt.Sprintf("coordinator: %d invocations ended (%s)", len(ids), strings.Trim(fmt.Sprint(ids), "[]")))
	})
	for range 1 + rng.IntN(3) {
		at := t0.Add(time.Duration(rng.Int64N(int64(6 * time.Minute))))
		w.at(at, "coordinator restart armed", func() { armed++ })
	}
}
