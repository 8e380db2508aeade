package sim

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/adapters/cms/cmstest"
	"github.com/localeflow/localeflow/adapters/monitordb"
	"github.com/localeflow/localeflow/adapters/signedhttp"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/monitor"
)

// The draws and checks of this file reach the situations of issue 24's
// findings that the rest of the simulator left alone (docs/simulation.md
// "Issue 24's other findings"):
//   - every hint message costs exactly one conditional write, also for a
//     change whose lease is held (noteHintWrite);
//   - a record whose stored snapshot carries bytes after its DEFLATE
//     stream (a "trailing" tamper, adapters block only) is never leased as
//     valid and ends failed state_invalid (checkTrailing);
//   - a Retry-After of 2^32 s or more (CMS, evidence and delivery peers) is
//     capped at 1 h, never ignored (hugeRetryAfter feeds the Retry-After
//     checks of checkSchedule and checkRetryAfter);
//   - a refused hint is logged with one of the documented hint codes
//     (checkHintCodes);
//   - a hinted poll that fails retryably before the change's regular poll
//     time never spends the failure budget (checkHintedEarly).
//
// Its draws use a PRNG of their own, so the rest of a seed's history
// draws as before.

// findings is the per-seed state of these checks.
type findings struct {
	rng *rand.Rand
	// dateRng draws which oversized Retry-After answers are HTTP dates
	// (its own stream: the findings' draws, and so every seed's history
	// before the date form existed, are unchanged).
	dateRng *rand.Rand
	// hintMsgs is the number of hint messages for a change in one
	// invocation's batch; hintWrites the Store.Hint calls it made for it.
	hintMsgs   map[readKey]int
	hintWrites map[readKey]int
	// lastHintMS is the now of the last hint that moved a change's next
	// poll (its hint_ms).
	lastHintMS map[string]int64
	// completedMS is the updated_ms of a change's last completed poll
	// (watching, no code), while only hinted early failures (watching,
	// with a code) followed it; earlyAfter counts those.
	completedMS map[string]int64
	earlyAfter  map[string]int
	// claimView is what completedMS, earlyAfter and lastHintMS said when
	// an invocation claimed a change: its finishing write is judged by
	// the record it claimed, not by a later holder's writes after a
	// take-over (seed 17446).
	claimView map[readKey]earlyView
	// trailing: the simulator appended bytes to the change's stored
	// snapshot, and no accepted write has replaced that snapshot since.
	trailing map[string]bool
	// raLeft is, for a change of scriptHintedOutage, how many of its 429
	// and 503 answers may still carry a Retry-After (0 or 1: its first
	// one, as drawn); the others carry none, so the outage ends within
	// the run.
	raLeft map[string]int
	// waitUntil is, per change, the real time the last Retry-After an
	// accepted finishing write followed ends (checkRetryAfterFloor).
	waitUntil map[string]time.Time
}

func newFindings(seed uint64) *findings {
	return &findings{rng: rand.New(rand.NewPCG(seed, seed^0x6973737565323424)), dateRng: rand.New(rand.NewPCG(seed, seed^0x52612d64617465)),
		hintMsgs: map[readKey]int{}, hintWrites: map[readKey]int{}, lastHintMS: map[string]int64{},
		completedMS: map[string]int64{}, earlyAfter: map[string]int{}, trailing: map[string]bool{},
		claimView: map[readKey]earlyView{}, raLeft: map[string]int{}, waitUntil: map[string]time.Time{}}
}

// earlyView is the basis of checkHintedEarly for one change: its last
// completed poll (done, if completed), the hinted early failures since
// and the time of its last hint.
type earlyView struct {
	done       int64
	completed  bool
	earlyAfter int
	lastHintMS int64
}

// viewOf is the change's basis as the simulator knows it now.
func (fx *findings) viewOf(id string) earlyView {
	done, ok := fx.completedMS[id]
	return earlyView{done: done, completed: ok, earlyAfter: fx.earlyAfter[id], lastHintMS: fx.lastHintMS[id]}
}

