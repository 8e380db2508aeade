package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/localeflow/localeflow/adapters/cms"
	"github.com/localeflow/localeflow/adapters/cms/cmstest"
	"github.com/localeflow/localeflow/adapters/delayqueue"
	"github.com/localeflow/localeflow/adapters/eventbus"
	"github.com/localeflow/localeflow/adapters/monitordb"
	"github.com/localeflow/localeflow/adapters/quarantine"
	"github.com/localeflow/localeflow/adapters/signedhttp"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/lifecycle"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/monitor/memstore"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/dev/logcapture"
	pollerconfig "github.com/localeflow/localeflow/functions/poller/config"
	"github.com/localeflow/localeflow/functions/poller/handler"
	"github.com/localeflow/localeflow/signing"
	"github.com/localeflow/localeflow/topology"
)

// Secret is in every change's and release's text: it must never appear in
// a log line or a content-free record.
const Secret = "SIMSECRET"

var (
	cmsKey   = []byte("sim-cms-hmac-key-0123456789abcdef")
	eventKey = releasetest.NewFixture().EventKey
)

// signedDetail signs an input event's payload as its producers do (v2:
// detail-type and time signed), at the virtual time of publication.
func signedDetail(detailType string, payload []byte) json.RawMessage {
	detail, err := signing.EventDetailV2(producerKey, detailType, time.Now(), payload)
	if err != nil {
		panic(err)
	}
	return detail
}

// lease is the history of one lease, for the safety checks.
type lease struct {
	token   string
	expires int64
	open    bool
	inv     int
}

// monitorStore gates every call of the real memory store at its call
// boundary and checks each accepted write against the lease history.
var _ monitor.Store = (*monitorStore)(nil)

type monitorStore struct {
	w      *World
	mem    monitorBacking
	leases map[string]*lease
	// altered holds the records whose schema version was changed, as the
	// tampering left them (nothing may change them after).
	altered   map[string]bool
	alteredAs map[string]monitor.Record
	// reclaimed holds the records a write took from an expired lease.
	reclaimed map[string]bool

	// cfg is the seed's monitor configuration (the timing checks).
	cfg monitor.Config
	// pollBudget is the time a poll needs before the Lambda deadline: the
	// CMS client's timeout plus the handler's margin (deploy).
	pollBudget time.Duration
	// written holds, by outcome id, the record each accepted final write
	// stored; final names each change's final outcome id.
	written map[string]monitor.Record
	final   map[string]string
	// storedBy is, by outcome id, the invocation whose write stored it;
	// announcedBy the invocations that put its change.terminal.
	storedBy    map[string]*Invocation
	announcedBy map[string]map[int]bool
	// storedAt is, by outcome id, its outbox_ms as virtual time (the
	// outbox grace check).
	storedAt map[string]time.Time
	// followUps: an invocation's accepted write scheduled the change's
	// next poll (watching, retry_wait), by invocation and change.
	followUps map[readKey]*Invocation
	// lostFollowUps: an invocation's finishing write was refused by the
	// fence (its lease ran out or was taken over) while the change was not
	// final; it must send a poll message for the change (checkFollowUps).
	lostFollowUps map[readKey]*Invocation
	// lostFaults is the invocation's fault count when its finishing write
	// was refused: the stall that outlived the lease is itself a fault,
	// only a later one excuses a missing follow-up.
	lostFaults map[readKey]int32
	// lostAt is when the finishing write was refused (virtual time).
	lostAt map[readKey]time.Time
	// reads holds the last CMS answer an invocation got for a change (the
	// next finishing write of that invocation for it must follow it).
	reads map[readKey]readResult
	// notBefore is, per change, the earliest real time its next CMS read
	// may happen (the next poll time the last write scheduled).
	notBefore map[string]time.Time
	// tampered lists the changes edited behind the monitor's back.
	tampered map[string]bool
	// hinted: a hint moved the change's next poll since its last
	// finishing write; regular is the next poll time (writer's clock)
	// the last completed poll scheduled.
	hinted  map[string]bool
	regular map[string]int64
	// claimHinted: whether a hint had moved the change's next poll when
	// this invocation claimed it (its finishing write is judged by what
	// it claimed, even when a reclaim in between cleared hinted).
	claimHinted map[readKey]bool
	// claimRegular: regular as it stood when this invocation claimed the
	// change. A hinted early failure is judged against it: after a
	// take-over, a later holder's completed poll moves regular, but the
	// stale holder decided (rightly) from the record it claimed.
	claimRegular map[readKey]int64
	// fx: the checks of issue 24's other findings (findings.go).
	fx *findings
	// corrupt follows the records the simulator corrupted (invariants.go).
	corrupt corruptTrack
	// takeover freezes CMS reads until a take-over (invariants.go).
	takeover takeoverFaults
	// owedListed: the invocation's outbox pass (Owed) listed the change.
	owedListed map[readKey]bool
}

type readKey struct {
	inv int
	id  string
}

// readResult is what one CMS read told the poller.
type readResult struct {
	err        bool
	code       string
	retryable  bool
	retryAfter time.Duration // the Retry-After the CMS sent (ground truth, from the HTTP answer)
	status     int
}

func storeDown() error { return core.Wrap(monitor.CodeStoreUnavailable, true, errInjected) }

func (s *monitorStore) Create(ctx context.Context, rec monitor.Record) (out monitor.Record, created bool, err error) {
	err = s.w.do(ctx, KindStore, "monitor.Create "+rec.EventID, storeDown, func() (string, error) {
		var e error
		out, created, e = s.mem.Create(ctx, rec)
		if e == nil && created && out.State.Final() {
			// A dispatch terminal at registration: its outcome is owed
			// from this write.
			oid := monitor.OutcomeID(out.EventID, out.State, out.OutboxMS)
			s.final[out.EventID] = oid
			s.written[oid] = out
		}
		return "created=" + strconv.FormatBool(created), e
	})
	return out, created, err
}

func (s *monitorStore) Get(ctx context.Context, id string) (out monitor.Record, err error) {
	err = s.w.do(ctx, KindStore, "monitor.Get "+id, storeDown, func() (string, error) {
		var e error
		out, e = s.mem.Get(ctx, id)
		if e == nil {
			s.corrupt.read(invocationOf(ctx), id)
		}
		return string(out.State), e
	})
	return out, err
}

func (s *monitorStore) Due(ctx context.Context, nowMS int64, limit int) (ids []string, err error) {
	err = s.w.do(ctx, KindStore, "monitor.Due", storeDown, func() (string, error) {
		var e error
		ids, e = s.mem.Due(ctx, nowMS, limit)
		return strings.Join(ids, ","), e
	})
	return ids, err
}

func (s *monitorStore) DuePage(ctx context.Context, nowMS int64, limit int, cursor monitor.DueCursor) (ids []string, next monitor.DueCursor, err error) {
	s.checkSweepGrace(invocationOf(ctx), nowMS)
	err = s.w.do(ctx, KindStore, "monitor.DuePage", storeDown, func() (string, error) {
		var e error
		ids, next, e = s.mem.DuePage(ctx, nowMS, limit, cursor)
		return strings.Join(ids, ","), e
	})
	return ids, next, err
}

