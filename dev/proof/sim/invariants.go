package sim

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/signing"
)

// Stored invariants checked at the store ports, each against the
// simulator's own ground truth (docs/simulation.md "Stored invariants at
// the ports, and the faults that reach them"):
//
//   - a monitor record the simulator corrupted (an impossible failure
//     count) is never the basis of a finishing write: whoever reads it
//     must mark it state_invalid, not poll it (a record the monitor could
//     not have written is not the monitor's to continue);
//   - a release lease (evidence, delivery) is finished by its holder only
//     while it lives, by the holder's own clock: a finishing write's
//     updated_ms is before the lease_expires_ms it claimed;
//   - a versioned release write is accepted only over the version it
//     names (optimistic concurrency: no lost update), whatever the store
//     behind the port.

// corruptTrack follows a monitor record the simulator corrupted until
// its next accepted write.
type corruptTrack struct {
	// live: the stored record holds the simulator's impossible value and
	// nothing was written to it since.
	live map[string]bool
	// readers are the invocations that read the record while live.
	readers map[string]map[int]bool
}

func (t *corruptTrack) corrupted(id string) {
	if t.live == nil {
		t.live, t.readers = map[string]bool{}, map[string]map[int]bool{}
	}
	t.live[id] = true
	t.readers[id] = map[int]bool{}
}

// read notes that inv read id (a Get or a Claim that returned it).
func (t *corruptTrack) read(inv *Invocation, id string) {
	if inv == nil || !t.live[id] {
		return
	}
	t.readers[id][inv.ID] = true
}

// written is an accepted write to id by inv; it reports whether inv had
// read the record while it still held the corrupt value (the write then
// continued from a record the monitor could not have written).
func (t *corruptTrack) written(inv *Invocation, id string) bool {
	if !t.live[id] {
		return false
	}
	fromCorrupt := inv != nil && t.readers[id][inv.ID]
	delete(t.live, id)
	delete(t.readers, id)
	return fromCorrupt
}

// checkCorruptBasis is called for an accepted finishing write.
func (s *monitorStore) checkCorruptBasis(inv *Invocation, f monitor.Fence, out monitor.Record) {
	if s.corrupt.written(inv, f.EventID) {
		s.w.violate("%s: invocation #%d read the record while it held an impossible failure count and wrote %s from it "+
			"(a record the monitor could not have written is marked %s, never polled)", f.EventID, inv.ID, out.State, monitor.CodeStateInvalid)
	}
}

// relLease is a release lease the simulator saw stored.
type relLease struct {
	token     string
	expiresMS int64
	inv       int
}

// leaseOf returns the lease of an evidence or delivery record.
func leaseOf(rec release.Record) (release.Lease, bool) {
	switch r := rec.(type) {
	case *release.EvidenceRecord:
		return r.Lease, true
	case *release.DeliveryRecord:
		return r.Lease, true
	}
	return release.Lease{}, false
}

// checkReleaseLease follows the leases of evidence and delivery records
// through their accepted writes: a lease's holder (the invocation whose
// write stored it) finishes it only with updated_ms before its expiry,
// both read from the holder's own clock (docs/design.md "Evidence and
// delivery leases": a finishing write requires the live lease). After the
// end only an expiry (lease_expired), by anyone, or mark_approved of an
// evidence record is written.
func (s *releaseStore) checkReleaseLease(ctx context.Context, rec release.Record) {
	l, ok := leaseOf(rec)
	if !ok {
		return
	}
	inv := invocationOf(ctx)
	pk, sk := rec.Key()
	key := pk + " " + sk
	if s.leases == nil {
		s.leases = map[string]relLease{}
	}
	prev, held := s.leases[key]
	delete(s.leases, key)
	if l.Status == release.StateLeased {
		s.leases[key] = relLease{token: l.LeaseToken, expiresMS: l.LeaseExpiresMS, inv: invID(inv)}
		return
	}
	if !held || inv == nil || prev.inv != inv.ID || l.LastErrorCode == "lease_expired" {
		return
	}
	if _, evidence := rec.(*release.EvidenceRecord); evidence && l.Status == release.StateSucceeded {
		// mark_approved: an evidence record of an approved job is marked
		// succeeded by whoever sees the approval, without its lease
		// (docs/design.md "Evidence and delivery leases"), its holder
		// included.
		return
	}
	if l.UpdatedMS >= prev.expiresMS {
		s.w.violate("release %s: %s finished %s by its lease holder #%d at %d, %d ms after its lease ended (%d)",
			pk, sk, l.Status, inv.ID, l.UpdatedMS, l.UpdatedMS-prev.expiresMS, prev.expiresMS)
	}
}