// noteClaim keeps the basis of checkHintedEarly as it stood when inv
// claimed the change (claimRegular's twin for this check).
func (fx *findings) noteClaim(inv int, id string) { fx.claimView[readKey{inv, id}] = fx.viewOf(id) }

// claimed takes the basis noteClaim kept for inv's claim of id (the
// current one if none was kept).
func (fx *findings) claimed(inv int, id string) earlyView {
	key := readKey{inv, id}
	v, ok := fx.claimView[key]
	delete(fx.claimView, key)
	if !ok {
		v = fx.viewOf(id)
	}
	return v
}

// hugeRetryAfter replaces, on one answer in 40 that asks for a pause, the
// peer's Retry-After by 2^32 s or more, or by an HTTP date (RFC 9110
// 10.2.3, the header's other form) 2 hours to 50 years ahead (a server's
// bug or a hostile one): the client must cap either at
// signedhttp.MaxRetryAfter, not ignore it. Dates are sent only beyond the
// cap: a date is read against the client's clock, which may be off the
// peer's by the world's clock offsets, and the capped pause does not
// depend on them (catches dev/mutants signedhttp-date-uncapped).
func (fx *findings) hugeRetryAfter(h interface{ Set(string, string) }, current string) string {
	if current == "" || fx.rng.IntN(40) != 0 {
		return current
	}
	v := []string{"4294967296", "4294967295", "9223372036854775808", "18446744073709551616", "99999999999999999999999"}[fx.rng.IntN(5)]
	if fx.dateRng.IntN(8) < 3 {
		ahead := []time.Duration{2 * time.Hour, 30 * 24 * time.Hour, 50 * 365 * 24 * time.Hour}[fx.dateRng.IntN(3)]
		v = time.Now().Add(ahead).UTC().Format(http.TimeFormat)
	}
	h.Set("Retry-After", v)
	return v
}

// retryAfterOf is the pause a Retry-After asks for, as the simulator
// knows it (capped at signedhttp.MaxRetryAfter, however long; an HTTP
// date is only ever sent beyond the cap, hugeRetryAfter).
func retryAfterOf(v string) time.Duration {
	if v == "" {
		return 0
	}
	if at, err := http.ParseTime(v); err == nil {
		if time.Until(at) <= 0 {
			return 0
		}
		return min(time.Until(at), signedhttp.MaxRetryAfter)
	}
	if len(v) > 9 {
		return signedhttp.MaxRetryAfter
	}
	s, err := strconv.Atoi(v)
	if err != nil || s <= 0 {
		return 0
	}
	return min(time.Duration(s)*time.Second, signedhttp.MaxRetryAfter)
}

// countHints wraps the poller's entry point: it notes how many hint
// messages for each change the invocation's batch holds (the bound of
// noteHintWrite).
func (m *Monitor) countHints(handle HandleFunc) HandleFunc {
	return func(ctx context.Context, payload json.RawMessage) (any, error) {
		if inv := invocationOf(ctx); inv != nil {
			var ev events.SQSEvent
			if json.Unmarshal(payload, &ev) == nil {
				for _, r := range ev.Records {
					var env struct {
						DetailType string `json:"detail-type"`
						Detail     struct {
							EventID string `json:"event_id"`
						} `json:"detail"`
					}
					if json.Unmarshal([]byte(r.Body), &env) == nil && env.DetailType == contract.DetailChangeHint {
						m.store.fx.hintMsgs[readKey{inv.ID, env.Detail.EventID}]++
					}
				}
			}
		}
		return handle(ctx, payload)
	}
}

// noteHintWrite counts a Store.Hint call: a hint message costs one
// conditional write, whatever the change's state — a hint that finds the
// change leased is refused, never tried again (docs/design.md "Hints").
func (fx *findings) noteHintWrite(w *World, inv *Invocation, id string) {
	if inv == nil {
		return
	}
	k := readKey{inv.ID, id}
	fx.hintWrites[k]++
	if n, max := fx.hintWrites[k], fx.hintMsgs[k]; n > max {
		w.violate("invocation #%d made %d hint writes for %s with %d hint messages in its batch (a hint costs one conditional write)",
			inv.ID, n, id, max)
	}
}