func (s *monitorStore) Hint(ctx context.Context, h monitor.Hint) (out monitor.Record, ok bool, err error) {
	err = s.w.do(ctx, KindStore, "monitor.Hint "+h.EventID, storeDown, func() (string, error) {
		// Counted here, past the scheduler's gate: the handler's message
		// goroutines call Hint side by side (a concurrent map write when
		// counted before the gate, it crashed seeds 1001–2000 of the long run on
		// 408910a).
		s.fx.noteHintWrite(s.w, invocationOf(ctx), h.EventID)
		before, getErr := s.mem.Get(ctx, h.EventID)
		var e error
		out, ok, e = s.mem.Hint(ctx, h)
		if e != nil || !ok {
			return "not hinted, " + string(out.State), e
		}
		// A hint only moves a watching change's next poll forward, at
		// most once per gap: it never shortens a backoff (retry_wait).
		switch {
		case getErr != nil:
		case before.State != monitor.StateWatching:
			s.w.violate("a hint moved %s's next poll while it was %s (a hint never shortens a backoff)", h.EventID, before.State)
		case before.HintMS != 0 && h.NowMS-before.HintMS < s.cfg.HintMinGap.Milliseconds():
			s.w.violate("two hints moved %s's next poll %d ms apart (gap %s)", h.EventID, h.NowMS-before.HintMS, s.cfg.HintMinGap)
		}
		s.notBefore[h.EventID] = time.Now()
		s.hinted[h.EventID] = true
		s.fx.noteHinted(h)
		return "hinted", nil
	})
	return out, ok, err
}

func (s *monitorStore) Owed(ctx context.Context, beforeMS int64, limit int) (ids []string, err error) {
	err = s.w.do(ctx, KindStore, "monitor.Owed", storeDown, func() (string, error) {
		var e error
		ids, e = s.mem.Owed(ctx, beforeMS, limit)
		if e == nil {
			s.checkOwedListing(beforeMS, limit, ids)
		}
		if inv := invocationOf(ctx); inv != nil && e == nil {
			if s.owedListed == nil {
				s.owedListed = map[readKey]bool{}
			}
			for _, id := range ids {
				s.owedListed[readKey{inv.ID, id}] = true
			}
		}
		return strings.Join(ids, ","), e
	})
	return ids, err
}

func (s *monitorStore) Announced(ctx context.Context, id string, finishedMS int64) error {
	return s.w.do(ctx, KindStore, "monitor.Announced "+id, storeDown, func() (string, error) {
		err := s.mem.Announced(ctx, id, finishedMS)
		if err != nil {
			return "refused " + core.CodeOf(err), err
		}
		return "cleared", nil
	})
}

func (s *monitorStore) Claim(ctx context.Context, id string, l monitor.Lease) (out monitor.Record, ok bool, err error) {
	inv := invocationOf(ctx)
	s.checkPollBudget(inv, id)
	err = s.w.do(ctx, KindStore, "monitor.Claim "+id, storeDown, func() (string, error) {
		var e error
		out, ok, e = s.mem.Claim(ctx, id, l)
		if e == nil {
			s.corrupt.read(inv, id)
		}
		if e != nil || !ok {
			return "not claimed, " + string(out.State), e
		}
		if s.altered[id] {
			s.w.violate("record %s of another schema version was leased", id)
		}
		if prev := s.leases[id]; prev != nil && prev.open && prev.expires > l.NowMS {
			s.w.violate("two live leases on %s: #%d holds one until %d, claimed again at %d", id, prev.inv, prev.expires, l.NowMS)
		}
		s.leases[id] = &lease{token: l.Token, expires: l.ExpiresMS, open: true, inv: invID(inv)}
		s.fx.checkClaimed(s.w, id, out)
		s.takeover.claimed(id, l.Token)
		if inv != nil {
			s.claimHinted[readKey{inv.ID, id}] = s.hinted[id]
			s.claimRegular[readKey{inv.ID, id}] = s.regular[id]
			s.fx.noteClaim(inv.ID, id)
		}
		return fmt.Sprintf("leased until +%dms", l.ExpiresMS-l.NowMS), nil
	})
	return out, ok, err
}

func (s *monitorStore) Transition(ctx context.Context, f monitor.Fence, u monitor.Update) (out monitor.Record, err error) {
	inv := invocationOf(ctx)
	read := s.reads[readKey{invID(inv), f.EventID}] // before checkSchedule takes it
	s.checkSchedule(inv, f, u)
	s.fx.freezeHinted(s.w, inv, f)
	err = s.w.do(ctx, KindStore, "monitor.Transition "+f.EventID+" → "+string(u.State), storeDown, func() (string, error) {
		var e error
		out, e = s.mem.Transition(ctx, f, u)
		l := s.leases[f.EventID]
		if e != nil {
			if !f.Expired && (l == nil || l.token != f.Token || l.expires <= f.NowMS) {
				// A finishing write under a lease that ran out (or was
				// taken over): the fence refused it.
				s.w.Stats.StaleRefused++
				// Only a lost lease owes the follow-up: a record of another
				// schema version is not this code's to poll (adapters seed
				// 1357 of the long run on 0be7496).
				if _, final := s.final[f.EventID]; inv != nil && !final && !s.altered[f.EventID] && lostLeaseCode(core.CodeOf(e)) {
					s.lostFollowUps[readKey{inv.ID, f.EventID}] = inv
					s.lostFaults[readKey{inv.ID, f.EventID}] = inv.faults.Load()
					s.lostAt[readKey{inv.ID, f.EventID}] = time.Now()
				}
				return "refused stale " + core.CodeOf(e), e
			}
			return "refused " + core.CodeOf(e), e
		}
		s.checkCorruptBasis(inv, f, out)
		switch {
		case l == nil || l.token != f.Token:
			s.w.violate("write to %s accepted under a lease that is not the current one", f.EventID)
		case !l.open:
			s.w.violate("write to %s accepted under a lease already finished", f.EventID)
		case !f.Expired && l.expires <= f.NowMS:
			s.w.violate("write to %s accepted under an expired lease", f.EventID)
		}
		if f.Expired {
			s.reclaimed[f.EventID] = true
			s.w.Stats.Reclaims++
			if l != nil && s.w.running[l.inv] != nil {
				s.w.Stats.LeaseExpiredLive++
			}
			if l != nil && l.token == f.Token && l.expires > f.NowMS {
				s.w.violate("%s: a live lease (until %d) was reclaimed as expired at %d", f.EventID, l.expires, f.NowMS)
			}
		}
		if l != nil {
			l.open = false
		}
		if out.State.Final() {
			id := monitor.OutcomeID(f.EventID, out.State, u.UpdatedMS)
			if prev, ok := s.final[f.EventID]; ok && prev != id {
				s.w.violate("%s: a second final write (%s) after its final outcome was stored", f.EventID, out.State)
			}
			s.final[f.EventID] = id
			s.written[id] = out
			if inv != nil {
				s.storedBy[id] = inv
			}
			if _, ok := s.storedAt[id]; !ok && out.OutboxMS > 0 {
				// outbox_ms is the writer's clock when it decided
				// (before any stall of the write): → real time.
				off := time.Duration(0)
				if inv != nil {
					off = time.Duration(inv.clock.offset.Load())
				}
				s.storedAt[id] = time.UnixMilli(out.OutboxMS).Add(-off)
			}
		}
		delete(s.hinted, f.EventID)
		s.fx.noteWrite(f, u)
		if inv != nil && out.State.Claimable() && out.State != monitor.StatePending {
			s.followUps[readKey{inv.ID, f.EventID}] = inv
		}
		off := time.Duration(0)
		if inv != nil {
			off = time.Duration(inv.clock.offset.Load())
		}
		if u.State == monitor.StateWatching || u.State == monitor.StateRetryWait {
			// The writer's clock → real time.
			s.notBefore[f.EventID] = time.UnixMilli(u.NextPollMS).Add(-off)
		}
		if !f.Expired {
			s.fx.noteRetryAfter(f.EventID, read, u, off)
		} else {
			s.fx.noteRetryAfter(f.EventID, readResult{}, u, off)
		}
		return string(out.State) + " " + out.LastErrorCode + " " + out.RemoteStatus, nil
	})
	return out, err
}

