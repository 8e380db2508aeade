package sim

import (
	"context"
	"slices"
	"sort"
	"strings"

	"github.com/localeflow/localeflow/core/health"
	"github.com/localeflow/localeflow/core/release"
)

// The blocked record's code, judged by its cause (docs/design.md "Blocked
// releases and the release sweep", "Release error codes"). The simulator
// knows what it injected into each release, so it knows why a release may
// block and with which code:
//   - a validly signed approval it stored for another result of a job
//     (maybeForgeApproval) → approval.result_mismatch (the approval
//     lookup refuses it; the release must never get as far as building a
//     bundle from it);
//   - a stored result it altered after its write, its hash kept
//     (maybeTamperResult) → result.invalid;
//   - a provider that signs human-review receipts with its quality key
//     (rogue), for a job whose result needs a human review →
//     release.receipt.issuer_untrusted;
//   - an evidence request or a prepared delivery failed for good
//     (stuckEvidence, stuckDelivery) → the code of the step that met it;
//     the failed record itself must carry a code an injected fault
//     explains: a peer's or the store's transient failure (scripted 503s,
//     injected call failures, time-outs, lost answers), a lease lost to a
//     crash or a stall, or one of the causes above.
//
// A stored-state code (cms.delivery.bundle_mismatch, result.*,
// evidence.state.*, approval.invalid, …) other than those causes names a
// state nobody corrupted: the product blocked for the wrong reason, or a
// check that should have refused the cause earlier let it through. A seed
// with day-2 operations is not judged here (rotations, attempt-limit
// changes and expiries add causes of their own; day2.go checks those).

// blockedCauses are the codes a blocked record of the release may carry,
// given what the simulator injected into it.
func (r *Release) blockedCauses(id string, snap release.Snapshot) map[string]bool {
	causes := map[string]bool{}
	if r.forgedIn(snap) {
		causes[release.CodeApprovalResultMismatch] = true
	}
	if r.store.tampered[id] {
		// A stored result altered after its write (maybeTamperResult).
		causes[release.CodeStoredResultInvalid] = true
	}
	if r.rogue {
		for _, spec := range r.releases {
			if spec.plan.EventID != id {
				continue
			}
			for _, j := range spec.jobs {
				if j.human {
					causes["release.receipt.issuer_untrusted"] = true
				}
			}
		}
	}
	return causes
}

// forgedIn reports whether the snapshot holds an approval the simulator
// forged for another result.
func (r *Release) forgedIn(snap release.Snapshot) bool {
	for _, a := range snap.Approvals {
		if r.forged[a.ApprovalID] {
			return true
		}
	}
	return false
}

// transientCode reports whether code is what a fault the simulator
// injects ends an evidence or delivery attempt with (a peer's or the
// store's failure, a lease lost to a crash or a stall, the operation guard
// after a stall): when it hits the attempt that used up the record, the
// record fails with it. The approval step reports its codes under
// "release." (docs/design.md "Release error codes": e.g. a stall before a
// receipt's verification leaves release.operation_guard, seed 4007).
func transientCode(code string) bool {
	if c, ok := strings.CutPrefix(code, "release."); ok && transientCode(c) {
		return true
	}
	switch code {
	case release.CodeAttemptsExhausted, "evidence.unavailable", "evidence.timeout", "evidence.cancelled",
		release.CodeDeliveryFailed, "cms.unavailable", "cms.timeout", "cms.cancelled",
		"coordinator.store.read_failed", "coordinator.store.write_failed", "release.store.write_failed",
		"release.store.conflict", "release.approval.signing.failed", "release.approval.conflict",
		"lease_expired", // a reclaimed lease (no prefix: docs/design.md "Evidence and delivery leases")
		"evidence.claim.lost", "evidence.lease_lost", "evidence.lease_expired", "evidence.finish_lost",
		"evidence.mark_approved.lost", "evidence.operation_guard.failed", "operation_guard",
		"cms.delivery.claim_lost", "cms.delivery.lease_lost", "cms.delivery.lease_expired",
		"cms.delivery.finish_lost", "cms.delivery.signing_failed", "cms.delivery.write_failed":
		return true
	}
	for _, p := range []string{"evidence.http_", "cms.http_"} {
		if s, ok := strings.CutPrefix(code, p); ok {
			return s == "429" || (len(s) == 3 && s[0] == '5')
		}
	}
	return false
}