// freezeHinted freezes, on one hinted poll in three while faults last,
// the invocation just before its finishing write until its lease ran out
// (a frozen Lambda environment that wakes later, as stallFor's longest
// stall, aimed at the hint path): the fence refuses the write, and the
// hint path must follow it up as the SQS and sweep paths do
// (docs/design.md "Hints"; a hint message is never quarantined for it).
func (fx *findings) freezeHinted(w *World, inv *Invocation, f monitor.Fence) {
	if inv == nil || f.Expired || fx.hintMsgs[readKey{inv.ID, f.EventID}] == 0 || !w.faultsOn() || fx.rng.IntN(3) != 0 {
		return
	}
	left := time.Duration(f.LeaseExpiresMS-f.NowMS) * time.Millisecond
	d := left + time.Duration(1+fx.rng.IntN(30))*time.Second
	if left <= 0 || !time.Now().Add(d).Before(inv.deadline) {
		return
	}
	w.Stats.Stalls++
	w.Stats.Frozen++
	inv.fault()
	w.record(inv, "monitor.Transition "+f.EventID, "hinted poll frozen "+d.String())
	time.Sleep(d)
}

// noteHinted notes a hint that moved a change's next poll.
func (fx *findings) noteHinted(h monitor.Hint) { fx.lastHintMS[h.EventID] = h.NowMS }

// noteWrite follows an accepted finishing write: the completion the
// hinted-early rule measures from (docs/design.md "Hints": the last
// timeline entry watching without a code), and a snapshot that replaced
// a tampered one.
func (fx *findings) noteWrite(f monitor.Fence, u monitor.Update) {
	switch {
	case u.State == monitor.StateWatching && u.HintFailure == "":
		fx.completedMS[f.EventID] = u.UpdatedMS
		fx.earlyAfter[f.EventID] = 0
	case u.State == monitor.StateWatching:
		fx.earlyAfter[f.EventID]++
	default:
		delete(fx.completedMS, f.EventID)
	}
	if u.SetSnapshot {
		delete(fx.trailing, f.EventID)
	}
}

// checkHintedEarly judges a finishing write that counted a retryable
// failure: when a hint brought the poll forward after the change's last
// completed poll and the failure came before the regular poll time (that
// completion plus the poll interval), it must not count (docs/design.md
// "Hints": a hint never spends the failure budget early). The clocks of
// the hint, the completion and the failure may differ by the largest
// clock offset: only a failure clearly inside the window is judged, and
// only while the timeline still holds the completion. The completion and
// the hint are those of the record the writer claimed (claimView): after
// a take-over, a later holder's completed poll and a hint that followed
// it are not the stale holder's basis — it decides from the record it
// claimed, and the fence refuses its write (seed 17446).
//
// However many hinted early failures followed the completion: the
// 5-entry timeline forgets the completion after five of them, the rule
// does not (issue 39 finding 2; the simulator counts them itself).
func (fx *findings) checkHintedEarly(s *monitorStore, v earlyView, f monitor.Fence, u monitor.Update, hinted bool) {
	id := f.EventID
	if !v.completed || !hinted || u.ConsecutiveFailures != f.ConsecutiveFailures+1 {
		return
	}
	tol := (s.w.maxOffset - s.w.minOffset + time.Millisecond).Milliseconds()
	regular := v.done + s.cfg.PollInterval.Milliseconds()
	if v.lastHintMS >= v.done+tol && u.UpdatedMS+tol < regular {
		s.w.violate("%s: a hinted poll's retryable failure %d ms before the regular poll time was counted (%d consecutive failures)",
			id, regular-u.UpdatedMS, u.ConsecutiveFailures)
	}
}