// storedVersion reads the version stored under rec's key (0: none),
// outside the invocation (no call boundary, no fault); false when the
// read failed.
func (s *releaseStore) storedVersion(rec release.Record) (int64, bool) {
	pk, sk := rec.Key()
	snap, err := s.mem.Load(context.Background(), pk)
	if err != nil {
		return 0, false
	}
	var found int64
	each := func(r release.Record) {
		if k1, k2 := r.Key(); k1 == pk && k2 == sk {
			found = r.RecordVersion()
		}
	}
	snap.Each(each)
	return found, true
}

// checkVersion checks an accepted versioned write against the version
// stored just before it: prev 0 creates, any other prev replaces exactly
// that version (no lost update).
func (s *releaseStore) checkVersion(rec release.Record, prev, before int64, known bool) {
	if !known || before == prev {
		return
	}
	pk, sk := rec.Key()
	s.w.violate("release %s: a write of %s naming version %d was accepted over version %d (a lost update)", pk, sk, prev, before)
}

// sweep fires the coordinator's schedule (the release sweep): it
// schedules a run of every release the wake index says is due, an owed
// approval's evidence lease among them (the run publishes and settles it;
// the end check says none is left owed).
func (r *Release) sweep() {
	f := r.fn
	h := f.instance()
	f.w.invoke(f.name, "schedule sweep", f.timeout, h.clock, func(ctx context.Context) (any, error) {
		return h.handle(ctx, scheduledEvent)
	}, func(any, error, bool, bool) {})
}

// takeoverFaults freezes a poller invocation in its CMS read (a GC pause,
// a frozen execution environment, a request stuck in the network: the
// pause ends at a moment the simulator picks, here the worst one for the
// lease fence) until another worker has claimed the same record, or until
// its Lambda timeout. The finishing write that follows (the answer, or
// the CMS timeout as a failure) is decided after the take-over and meets a
// record leased by someone else: it must be refused (docs/design.md
// "Monitor states and transitions": a finishing write requires the claim
// it was made under). The draws come from a stream of their own, so the seeds'
// other draws (and histories without a freeze) stay as they were.
type takeoverFaults struct {
	rng     *rand.Rand
	waiting map[string][]*frozenWrite
}

type frozenWrite struct {
	token string
	wake  chan struct{}
}

const takeoverStream = 0x74616b656f766572

// takeoverRoom is the least time a frozen read leaves between its lease's
// end and the Lambda timeout (a sweep every minute finds the expired lease,
// a backoff later another worker claims it).
const takeoverRoom = 30 * time.Second