// storedStateCode reports whether code says a stored record is wrong
// (docs/design.md "Blocked releases and the release sweep": the codes of
// stored-state failures, but for the two a peer's failures end in).
func storedStateCode(code string) bool {
	switch code {
	case "evidence.revision.already_consumed", "coordinator.plan.seal_invalid", "coordinator.plan.invalid",
		"queue.plan_mismatch", "approval.invalid", release.CodeApprovalResultMismatch,
		"cms.delivery.invalid", "cms.delivery.bundle_mismatch":
		return true
	}
	for _, p := range []string{"result.", "evidence.state.", "cms.approval."} {
		if strings.HasPrefix(code, p) {
			return true
		}
	}
	return false
}

// blockExplained says whether the injected causes explain a release
// blocked with code (see above), and if not, why.
func (r *Release) blockExplained(id, code string, snap release.Snapshot) (bool, string) {
	causes := r.blockedCauses(id, snap)
	if causes[code] {
		return true, ""
	}
	if storedStateCode(code) {
		return false, "a stored-state code, and the simulator corrupted no such state (causes it injected: " + setString(causes) + ")"
	}
	var failed []string
	for _, e := range snap.Evidence {
		if e.Status == release.StateFailed {
			failed = append(failed, e.LastErrorCode)
		}
	}
	if d := snap.Delivery; d != nil && d.Status == release.StateFailed {
		failed = append(failed, d.LastErrorCode)
	}
	for _, c := range failed {
		if transientCode(c) || causes[c] {
			return true, ""
		}
	}
	return false, "no evidence or delivery record failed with a code an injected fault explains (failed: " + strings.Join(failed, ", ") +
		"; causes injected: " + setString(causes) + ")"
}

// checkBlockedCause judges a blocked record as it is written: an injected
// cause explains its code (see above).
func (s *releaseStore) checkBlockedCause(rec release.Record) {
	b, ok := rec.(*release.BlockedRecord)
	if !ok || s.rel == nil || s.w.day2 != nil {
		return
	}
	snap, err := s.mem.Load(context.Background(), b.EventID)
	if err != nil {
		return
	}
	if ok, why := s.rel.blockExplained(b.EventID, b.Code, snap); !ok {
		s.w.violate("release %s: blocked with %s, which nothing the simulator injected explains: %s", b.EventID, b.Code, why)
	}
}

// checkBlockedRecords, once the world is quiet: a release that holds an
// approval the simulator forged for another result ends blocked (its code
// judged as it was written: approval.result_mismatch, unless another
// injected cause blocked it first), unless its input sits in the DLQ (the
// end checks excuse that when injected faults explain it); and health
// lists every blocked record that no operator acknowledged as an
// attention item of kind release, key blocked, state blocked, with the
// record's code (docs/design.md "Blocked releases and the release
// sweep").
func (r *Release) checkBlockedRecords(ctx context.Context, rep health.Report) {
	if r.w.day2 != nil {
		return
	}
	for _, spec := range r.releases {
		id := spec.plan.EventID
		snap, err := r.mem.Load(ctx, id)
		if err != nil {
			continue
		}
		b := snap.Blocked
		if b == nil && r.forgedIn(snap) && !holds(r.queue.DLQ, id) {
			r.w.violate("release %s holds an approval forged for another result and ended not blocked (want blocked with %s)",
				id, release.CodeApprovalResultMismatch)
		}
		if b == nil || b.AcknowledgedMS != 0 {
			continue
		}
		listed := slices.ContainsFunc(rep.Items, func(it health.Item) bool {
			return it.Kind == health.KindRelease && it.EventID == id && it.Key == release.SKBlocked &&
				it.State == health.StateBlocked && it.ErrorCode == b.Code && it.Attention
		})
		if !listed || !slices.Contains(rep.Reasons, health.ReasonReleaseBlocked) {
			r.w.violate("release %s is blocked with %s but health does not list it so (reasons %v)", id, b.Code, rep.Reasons)
		}
	}
}

func setString(m map[string]bool) string {
	if len(m) == 0 {
		return "none"
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