// outageRetryAfter drops the Retry-After of an answer to a change of
// scriptHintedOutage once its one allowed answer with it passed.
func (fx *findings) outageRetryAfter(id string, h interface{ Del(string) }, current string) {
	n, ok := fx.raLeft[id]
	switch {
	case !ok || current == "":
	case n > 0:
		fx.raLeft[id] = n - 1
	default:
		h.Del("Retry-After")
	}
}

// noteRetryAfter follows an accepted finishing write of a poll whose CMS
// answer asked for a pause (read.retryAfter, capped at 1 h): no CMS read
// for the change may be sent before it ends, whatever hints come
// (checkRetryAfterFloor). A write that leaves the change failed drops it
// (an operator's requeue polls at once). nowMS is the writer's clock, off
// its offset from real time.
func (fx *findings) noteRetryAfter(id string, read readResult, u monitor.Update, off time.Duration) {
	if u.State != monitor.StateWatching && u.State != monitor.StateRetryWait {
		delete(fx.waitUntil, id)
		return
	}
	if !read.err || read.retryAfter <= 0 {
		return
	}
	end := time.UnixMilli(u.UpdatedMS).Add(-off).Add(min(read.retryAfter, signedhttp.MaxRetryAfter))
	if end.After(fx.waitUntil[id]) {
		fx.waitUntil[id] = end
	}
}

// checkRetryAfterFloor: the CMS is never polled for a change before a
// Retry-After wait it gave ended, hinted or not (docs/design.md "Hints":
// no hint shortens a wait the CMS asked for; issue 39 finding 1). Judged
// when the request is sent, with the clocks' spread as tolerance.
func (fx *findings) checkRetryAfterFloor(w *World, id string) {
	end, ok := fx.waitUntil[id]
	if !ok {
		return
	}
	if tol := w.maxOffset - w.minOffset + time.Millisecond; time.Now().Add(tol).Before(end) {
		w.violate("the CMS was polled for %s %s before the Retry-After it asked for ended", id, time.Until(end))
	}
}

// scriptHintedOutage draws, on one change in five that no tamper touches,
// a CMS outage under hints: its first answer is a non-terminal status,
// then six or seven 503s (the first of them with the Retry-After the
// transport draws on one such change in two, the others without), while
// hints come every hint gap + 0.1–2 s for two minutes. Hinted polls meet the outage before the change's regular poll
// time, more of them than the 5-entry timeline holds: none may count
// (checkHintedEarly), and none may poll before a Retry-After the CMS gave
// ended (checkRetryAfterFloor).
func (m *Monitor) scriptHintedOutage() {
	fx := m.store.fx
	gap := m.store.cfg.WithDefaults().HintMinGap
	for _, c := range m.changes {
		if c.forged || c.tamper != "" || c.remote != "enqueued" || len(c.script) == 0 || fx.rng.IntN(5) != 0 {
			continue
		}
		steps := []cmstest.Step{cmstest.StatusStep("processing")}
		for range 6 + fx.rng.IntN(2) {
			steps = append(steps, cmstest.HTTPStep(503))
		}
		c.script = append(steps, c.script...)
		m.cms.Script(c.id, c.script...)
		fx.raLeft[c.id] = fx.rng.IntN(2)
		at := c.dispatch.Add(time.Second)
		for at.Before(c.dispatch.Add(2 * time.Minute)) {
			at = at.Add(gap + time.Duration(100+fx.rng.IntN(1900))*time.Millisecond)
			hint, _ := json.Marshal(map[string]string{"event_id": c.id, "site_id": "site-sim"})
			m.w.at(at, "hint "+c.id, func() { m.bus.put(contract.DetailChangeHint, hint) })
		}
	}
}