// freezeForTakeover may hold inv's CMS read of id (claimed under token)
// until a take-over or the invocation's deadline.
func (s *monitorStore) freezeForTakeover(inv *Invocation, id, token string, expiresMS int64) {
	t := &s.takeover
	w := s.w
	// Only where the lease can run out (and be taken over) before the
	// Lambda timeout: a longer freeze is a timeout, which the other stalls
	// already give.
	if inv == nil || !w.faultsOn() || w.Faults.Stall == 0 || !time.UnixMilli(expiresMS).Add(takeoverRoom).Before(inv.deadline) {
		return
	}
	if t.rng == nil {
		t.rng = rand.New(rand.NewPCG(w.Seed, w.Seed^takeoverStream))
		t.waiting = map[string][]*frozenWrite{}
	}
	if t.rng.Float64() >= 3*w.Faults.Stall {
		return
	}
	fw := &frozenWrite{token: token, wake: make(chan struct{})}
	t.waiting[id] = append(t.waiting[id], fw)
	w.Stats.Frozen++
	inv.fault()
	w.record(inv, "cms read "+id, "frozen until another worker claims it")
	// The process is frozen: its own timers (the CMS client's timeout)
	// run out with it; the Lambda timeout ends it.
	timeout := time.NewTimer(time.Until(inv.deadline))
	defer timeout.Stop()
	select {
	case <-fw.wake:
		w.record(inv, "cms read "+id, "woken: taken over")
	case <-timeout.C:
		if !inv.crashed.Load() {
			inv.crashed.Store(true)
			inv.cancel()
			w.record(inv, "CRASH", "function timeout while frozen")
		}
	}
}

// claimed wakes the writes frozen on id under another lease.
func (t *takeoverFaults) claimed(id, token string) {
	var keep []*frozenWrite
	for _, fw := range t.waiting[id] {
		if fw.token == token {
			keep = append(keep, fw)
			continue
		}
		close(fw.wake)
	}
	if len(keep) == 0 {
		delete(t.waiting, id)
		return
	}
	t.waiting[id] = keep
}

// forgeStream is the draw stream of the forged approvals.
const forgeStream = 0x666f726765642d61

// maybeForgeApproval may store, when the job's result arrives, an approval
// of this job validly signed with the deployment's approval key but for
// another result of it (as an approval restored from an earlier revision
// of the release, or written by a bug in another writer, would be). The
// coordinator must not use it: an approval is bound to the result it was
// issued for (docs/design.md "Approvals"), so the release blocks where
// health sees it. Drawn from a stream of its own (one job in 15), never in
// a seed with day-2 operations (they rotate the approval key).
func (r *Release) maybeForgeApproval(spec *releaseSpec, locale string, at time.Time) {
	if r.forgeRng == nil {
		r.forgeRng = rand.New(rand.NewPCG(r.w.Seed, r.w.Seed^forgeStream))
		r.forged = map[string]bool{}
	}
	if r.forgeRng.IntN(15) != 0 {
		return
	}
	var job releasetest.JobSpec
	for _, j := range spec.plan.Jobs {
		if j.TargetLocale == locale {
			job = j
		}
	}
	id := spec.plan.EventID
	r.w.at(at, "forge approval "+id+" "+locale, func() {
		if r.w.day2 != nil {
			return
		}
		ctx := context.Background()
		snap, err := r.mem.Load(ctx, id)
		if err != nil || snap.Approvals[job.JobID] != nil {
			r.w.record(nil, "forge approval skipped "+id, "already approved")
			return
		}
		auth, err := release.NewApprovalAuthority(r.peers.Fixture.ApprovalSeed)
		if err != nil {
			panic(err)
		}
		now := time.Now()
		p := contract.ApprovalPayload{
			Schema: contract.ApprovalSchema, EventID: id, SiteID: spec.plan.SiteID, PlanID: spec.plan.PlanID,
			JobID: job.JobID, TargetLocale: job.TargetLocale,
			ResultSHA256:         core.SHA256Hex([]byte("another result of " + job.JobID)),
			EvidenceRequestID:    "forged-request",
			QualityReceiptSHA256: core.SHA256Hex([]byte("another receipt of " + job.JobID)),
			ApprovedAtMS:         core.Millis(now), ExpiresAtMS: core.Millis(now.Add(release.DefaultApprovalTTL)),
		}
		h, err := core.HashCanonical(p)
		if err != nil {
			panic(err)
		}
		p.ApprovalID = "apv-" + h[:40]
		raw, err := core.Canonical(p)
		if err != nil {
			panic(err)
		}
		token, err := auth.Sign(raw)
		if err != nil {
			panic(err)
		}
		sig, err := signing.DecodeB64URL(token[strings.LastIndexByte(token, '.')+1:])
		if err != nil {
			panic(err)
		}
		rec := &release.ApprovalRecord{EventID: id, PlanID: p.PlanID, JobID: p.JobID, TargetLocale: p.TargetLocale,
			ResultSHA256: p.ResultSHA256, RequestID: p.EvidenceRequestID, ApprovalID: p.ApprovalID,
			KeyID: auth.KeyID(), ApprovedMS: p.ApprovedAtMS, ExpiresMS: p.ExpiresAtMS, Version: 1}
		// Stored as the coordinator stores an approval: its signed body
		// and signature.
		rec.SetSigned(raw, sig)
		if err := r.mem.Put(ctx, rec, 0); err != nil {
			r.w.record(nil, "forge approval skipped "+id, core.CodeOf(err))
			return
		}
		r.forged[p.ApprovalID] = true
		r.w.record(nil, "forge approval "+id+" "+locale, "stored "+p.ApprovalID)
	})
}