// checkOwedListing: the owed listing the sweep's outbox pass reads
// (Store.Owed, the wake index's outbox keys) lists every final record
// that owes its outcome since beforeMS or earlier, up to limit (docs/design.md
// "Owed outcomes in the wake index"). Judged against the stored records
// themselves (read directly, outside the scheduler), the records the
// simulator tampered with aside. Without it an outcome whose announcing
// invocation failed waits for a redelivery that may never come: catches
// an owed projection that misses an attribute (dev/mutants
// monitordb-owed-projection-no-state) and a listing that skips a shard.
func (s *monitorStore) checkOwedListing(beforeMS int64, limit int, ids []string) {
	listed := map[string]bool{}
	for _, id := range ids {
		listed[id] = true
	}
	var missing []string
	owed := 0
	for _, id := range slices.Sorted(maps.Keys(s.final)) {
		if s.tampered[id] || s.altered[id] {
			continue
		}
		rec, ok := s.rawRecord(id)
		if !ok || !rec.State.Final() || rec.OutboxMS <= 0 || rec.OutboxMS > beforeMS {
			continue
		}
		owed++
		if !listed[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 && len(ids) < limit {
		s.w.violate("the owed listing (before %d, limit %d) returned %d records and left out %v, which owe their outcome", beforeMS, limit, len(ids), missing)
	}
}

// rawRecord reads a monitor record as stored, bypassing the scheduler
// and the fault injection (a checker's read).
func (s *monitorStore) rawRecord(id string) (monitor.Record, bool) {
	if s.w.ddb != nil {
		item := s.w.ddb.db.Raw(s.w.ddb.topo.Monitor.Name, monitordb.Key(id))
		if item == nil {
			return monitor.Record{}, false
		}
		return monitordb.RecordOf(item), true
	}
	mem, ok := s.mem.(*memstore.Store)
	if !ok {
		return monitor.Record{}, false
	}
	rec, err := mem.Get(context.Background(), id)
	return rec, err == nil
}

// checkSweepGrace: the sweep lists only changes at least SweepGrace past
// their wake time, leaving the queued SQS message its chance first
// (docs/design.md "The sweep's grace period"): the bound it asks the
// store for is at least the grace before the caller's clock (the largest
// clock step as tolerance). Catches a unit slip in the grace
// (dev/mutants mon-sweep-grace-seconds).
func (s *monitorStore) checkSweepGrace(inv *Invocation, uptoMS int64) {
	if inv == nil {
		return
	}
	grace := s.cfg.SweepGrace
	if grace <= 0 {
		grace = monitor.DefaultSweepGrace
	}
	tol := s.w.maxOffset - s.w.minOffset + time.Millisecond
	if limit := core.Millis(inv.clock.Now().Add(tol)) - grace.Milliseconds(); uptoMS > limit {
		s.w.violate("the sweep of invocation #%d listed changes due up to %d ms, %d ms later than its clock less the sweep grace %s",
			inv.ID, uptoMS, uptoMS-limit, grace)
	}
}

// checkPollBudget: a poll starts only with the CMS client's timeout plus
// the handler's margin left before the Lambda deadline (docs/design.md
// "Poller": a poll that cannot finish before the deadline is not
// started; its message comes back). Judged at the claim, the poll's first
// write, in an invocation no fault or stall has touched: there no virtual
// time passes between the handler's budget check and its claim (only a
// stall or a slow CMS answer moves the clock, and the answer comes after
// the claim). Catches dev/mutants poller-budget-no-margin.
func (s *monitorStore) checkPollBudget(inv *Invocation, id string) {
	if inv == nil || inv.faulted.Load() || inv.crashed.Load() || inv.deadline.IsZero() || s.pollBudget <= 0 {
		return
	}
	if left := time.Until(inv.deadline); left <= s.pollBudget {
		s.w.violate("change %s: invocation #%d claimed it for a poll with %s left before its deadline (a poll needs %s)",
			id, inv.ID, left, s.pollBudget)
	}
}

// checkSchedule checks what a finishing write decides against the
// documented schedule (docs/design.md "Monitor states and transitions",
// "Defaults"): the failure counted exactly once, the failure cap exact,
// a retry never earlier than max(backoff, Retry-After) — a backoff d may
// carry jitter within [d, 3d/2] (never shorter), a Retry-After is a floor — a watched
// change's next poll within [PollInterval/2, PollInterval], and a
// terminal outcome published before its write only with the publish
// margin left.
func (s *monitorStore) checkSchedule(inv *Invocation, f monitor.Fence, u monitor.Update) {
	if s.tampered[f.EventID] || inv == nil {
		return
	}
	id := f.EventID
	retry := func(failures int, ra time.Duration) {
		if u.ConsecutiveFailures != failures {
			s.w.violate("%s: failure recorded as %d consecutive failures, want %d", id, u.ConsecutiveFailures, failures)
		}
		switch {
		case failures >= f.MaxConsecutiveFailures && u.State != monitor.StateFailed:
			s.w.violate("%s: %d failures of at most %d and still %s (failure cap)", id, failures, f.MaxConsecutiveFailures, u.State)
		case failures < f.MaxConsecutiveFailures && u.State != monitor.StateRetryWait:
			s.w.violate("%s: %s after %d retryable failures of %d (failure cap)", id, u.State, failures, f.MaxConsecutiveFailures)
		case u.State == monitor.StateRetryWait:
			b := s.cfg.RetryDelay(failures)
			ra = min(ra, signedhttp.MaxRetryAfter)
			lo, hi := max(b, ra), max(b+b/2, ra)
			if d := time.Duration(u.NextPollMS-u.UpdatedMS) * time.Millisecond; d < lo || d > hi {
				s.w.violate("%s: retry after %d failures in %s, want %s..%s (backoff %s, Retry-After %s)", id, failures, d, lo, hi, b, ra)
			}
		}
	}
	if f.Expired {
		retry(f.ConsecutiveFailures+1, 0)
		return
	}
	key := readKey{inv.ID, id}
	read, ok := s.reads[key]
	if !ok {
		return
	}
	delete(s.reads, key)
	hinted := s.hinted[id] || s.claimHinted[key]
	regular, claimed := s.claimRegular[key]
	if !claimed {
		regular = s.regular[id]
	}
	early := s.fx.claimed(inv.ID, id)
	delete(s.claimHinted, key)
	delete(s.claimRegular, key)
	switch {
	case !read.err:
		if u.State == monitor.StateWatching {
			s.regular[id] = u.NextPollMS
			if d := time.Duration(u.NextPollMS-u.UpdatedMS) * time.Millisecond; d < s.cfg.PollInterval/2 || d > s.cfg.PollInterval {
				s.w.violate("%s: next poll of a watched change in %s, want %s..%s", id, d, s.cfg.PollInterval/2, s.cfg.PollInterval)
			}
		}
	case read.retryable && u.State == monitor.StateWatching && u.ConsecutiveFailures == f.ConsecutiveFailures:
		// A poll a hint brought forward failed before the regular poll
		// time: not counted, due at the regular time or the Retry-After,
		// whichever is later (docs/design.md "Hints"). Only after a hint.
		ra := min(read.retryAfter, signedhttp.MaxRetryAfter)
		switch d := time.Duration(u.NextPollMS-u.UpdatedMS) * time.Millisecond; {
		case !hinted:
			s.w.violate("%s: a retryable failure was not counted (%s) although no hint brought the poll forward", id, read.code)
		case d < ra:
			s.w.violate("%s: a hinted poll's failure scheduled the next poll in %s, before the Retry-After %s", id, d, ra)
		case regular != 0 && u.NextPollMS < regular-s.cfg.PollInterval.Milliseconds()/2:
			// regular as of the claim (claimRegular).
			s.w.violate("%s: a hinted poll's failure scheduled the next poll %d ms before the regular poll time", id, regular-u.NextPollMS)
		}
	case read.retryable:
		s.fx.checkHintedEarly(s, early, f, u, hinted)
		retry(f.ConsecutiveFailures+1, read.retryAfter)
	default:
		if u.State != monitor.StateFailed {
			s.w.violate("%s: a read failure that is not retryable (%s) left it %s", id, read.code, u.State)
		}
	}
}

func (s *monitorStore) MarkInvalid(ctx context.Context, id string, nowMS int64) error {
	return s.w.do(ctx, KindStore, "monitor.MarkInvalid "+id, storeDown, func() (string, error) {
		if l := s.leases[id]; l != nil {
			l.open = false
		}
		if err := s.mem.MarkInvalid(ctx, id, nowMS); err != nil {
			return "refused", err
		}
		delete(s.fx.waitUntil, id) // failed: an operator's requeue polls at once
		s.corrupt.written(invocationOf(ctx), id)
		if inv := invocationOf(ctx); inv != nil {
			// The record is final now: the poll this invocation's earlier
			// write scheduled is no longer owed (a transition whose
			// returned record fails the integrity check is marked at once;
			// adapters seed 535 on 4cb9354: the checker asked for a poll
			// message of a failed change).
			delete(s.followUps, readKey{inv.ID, id})
		}
		if rec, err := s.mem.Get(ctx, id); err == nil && rec.State.Final() && rec.OutboxMS != 0 {
			oid := monitor.OutcomeID(id, rec.State, rec.OutboxMS)
			if prev, ok := s.final[id]; !ok || prev != oid {
				s.final[id] = oid
				s.written[oid] = rec
			}
		}
		return "failed", nil
	})
}

func (s *monitorStore) Census(ctx context.Context) (recs []monitor.Record, err error) {
	err = s.w.do(ctx, KindStore, "monitor.Census", storeDown, func() (string, error) {
		var e error
		recs, e = s.mem.Census(ctx)
		return strconv.Itoa(len(recs)), e
	})
	return recs, err
}

func invID(inv *Invocation) int {
	if inv == nil {
		return 0
	}
	return inv.ID
}

// cmsTransport serves the scripted CMS in memory: each request is one
// gated HTTP call (it can fail before reaching the CMS).
type cmsTransport struct {
	w   *World
	cms http.Handler
	m   *Monitor
}

var changeIDPattern = regexp.MustCompile(`\bch-\d+\b`)

func (t cmsTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var resp *http.Response
	name := "http " + req.Method + " " + req.URL.Path
	id := changeIDPattern.FindString(req.URL.Path)
	inv := invocationOf(req.Context())
	// The poller sends this read now: never before the next poll the last
	// write scheduled (a hint aside, which resets it). Judged when it is
	// sent: a stall in flight delays its arrival, not the decision.
	if nb, ok := t.m.store.notBefore[id]; ok && id != "" && inv != nil && !t.m.store.tampered[id] {
		if tol := t.w.maxOffset - t.w.minOffset + time.Millisecond; time.Now().Add(tol).Before(nb) {
			t.w.violate("the CMS was polled for %s %s before its scheduled next poll", id, time.Until(nb))
		}
	}
	if id != "" && inv != nil && !t.m.store.tampered[id] {
		t.m.store.fx.checkRetryAfterFloor(t.w, id)
	}
	if l := t.m.store.leases[id]; l != nil && inv != nil && l.open && l.inv == inv.ID {
		t.m.store.freezeForTakeover(inv, id, l.token, l.expires)
	}
	err := t.w.do(req.Context(), KindHTTP, name, func() error { return fmt.Errorf("dial %s: %w", req.URL.Host, errInjected) },
		func() (string, error) {
			rec := httptest.NewRecorder()
			t.cms.ServeHTTP(rec, req)
			resp = rec.Result()
			if req.Context().Err() != nil {
				return "client gave up", req.Context().Err()
			}
			return strconv.Itoa(resp.StatusCode), nil
		})
	if err != nil {
		return nil, err
	}
	if (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) && t.w.rng.IntN(4) != 0 {
		// The CMS asks for a pause: often longer than the backoff, which
		// must then wait for it. (Drawn here, after the scheduled call:
		// never while another goroutine may run.)
		resp.Header.Set("Retry-After", strconv.Itoa(1+t.w.rng.IntN(2*int(t.m.store.cfg.MaxDelay/time.Second)+2)))
		t.m.store.fx.hugeRetryAfter(resp.Header, resp.Header.Get("Retry-After"))
		// Drawn all the same: the seed's other draws stay.
		t.m.store.fx.outageRetryAfter(id, resp.Header, resp.Header.Get("Retry-After"))
	}
	if inv != nil && id != "" {
		// The answer reached the client: what it said is what the
		// poller's next write must follow.
		t.m.store.reads[readKey{inv.ID, id}] = readResult{status: resp.StatusCode, retryAfter: retryAfterOf(resp.Header.Get("Retry-After"))}
	}
	return resp, nil
}

// skewClock is one warm instance's clock: the virtual clock plus an
// offset that the world may step (forward or back) while faults last.
type skewClock struct{ offset *atomic.Int64 }

func (c skewClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// newClock draws an instance's clock and, on seeds with skew, schedules a
// clock step within the fault window.
func (w *World) newClock(name string) skewClock {
	c := skewClock{offset: &atomic.Int64{}}
	if w.Faults.Skew <= 0 {
		return c
	}
	c.offset.Store(w.rng.Int64N(int64(w.Faults.Skew)))
	w.maxOffset = max(w.maxOffset, time.Duration(c.offset.Load()))
	at := w.start.Add(time.Duration(w.rng.Int64N(int64(w.faultsEnd.Sub(w.start)))))
	step := w.rng.Int64N(2*int64(w.Faults.Skew)) - int64(w.Faults.Skew)
	w.at(at, fmt.Sprintf("clock step %s %+dms", name, step/int64(time.Millisecond)), func() {
		o := time.Duration(c.offset.Add(step))
		w.maxOffset, w.minOffset = max(w.maxOffset, o), min(w.minOffset, o)
	})
	return c
}

// change is one scripted change of the scenario.
type change struct {
	id       string
	dispatch time.Time
	remote   string // the dispatch's remote_status
	script   []cmstest.Step
	tamper   string // "", "schema", "corrupt"
	tampered bool
	forged   bool // its dispatch is signed with a key localeflow does not hold
}

// Monitor is the lifecycle monitor's part of the world: the real poller
// handler and monitor service on the memory store, with the CMS, queue
// and bus simulated.
type Monitor struct {
	w           *World
	mem         monitorBacking
	store       *monitorStore
	cms         *cmstest.CMS
	queue       *Queue
	bus         *Bus
	fn          *Function
	services    []*monitor.Service
	changes     []*change
	log         *logcapture.Buffer
	quarantined *Queue
	// needOperator lists the changes that ended needing an operator.
	needOperator []string
	// pageSize is the poller's sweep page size (drawn per seed).
	pageSize int
}

func newMonitor(w *World, bus *Bus, log *logcapture.Buffer, quarantined *Queue) (*Monitor, error) {
	top := topology.New("sim")
	mem, err := w.newMonitorBacking()
	if err != nil {
		return nil, err
	}
	w.fx = newFindings(w.Seed)
	m := &Monitor{w: w, mem: mem, cms: cmstest.New(cmsKey), bus: bus, log: log, quarantined: quarantined}
	sc := w.Faults.Config
	cfg := monitor.Config{PollInterval: sc.PollInterval, BaseDelay: sc.BaseDelay, MaxDelay: sc.MaxDelay, Lease: sc.Lease,
		MaxConsecutiveFailures: sc.MaxFailures}.WithDefaults()
	m.store = &monitorStore{w: w, mem: m.mem, leases: map[string]*lease{}, altered: map[string]bool{}, alteredAs: map[string]monitor.Record{}, reclaimed: map[string]bool{},
		cfg: cfg, written: map[string]monitor.Record{}, final: map[string]string{},
		storedBy: map[string]*Invocation{}, announcedBy: map[string]map[int]bool{}, storedAt: map[string]time.Time{}, followUps: map[readKey]*Invocation{}, lostFollowUps: map[readKey]*Invocation{}, lostFaults: map[readKey]int32{}, lostAt: map[readKey]time.Time{},
		reads: map[readKey]readResult{}, notBefore: map[string]time.Time{}, tampered: map[string]bool{},
		hinted: map[string]bool{}, regular: map[string]int64{}, claimHinted: map[readKey]bool{},
		claimRegular: map[readKey]int64{}, fx: w.fx}
	def := top.PollQueue
	def.VisibilityTimeoutSeconds = 6 * int(sc.FunctionTimeout/time.Second)
	m.queue = newQueue(w, def, "poller")
	m.fn = &Function{w: w, name: "poller", timeout: sc.FunctionTimeout, queue: m.queue}
	bus.Observe(m.observe)
	// Every rule of the topology that targets the poll queue (dispatches
	// and hints).
	for _, rule := range top.Rules {
		if rule.TargetQueue == top.PollQueue.Logical {
			for _, dt := range rule.DetailTypes {
				bus.rules[dt] = m.queue
			}
		}
	}
	m.pageSize = 1 + w.rng.IntN(4)
	if err := m.deploy(defaultDeployment(w, releasetest.NewFixture())); err != nil {
		return nil, err
	}
	return m, nil
}

// deploy (re)starts the poller's warm instances with the settings of d:
// the first deployment, and every cold start of a day-2 operation
// (day2.go). A deployment that fails leaves the function as it was: as on
// Lambda, where a version that does not start never replaces the one
// serving, the old instances go on (and the caller reports the failure).
func (m *Monitor) deploy(d deployment) error {
	w, log, quarantined := m.w, m.log, m.quarantined
	top := topology.New("sim")
	var instances []instance
	var services []*monitor.Service
	for i := range 2 {
		clock := w.newClock(fmt.Sprintf("poller-%d", i+1))
		logger := slog.New(slog.NewJSONHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
		mc := d.monitor
		mc.WorkerID = fmt.Sprintf("poller-%d", i+1)
		svc, err := monitor.NewService(m.store, clock, logger, mc)
		if err != nil {
			return err
		}
		client, err := cms.New(cms.Config{BaseURL: "https://cms.sim.invalid", Key: d.cmsKeys[0], PreviousKeys: d.cmsKeys[1:], Clock: clock, Timeout: d.cmsTimeout,
			HTTPClient: &http.Client{Transport: cmsTransport{w: w, cms: m.cms, m: m}}})
		if err != nil {
			return err
		}
		pc := pollerConfig(d, w.Faults.WorkerConcurrency)
		h, err := handler.New(handler.Config{
			Monitor: svc, Reader: simReader{client, m.store}, Queue: delayqueue.New(m.queue, "https://sqs.sim.invalid/poll"),
			Bus: eventbus.New(m.bus, "sim-bus"), Clock: clock, Log: logger,
			Concurrency: pc.Concurrency, PageSize: m.pageSize, Margin: pc.Margin,
			EventKeys: d.eventKeys, EventMaxAge: pc.EventMaxAge, RefuseV1Events: pc.RefuseV1,
			Rejecter: &quarantine.Rejecter{SQS: quarantined, QueueURL: "https://sqs.sim.invalid/quarantine",
				Source: top.PollQueue.Logical, Function: "poller", Clock: clock},
		})
		if err != nil {
			return err
		}
		instances = append(instances, instance{m.countHints(h.Handle), clock})
		services = append(services, svc)
	}
	margin := pollerConfig(d, w.Faults.WorkerConcurrency).Margin
	if margin == 0 {
		margin = handler.DefaultMargin
	}
	m.fn.instances, m.services, m.store.cfg, m.store.pollBudget = instances, services, d.monitor, d.cmsTimeout+margin
	return nil
}

// script draws the changes of one seed and schedules their dispatch.
func (m *Monitor) script(n int, window time.Duration) {
	r := m.w.rng
	nonTerminal := []string{"processing", "publishing", "awaiting_approval", "ready", "queue_recovery"}
	finals := []string{"published", "published", "published", "cancelled", "deleted", "publication_failed", "publication_blocked"}
	for i := range n {
		c := &change{id: fmt.Sprintf("ch-%d", i+1), remote: "enqueued"}
		c.dispatch = m.w.start.Add(time.Duration(r.Int64N(int64(window))))
		if r.IntN(12) == 0 {
			c.remote = []string{"superseded", "cancelled"}[r.IntN(2)]
		}
		for range r.IntN(5) {
			switch k := r.IntN(10); {
			case k < 6:
				c.script = append(c.script, cmstest.StatusStep(nonTerminal[r.IntN(len(nonTerminal))]))
			case k < 9:
				c.script = append(c.script, cmstest.HTTPStep([]int{429, 500, 503}[r.IntN(3)]))
			default:
				c.script = append(c.script, cmstest.Step{Status: "processing", Delay: 15 * time.Second})
			}
		}
		final := cmstest.StatusStep(finals[r.IntN(len(finals))])
		if r.IntN(4) == 0 {
			// A slow CMS: the terminal answer comes shortly before the
			// client gives up, when little of a short lease is left.
			final.Delay = time.Duration(r.Int64N(int64(m.w.Faults.Config.CMSTimeout)))
		}
		if r.IntN(40) == 0 {
			final = cmstest.Step{Status: "published", Fault: []cmstest.Fault{cmstest.FaultBadSignature, cmstest.FaultMalformedBody, cmstest.FaultExtraKey}[r.IntN(3)]}
		}
		c.script = append(c.script, final)
		if r.IntN(6) == 0 {
			c.tamper = []string{"schema", "corrupt"}[r.IntN(2)]
		}
		m.cms.Put(cmstest.Change{EventID: c.id, SiteID: "site-sim", PlanID: "plan-" + c.id, WebsiteVersion: "v1",
			SourceSequence: 1, RequiredLocales: []string{"de-DE"}})
		m.cms.Script(c.id, c.script...)
		m.changes = append(m.changes, c)
		if r.IntN(15) == 0 {
			// Someone else on the bus publishes a dispatch for this id
			// first, with a key localeflow does not hold.
			f := &change{id: c.id + "-forged", forged: true, dispatch: c.dispatch, remote: "enqueued"}
			m.changes = append(m.changes, f)
			m.w.at(f.dispatch, "forged dispatch "+f.id, func() {
				detail, err := signing.EventDetailV2([]byte("not-localeflow-event-key-0123456"), contract.DetailChangeDispatched, time.Now(), dispatchedDetail(f))
				if err != nil {
					panic(err)
				}
				m.bus.put(contract.DetailChangeDispatched, detail)
			})
		}
		copies := 1
		if r.IntN(8) == 0 {
			copies = 2 // the producer publishes the dispatch twice
		}
		for range copies {
			m.w.at(c.dispatch, "dispatch "+c.id, func() {
				m.bus.put(contract.DetailChangeDispatched, signedDetail(contract.DetailChangeDispatched, dispatchedDetail(c)))
			})
		}
		for range r.IntN(4) {
			// Hints (the CMS saying "look now"): unsigned, any time, in
			// any state; they may only move a watching change's next poll.
			at := c.dispatch.Add(time.Duration(r.Int64N(int64(10 * time.Minute))))
			hint, _ := json.Marshal(map[string]string{"event_id": c.id, "site_id": "site-sim"})
			m.w.at(at, "hint "+c.id, func() { m.bus.put(contract.DetailChangeHint, hint) })
		}
		if r.IntN(4) == 0 {
			// A burst of hints, one every 1–20 s: some land while the
			// change waits out a backoff, which they must not shorten.
			at := c.dispatch
			for range 10 {
				at = at.Add(time.Duration(1+r.IntN(20)) * time.Second)
				hint, _ := json.Marshal(map[string]string{"event_id": c.id, "site_id": "site-sim"})
				m.w.at(at, "hint "+c.id, func() { m.bus.put(contract.DetailChangeHint, hint) })
			}
		}
		if c.tamper != "" {
			at := c.dispatch.Add(time.Duration(r.Int64N(int64(5 * time.Minute))))
			m.w.at(at, "tamper "+c.tamper+" "+c.id, func() { m.tamper(c) })
		}
	}
	m.scriptFindings()
	m.scriptHintedOutage()
}

// tamper edits a stored record behind the service's back, as an operator
// or a bug in another writer would.
// Only a record still in flight is tampered with: a final record's outcome
// was already announced.
func (m *Monitor) tamper(c *change) {
	m.mem.Tamper(c.id, func(r *monitor.Record) {
		if r.State.Final() {
			return
		}
		c.tampered = true
		m.store.tampered[c.id] = true
		if c.tamper == "schema" {
			m.store.altered[c.id] = true
			r.SchemaVersion = monitor.SchemaVersion + 1
		} else {
			r.ConsecutiveFailures = -1
			m.store.corrupt.corrupted(c.id)
		}
	})
	if !c.tampered {
		m.w.record(nil, "tamper skipped "+c.id, "record final or missing")
	}
	if c.tampered && c.tamper == "schema" {
		if rec, err := m.mem.Get(context.Background(), c.id); err == nil {
			m.store.alteredAs[c.id] = rec
		}
	}
}

func dispatchedDetail(c *change) json.RawMessage {
	changeJSON, _ := json.Marshal(map[string]any{"event_id": c.id, "site_id": "site-sim", "website_version": "v1",
		"source_sequence": 1, "title": Secret + " Willkommen " + c.id})
	canonical, _ := core.CanonicalizeJSON(changeJSON)
	raw, _ := json.Marshal(map[string]any{
		"change": json.RawMessage(canonical),
		"dispatch": map[string]any{"event_id": c.id, "payload_sha256": core.SHA256Hex(canonical), "status": "succeeded",
			"remote_plan_id": "plan-" + c.id, "remote_job_count": 1, "remote_status": c.remote,
			"response_sha256": core.SHA256Hex([]byte("response-" + c.id))},
	})
	return raw
}

// check runs the monitor's history checks after the world went quiet.
func (m *Monitor) check(ctx context.Context, now time.Time) {
	nowMS := core.Millis(now)
	terminal := m.terminalEvents()
	m.checkAnnouncedInline()
	m.checkFollowUps()
	m.checkTrailing(ctx)
	if _, err := m.mem.Due(ctx, nowMS, 10_000); err != nil {
		m.w.violate("due listing failed: %v", err)
	}
	known := map[string]bool{}
	for _, c := range m.changes {
		known[c.id] = true
		rec, err := m.mem.Get(ctx, c.id)
		if c.forged {
			if err == nil {
				m.w.violate("change %s was registered from a forged dispatch", c.id)
			} else if !holds(m.quarantined.msgs, c.id) {
				m.w.violate("forged dispatch %s was dropped without quarantine", c.id)
			}
			continue
		}
		// A validly signed dispatch (and the poller's own messages for
		// it) never ends in the quarantine unless the simulator tampered
		// with its record, and in the DLQ only when injected faults
		// explain every receive.
		for _, msg := range m.quarantined.msgs {
			if holds([]*message{msg}, c.id) && !c.tampered {
				m.w.violate("a message for %s (%s) was quarantined (%s) although nothing the simulator forged or corrupted explains it",
					c.id, msgKind(msg), msg.code)
			}
		}
		m.checkDLQ(c.id)
		if err != nil {
			if d := m.w.day2; d != nil && d.monitorExpired[c.id] {
				continue // finished, then deleted by its TTL (day2.go)
			}
			if !holds(m.queue.DLQ, c.id) {
				m.w.violate("change %s was dispatched but never registered (not in the DLQ either)", c.id)
			}
			continue
		}
		if c.tampered && c.tamper == "schema" {
			// Another schema version: nobody may lease, poll or change
			// it; it waits, exactly as it was, for an operator.
			m.needOperator = append(m.needOperator, c.id)
			if want, ok := m.store.alteredAs[c.id]; !ok || !reflect.DeepEqual(rec, want) {
				m.w.violate("record %s of another schema version was changed: %+v, tampered as %+v", c.id, rec, want)
			}
			continue
		}
		if !rec.State.Final() {
			m.w.violate("change %s is %s after faults stopped (not terminal or failed)", c.id, rec.State)
			continue
		}
		if rec.State == monitor.StateFailed || lifecycle.IsRemoteFailure(rec.RemoteStatus) {
			m.needOperator = append(m.needOperator, c.id)
		}
		m.checkOutcome(c, rec, terminal[c.id])
		if rec.OutboxMS != 0 {
			m.w.violate("change %s still owes its outcome (outbox_ms %d) after faults stopped", c.id, rec.OutboxMS)
		}
		if strings.Contains(string(rec.Lifecycle), Secret) {
			m.w.violate("monitor record %s holds change text", c.id)
		}
	}
	for id := range terminal {
		if !known[id] {
			m.w.violate("localeflow.change.terminal published for %s, a change nobody dispatched", id)
		}
	}
}

// checkDLQ: a validly signed input in a DLQ is a violation unless every
// receive of it ended in an invocation into which the simulator injected
// a fault (the DLQ alarm then shows it, and an operator redrives it).
func (m *Monitor) checkDLQ(id string) {
	for _, msg := range m.queue.DLQ {
		if !holds([]*message{msg}, id) || strings.Contains(msg.body, contract.DetailChangeHint) {
			continue
		}
		if msg.explained() {
			m.w.Stats.DLQExplained++
			continue
		}
		m.w.violate("the validly signed dispatch of %s is in the DLQ after %d receives, %d of them with an injected fault",
			id, msg.receives, msg.faulted)
	}
}

// terminalEvents decodes every published localeflow.change.terminal
// (strictly: a field the contract does not have is a violation), by
// change.
func (m *Monitor) terminalEvents() map[string][]contract.ChangeTerminal {
	out := map[string][]contract.ChangeTerminal{}
	for _, e := range m.bus.Events {
		if e.DetailType != contract.DetailChangeTerminal {
			continue
		}
		var d contract.ChangeTerminal
		dec := json.NewDecoder(strings.NewReader(string(e.Detail)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&d); err != nil {
			m.w.violate("terminal event %s does not decode: %v", e.ID, err)
			continue
		}
		out[d.EventID] = append(out[d.EventID], d)
	}
	return out
}

// observe checks, when a change.terminal is put, that its outcome was
// already stored: an outcome is never published before its finishing
// write (docs/design.md "One outcome per change").
func (m *Monitor) observe(inv *Invocation, e Event) {
	if e.DetailType != contract.DetailChangeTerminal || inv == nil {
		return
	}
	var d contract.ChangeTerminal
	if json.Unmarshal(e.Detail, &d) != nil {
		return
	}
	if m.store.announcedBy[d.OutcomeID] == nil {
		m.store.announcedBy[d.OutcomeID] = map[int]bool{}
	}
	m.store.announcedBy[d.OutcomeID][inv.ID] = true
	// The sweep's outbox pass re-publishes only outcomes owed for at least
	// OutboxGrace (docs/design.md "Monitor outbox": outbox_ms <= now - 30 s
	// on the sweep's clock); a younger one is still the finishing path's
	// to announce. An outcome the sweep itself stored is its own, and one
	// its poll part found owed (a claim lost to the write that finished the
	// change) is not the outbox pass's: judged only when its Owed listed it.
	if inv.Fn == "poller" && inv.What == "schedule sweep" && m.store.storedBy[d.OutcomeID] != inv &&
		m.store.owedListed[readKey{inv.ID, d.EventID}] {
		if at, ok := m.store.storedAt[d.OutcomeID]; ok {
			tol := m.w.maxOffset - m.w.minOffset + time.Millisecond
			if age := time.Since(at); age+tol < m.store.cfg.OutboxGrace {
				m.w.violate("change %s: the sweep re-published its outcome %s after its outbox_ms, within the outbox grace %s",
					d.EventID, age, m.store.cfg.OutboxGrace)
			}
		}
	}
	if _, ok := m.store.written[d.OutcomeID]; !ok {
		m.w.violate("change %s: localeflow.change.terminal (%s/%s/%s) published before its outcome was stored",
			d.EventID, d.State, deref(d.RemoteStatus), deref(d.ErrorCode))
	}
}

// checkAnnouncedInline checks that the invocation whose finishing write
// stored an outcome published it itself unless a fault hit it: the poll
// (or reclaim, or sweep visit) that finishes a change announces the
// outcome from the record its write returned; the sweep's outbox pass is
// the safety net for an announcement that failed, not the path
// (docs/design.md "Monitor outbox", "One outcome per change"). Without it
// every outcome would wait OutboxGrace and a sweep.
func (m *Monitor) checkAnnouncedInline() {
	ids := make([]string, 0, len(m.store.storedBy))
	for id := range m.store.storedBy {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		inv := m.store.storedBy[id]
		// A record the simulator tampered with (another schema version,
		// an impossible counter) is a fault of its own: the poller leaves
		// the first as it is and marks the second instead of publishing.
		rec := m.store.written[id]
		if inv.faulted.Load() || inv.crashed.Load() || m.store.announcedBy[id][inv.ID] || m.store.tampered[rec.EventID] {
			continue
		}
		m.w.violate("change %s: invocation #%d stored its outcome (%s) without a fault and did not publish it", rec.EventID, inv.ID, rec.State)
	}
}

// checkFollowUps checks that the invocation whose write scheduled a
// change's next poll (watching, retry_wait) sent the poll message for it
// unless a fault hit it: whoever writes next_poll_ms sends the message
// (docs/design.md "A poll that outlived its lease"); the minute sweep is the safety
// net for a lost one, not the path.
func (m *Monitor) checkFollowUps() {
	keys := make([]readKey, 0, len(m.store.followUps))
	for k := range m.store.followUps {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].inv != keys[j].inv {
			return keys[i].inv < keys[j].inv
		}
		return keys[i].id < keys[j].id
	})
	for _, k := range keys {
		inv := m.store.followUps[k]
		if inv.faulted.Load() || inv.crashed.Load() || m.w.sendFailed[inv.ID] || m.w.pollSent[k] {
			continue
		}
		m.w.violate("change %s: invocation #%d scheduled its next poll without a fault and sent no poll message for it", k.id, inv.ID)
	}
	// A poll whose finishing write the fence refused: nothing else may
	// wake the record, so that invocation sends a poll for when it can be
	// claimed again, or announces the outcome if the change was finished
	// meanwhile, unless a fault hit it after the refusal (the stall that
	// outlived the lease does not excuse it) (docs/design.md "A poll that outlived its lease"). Without
	// it the sweep finds the change minutes later: an outcome check alone
	// cannot tell (catches dev/mutants poller-lost-lease-no-followup).
	keys = keys[:0]
	for k := range m.store.lostFollowUps {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].inv != keys[j].inv {
			return keys[i].inv < keys[j].inv
		}
		return keys[i].id < keys[j].id
	})
	for _, k := range keys {
		inv := m.store.lostFollowUps[k]
		if inv.faults.Load() > m.store.lostFaults[k] || inv.crashed.Load() || m.w.sendFailed[inv.ID] || m.w.pollSent[k] || m.announcedByInv(k.id, inv.ID) ||
			m.finishedBy(k.id, m.store.lostAt[k]) {
			continue
		}
		m.w.violate("change %s: invocation #%d had its finishing write refused (lease lost) and sent no poll message for it", k.id, inv.ID)
	}
}

// lostLeaseCode reports whether a refused finishing write lost its lease
// (the fence refused it), the refusals that owe a follow-up poll.
func lostLeaseCode(code string) bool {
	switch code {
	case monitor.CodeLeaseExpired, monitor.CodeClaimLost, monitor.CodeCompletionLost, monitor.CodeFailureLost, monitor.CodeClockRegressed:
		return true
	}
	return false
}

// finishedBy reports whether change id's final outcome was stored by the
// virtual instant at (the taker of a lost lease finished the change at
// the refusal's instant: the refused poll then reads it final, and owes
// no poll; adapters seed 2578 of the long run on 0be7496).
func (m *Monitor) finishedBy(id string, at time.Time) bool {
	out, ok := m.store.final[id]
	if !ok {
		return false
	}
	stored, ok := m.store.storedAt[out]
	tol := m.w.maxOffset - m.w.minOffset + time.Millisecond
	return ok && !stored.After(at.Add(tol))
}

// announcedByInv reports whether invocation inv put a change.terminal of
// change id.
func (m *Monitor) announcedByInv(id string, inv int) bool {
	if out, ok := m.store.final[id]; ok {
		return m.store.announcedBy[out][inv]
	}
	return false
}

// expectedTerminal is the localeflow.change.terminal a stored final
// record announces (docs/design.md "Monitor outbox"; the identity and the
// snapshot are null for a record that failed validation).
func expectedTerminal(rec monitor.Record, outcomeID string) contract.ChangeTerminal {
	opt := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	t := contract.ChangeTerminal{Schema: contract.SchemaChangeTerminal, EventID: rec.EventID, OutcomeID: outcomeID, State: string(rec.State),
		SiteID: opt(rec.SiteID), PlanID: opt(rec.PlanID), RemoteStatus: opt(rec.RemoteStatus),
		ErrorCode: opt(rec.LastErrorCode), LifecycleSHA256: opt(rec.LifecycleSHA256)}
	if rec.State == monitor.StateFailed && rec.LastErrorCode == monitor.CodeStateInvalid {
		t.SiteID, t.PlanID, t.RemoteStatus, t.LifecycleSHA256 = nil, nil, nil, nil
	}
	return t
}

// MaxEventsPerOutcome bounds how many times one outcome (one change's
// terminal outcome, one approval, one delivery status) is published in a
// seed: at least once, not at least hundreds. Every publish comes from
// the path that decided it or from a re-publish: a redelivered message
// (the coordinator re-publishes a release's stored state on every
// redelivery), a sweep every minute while the outcome is still owed.
// Under the fault window's rates the most seen in seeds 1–500 is 24
// (docs/simulation.md "Counts per block"); a regression that publishes
// per poll or per sweep without the owed check gives hundreds.
const MaxEventsPerOutcome = 32

// checkOutcome compares every change.terminal published for c, field by
// field, with what the store finally says: one outcome per change
// (duplicates of it allowed, another one never), each event exactly the
// stored outcome, at most MaxEventsPerOutcome of them.
func (m *Monitor) checkOutcome(c *change, rec monitor.Record, events []contract.ChangeTerminal) {
	finalID, ok := m.store.final[c.id]
	if !ok {
		m.w.violate("change %s ended %s (%s) but no final write of it was seen", c.id, rec.State, rec.LastErrorCode)
		return
	}
	want := expectedTerminal(m.store.written[finalID], finalID)
	if got := expectedTerminal(rec, finalID); !equalJSON(got, want) {
		m.w.violate("change %s: the final record changed after its final write (%s, then %s)", c.id, jsonOf(want), jsonOf(got))
	}
	matched, others := 0, 0
	for _, e := range events {
		if e.OutcomeID == finalID {
			if !equalJSON(e, want) {
				m.w.violate("change %s: localeflow.change.terminal %s differs from the stored outcome %s", c.id, jsonOf(e), jsonOf(want))
			}
			matched++
			continue
		}
		// One outcome per change: another state, remote status, error
		// code or outcome_id is never published, whatever happened to
		// the lease or the record.
		others++
		m.w.violate("change %s: consumer received %s, the stored outcome is %s (reclaimed %v, tampered %v)",
			c.id, jsonOf(e), jsonOf(want), m.store.reclaimed[c.id], c.tampered)
	}
	if matched == 0 {
		m.w.violate("change %s ended %s (%s) but localeflow.change.terminal was never published for that outcome",
			c.id, rec.State, rec.LastErrorCode)
	}
	m.w.Stats.MaxEvents = max(m.w.Stats.MaxEvents, matched+others)
	if matched+others > MaxEventsPerOutcome {
		m.w.violate("change %s: its outcome was published %d times (bound %d)", c.id, matched+others, MaxEventsPerOutcome)
	}
}

func equalJSON(a, b any) bool { return jsonOf(a) == jsonOf(b) }

func jsonOf(v any) string {
	raw, _ := json.Marshal(v)
	return string(raw)
}

func deref(s *string) string {
	if s == nil {
		return "null"
	}
	return *s
}

// msgKind names what a message is: an input's detail-type or the kind of
// the poller's own envelope.
func msgKind(msg *message) string {
	for _, dt := range []string{contract.DetailChangeDispatched, contract.DetailChangeHint, contract.DetailPlanAccepted, contract.DetailJobCompleted} {
		if strings.Contains(msg.body, dt) {
			return dt
		}
	}
	if l := envelopeLabel(msg.body); l != "" {
		return l
	}
	return "message"
}

// simReader is the CMS client as the poller sees it; it notes what each
// read told the poller, for the schedule checks of the next write.
type simReader struct {
	inner monitor.LifecycleReader
	s     *monitorStore
}

func (r simReader) Timeout() time.Duration { return r.inner.Timeout() }

func (r simReader) ReadLifecycle(ctx context.Context, target lifecycle.Target) (lifecycle.Response, error) {
	inv := invocationOf(ctx)
	key := readKey{invID(inv), target.EventID}
	delete(r.s.reads, key)
	resp, err := r.inner.ReadLifecycle(ctx, target)
	if inv == nil {
		return resp, err
	}
	rr := r.s.reads[key] // what the transport saw (status, Retry-After)
	if err != nil {
		rr.err = true
		code := core.CodeOf(err)
		switch {
		case code != "" && core.ValidErrorCode(code):
			rr.code, rr.retryable = code, core.IsRetryable(err) && code != monitor.CodeResponseInvalid
		case ctx.Err() != nil:
			rr.code, rr.retryable = monitor.CodeClientFailure, true
		default:
			rr.code = monitor.CodeClientFailure
		}
		if (rr.status == http.StatusTooManyRequests || rr.status >= 500) && !rr.retryable {
			r.s.w.violate("%s: the CMS answered %d and the poller took it as not retryable (%s)", target.EventID, rr.status, rr.code)
		}
	}
	r.s.reads[key] = rr
	return resp, err
}

// holds reports whether a message body names id.
func holds(msgs []*message, id string) bool {
	for _, msg := range msgs {
		if strings.Contains(msg.body, `"`+id+`"`) || strings.Contains(msg.body, `\"`+id+`\"`) {
			return true
		}
	}
	return false
}

// peerRetryAfterWake is the monitor's twin of Release.peerRetryAfterWake:
// the latest next poll of a change that, when the run would end, is not
// stranded but still honouring the CMS's capped Retry-After — in
// retry_wait until after now for the whole signedhttp.MaxRetryAfter (the
// CMS asked for an hour or more), with a queued poll message for it. Two
// capped answers inside the fault window outlast the recovery (seed
// 55947 of the long run on 2fd28ea: 429 at 1,447 s and 503 at 5,048 s,
// each Retry-After 1 h: next poll at 8,648 s, after the 8,400 s end).
// Run lets such a change run on until then, so the end checks judge what
// the poller did, never excuse it.
func (m *Monitor) peerRetryAfterWake(ctx context.Context) (time.Time, bool) {
	nowMS := core.Millis(time.Now())
	var latest int64
	for _, c := range m.changes {
		rec, err := m.mem.Get(ctx, c.id)
		if err != nil || !holds(m.queue.msgs, c.id) {
			continue
		}
		if rec.State == monitor.StateRetryWait && rec.NextPollMS > nowMS &&
			rec.NextPollMS-rec.UpdatedMS >= signedhttp.MaxRetryAfter.Milliseconds() {
			latest = max(latest, rec.NextPollMS)
		}
	}
	return core.FromMillis(latest), latest != 0
}

// pollerConfig is the poller configuration the run deploys with d: the
// stack's (functions/poller/config.Load of pollerconfig.DefaultStack's
// environment) at the run's time scale and load (d's monitor timing and
// CMS timeout, the drawn concurrency). TestPollerConfigIsTheStacks fails
// when anything else differs from the stack's.
func pollerConfig(d deployment, concurrency int) pollerconfig.Config {
	return pollerconfig.Config{Monitor: d.monitor, CMSTimeout: d.cmsTimeout, Concurrency: concurrency,
		Retention: pollerconfig.DefaultStack().Retention, RefuseV1: true}
}