// scriptFindings draws the "trailing" tamper (adapters block: the stored
// snapshot is DEFLATE bytes; the memory store keeps none): on one change
// in six that no other tamper touches, bytes appended after the snapshot
// stream some time after its dispatch.
func (m *Monitor) scriptFindings() {
	if m.w.ddb == nil {
		return
	}
	fx := m.store.fx
	for _, c := range m.changes {
		if c.forged || c.tamper != "" || fx.rng.IntN(6) != 0 {
			continue
		}
		at := c.dispatch.Add(time.Duration(fx.rng.Int64N(int64(5 * time.Minute))))
		tail := [][]byte{{0}, []byte("jane.doe@example.com"), {0x01, 0x03, 0x00, 0xfc, 0xff}}[fx.rng.IntN(3)]
		m.w.at(at, "tamper trailing "+c.id, func() { m.tamperTrailing(c, tail) })
	}
}

// tamperTrailing appends tail to the stored snapshot of c's record, in
// flight and holding a snapshot, behind the service's back.
func (m *Monitor) tamperTrailing(c *change, tail []byte) {
	db, ok := m.mem.(*tamperableMonitorDB)
	if !ok {
		return
	}
	item := db.db.Raw(db.table, monitordb.Key(c.id))
	snap, isB := item["lifecycle"].(*types.AttributeValueMemberB)
	if item == nil || !isB || len(snap.Value) < 2 || monitordb.RecordOf(item).State.Final() {
		m.w.record(nil, "tamper skipped "+c.id, "record final, missing or without a snapshot")
		return
	}
	item["lifecycle"] = &types.AttributeValueMemberB{Value: append(append([]byte(nil), snap.Value...), tail...)}
	if db.db.SetRaw(db.table, item) != nil {
		return
	}
	c.tamper, c.tampered = "trailing", true
	m.store.tampered[c.id] = true
	m.store.fx.trailing[c.id] = true
}

// checkClaimed: a record whose snapshot carries trailing bytes is
// corrupt (docs/design.md "The stored lifecycle snapshot"): a claim never returns it as a
// valid record.
func (fx *findings) checkClaimed(w *World, id string, out monitor.Record) {
	if fx.trailing[id] && !out.Corrupt {
		w.violate("%s: a record whose snapshot carries bytes after its DEFLATE stream was claimed as valid", id)
	}
}

// checkTrailing: a change whose tampered snapshot no write replaced ends
// failed state_invalid (the integrity check found it; health shows it as
// needing an operator).
func (m *Monitor) checkTrailing(ctx context.Context) {
	ids := make([]string, 0, len(m.store.fx.trailing))
	for id := range m.store.fx.trailing {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		rec, err := m.mem.Get(ctx, id)
		if err != nil {
			continue
		}
		if rec.State != monitor.StateFailed || rec.LastErrorCode != monitor.CodeStateInvalid {
			m.w.violate("%s: its snapshot carries bytes after the DEFLATE stream and it ended %s (%s), not failed %s",
				id, rec.State, rec.LastErrorCode, monitor.CodeStateInvalid)
		}
	}
}

// hintCodes are the codes a refused hint is logged with (docs/design.md
// "Hints").
var hintCodes = map[string]bool{
	monitor.CodeHintUnknown: true, monitor.CodeHintSiteMismatch: true, monitor.CodeHintNotWatching: true,
	monitor.CodeHintAlreadyDue: true, monitor.CodeHintTooSoon: true, monitor.CodeHintRaced: true, monitor.CodeHintRetryAfter: true,
}

// checkHintCodes: every "poller hint ignored" line carries one of the
// documented hint codes; a hint that lost the race to another writer is
// hint_raced, never a clock fault's code.
func checkHintCodes(w *World, logs string) {
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, `"poller hint ignored"`) {
			continue
		}
		var l struct {
			Msg  string `json:"msg"`
			Code string `json:"code"`
		}
		if json.Unmarshal([]byte(line), &l) != nil || l.Msg != "poller hint ignored" {
			continue
		}
		if !hintCodes[l.Code] {
			w.violate("a refused hint was logged with %q, not one of the documented hint codes", l.Code)
			return
		}
	}
}