// checkApprovedResult: the approval delivered with a locale was issued for
// the result delivered (the job's accepted result).
func (r *Release) checkApprovedResult(id string, snap release.Snapshot, l contract.BundleLocale) {
	raw, err := r.openApproval(l.Approval)
	if err != nil {
		return // checkApproval reports it
	}
	var p contract.ApprovalPayload
	if json.Unmarshal(raw, &p) != nil {
		return
	}
	res := snap.Results[l.JobID]
	if res == nil {
		// Deleted with the texts once the release was delivered (its
		// retention, day-2 TTL): checkBundle compared the text.
		return
	}
	if p.ResultSHA256 != res.ResultSHA256 {
		r.w.violate("release %s: delivered %s with an approval issued for result %.12s…, the accepted result is %.12s… (forged by the simulator: %v)",
			id, l.TargetLocale, p.ResultSHA256, res.ResultSHA256, r.forged[p.ApprovalID])
	}
}

// checkBlockedCode checks a blocked record as it is written: a release is
// never blocked with result.missing while a job of its plan has simply
// not completed yet (no job record, or one that is not succeeded). A
// release waits for its inputs (docs/design.md "Release steps": jobs
// without a succeeded job record are skipped); result.missing blocks only
// a job whose record accepted a result that is not stored. (Kills
// rel-ready-without-approvals: counted ready with approvals missing, the
// release tried to prepare its delivery at the plan's arrival, met the
// results not yet received and was blocked for good.)
func (s *releaseStore) checkBlockedCode(rec release.Record) {
	b, ok := rec.(*release.BlockedRecord)
	if !ok || b.Code != "result.missing" {
		return
	}
	snap, err := s.mem.Load(context.Background(), b.EventID)
	if err != nil || snap.Plan == nil {
		return
	}
	for _, job := range snap.Plan.Jobs {
		if j := snap.Jobs[job.JobID]; j == nil || j.Status != release.JobSucceeded {
			s.w.violate("release %s: blocked for good with result.missing while job %s (%s) has not completed: a release waits for its inputs",
				b.EventID, job.JobID, job.TargetLocale)
			return
		}
	}
}

// leaseFreezeStream is the draw stream of freezePastLease.
const leaseFreezeStream = 0x6c65617365667a21

// freezePastLease may freeze a coordinator invocation in its evidence or
// delivery call until 1–50 s after the lease it holds ended (a GC pause, a
// frozen execution environment), when that is still before its Lambda
// timeout: the step then comes back to a lease that is gone and must not
// finish under it (checkReleaseLease). At 3× the seed's stall rate, from a
// stream of its own.
func (s *releaseStore) freezePastLease(inv *Invocation, peer string) {
	w := s.w
	if inv == nil || !w.faultsOn() || w.Faults.Stall == 0 {
		return
	}
	var expires int64
	for _, l := range s.leases {
		if l.inv == inv.ID && l.expiresMS > expires {
			expires = l.expiresMS
		}
	}
	if expires == 0 {
		return
	}
	if s.freezeRng == nil {
		s.freezeRng = rand.New(rand.NewPCG(w.Seed, w.Seed^leaseFreezeStream))
	}
	if s.freezeRng.Float64() >= 3*w.Faults.Stall {
		return
	}
	// The lease's end on the holder's clock → real time.
	end := time.UnixMilli(expires).Add(-time.Duration(inv.clock.offset.Load()))
	wake := end.Add(time.Duration(1000+s.freezeRng.IntN(49_000)) * time.Millisecond)
	if !wake.Before(inv.deadline) || !wake.After(time.Now()) {
		return
	}
	w.Stats.Frozen++
	inv.fault()
	w.record(inv, "http "+peer, "frozen until "+wake.Sub(end).String()+" after the lease ended")
	time.Sleep(time.Until(wake))
}

// noteOwed follows the approvals' owed state (release.ApprovalOwed:
// docs/design.md "Owed events of compact approvals")
// after an accepted write of an approval or evidence record, for the
// announcement bound (announce.go), and checks that no delivery of a
// release is created while one of its approvals is owed so.
func (s *releaseStore) noteOwed(ctx context.Context, rec release.Record) {
	pk, _ := rec.Key()
	var requestID string
	switch r := rec.(type) {
	case *release.ApprovalRecord:
		requestID = r.RequestID
	case *release.EvidenceRecord:
		requestID = r.RequestID
	case *release.DeliveryRecord:
	default:
		return
	}
	// The checker's own read: not the invocation's (on the adapters an
	// invocation's context gates every SDK call with the world's faults,
	// and a failed read here would lose the owed span).
	snap, err := s.mem.LoadState(context.Background(), pk)
	if err != nil || snap.Plan == nil {
		return
	}
	if ev, ok := rec.(*release.EvidenceRecord); ok && ev.Status == release.StateLeased && !ev.Parked {
		// A claim (a leased write that is not block's parking): never of
		// a request whose approval is current (docs/design.md "Owed
		// events of compact approvals": an expired lease under an owed
		// approval is not taken over; an expired approval is re-approved).
		for _, a := range snap.Approvals {
			if a.RequestID == ev.RequestID && a.ApprovedMS <= ev.UpdatedMS && a.ExpiresMS > ev.UpdatedMS {
				s.w.violate("release %s: evidence %s claimed again (attempt %d) while the approval of %s is current",
					pk, ev.RequestID, ev.Attempts, a.TargetLocale)
			}
		}
	}
	for _, a := range snap.Approvals {
		owed := release.ApprovalOwed(a, snap.Evidence[a.RequestID])
		if d, ok := rec.(*release.DeliveryRecord); ok {
			if owed && d.Version == 1 {
				s.w.violate("release %s: delivery %s prepared while the approval of %s is owed (its evidence record is %s; "+
					"docs/design.md \"Owed events of compact approvals\")", pk, d.DeliveryID, a.TargetLocale, snap.Evidence[a.RequestID].Status)
			}
			continue
		}
		if a.RequestID == requestID {
			s.announce.noteCompact(pk, a.ApprovalID, owed)
		}
	}
}

// noteFailedSettle counts a failed settling write of an approval
// (its evidence record written succeeded) for the announcement bound.
func (s *releaseStore) noteFailedSettle(ctx context.Context, rec release.Record) {
	ev, ok := rec.(*release.EvidenceRecord)
	if !ok || ev.Status != release.StateSucceeded {
		return
	}
	snap, err := s.mem.LoadState(context.Background(), ev.EventID) // the checker's read, ungated (noteOwed)
	if err != nil || snap.Plan == nil {
		return
	}
	for _, a := range snap.Approvals {
		if a.RequestID == ev.RequestID {
			s.announce.failedClears[a.ApprovalID]++
		}
	}
}
