// Package mutants is the list of mutants `make mutants` applies to the
// product code, one at a time, to measure what the deterministic
// simulation (dev/proof/sim) catches: each is a small, realistic
// regression (a weakened lease fence, an outbox never cleared, a failure
// cap off by one, Retry-After ignored, a wrong field in an output event, a
// dropped condition expression, a wrong shard, …), not syntax noise.
//
// A mutant replaces the one occurrence of From in File (relative to the
// repository root) by To. The runner (dev/cmd/mutants) never edits the
// checkout: it builds the simulation with `go test -c -overlay`, the
// mutated file in a temporary directory. TestEveryMutantApplies (in make
// test) checks that every From still occurs exactly once, so the list
// cannot rot silently when the code changes: re-anchor the mutant then.
package mutants

import "strings"

// Mutant is one regression.
type Mutant struct {
	ID   string
	File string
	From string
	To   string
	// What the regression does, in a line.
	What string
	// Equivalent, when set, says why the mutant cannot change any history
	// the simulation (or production) can produce; such a mutant is listed,
	// not run, and excluded from the score.
	Equivalent string
	// Set says when the mutant was written relative to the checks that
	// judge it: "" for the mutants written with or after the checks they
	// meet (sessions 1–8), SetBeforeChecks for the issue-36 set, written
	// from the surviving classes before any check for them was
	// added (their score is reported apart, so the list cannot be tuned to
	// the checks).
	Set string
}

// SetBeforeChecks marks the mutants written before the checks that now
// judge them (issue 36).
const SetBeforeChecks = "before-checks"

// Block is the block of seeds a mutant is judged on: "adapters" for the
// DynamoDB adapters (only on the simulated path in TestSimAdapterSeeds),
// "default" for everything else.
func (m Mutant) Block() string {
	for _, p := range []string{"adapters/monitordb/", "adapters/releasedb/", "adapters/batchget/"} {
		if strings.HasPrefix(m.File, p) {
			return "adapters"
		}
	}
	return "default"
}

// Area is the part of the product the mutant is in (the first two path
// elements of its file).
func (m Mutant) Area() string {
	parts := strings.SplitN(m.File, "/", 3)
	if len(parts) < 3 {
		return parts[0]
	}
	return parts[0] + "/" + parts[1]
}

// List is every mutant, in the order of the report.
var List = []Mutant{
	// core/monitor
	{ID: "mon-fence-expiry-grace", File: "core/monitor/store.go",
		From: "case !f.Expired && current.LeaseExpiresMS <= f.NowMS:",
		To:   "case !f.Expired && current.LeaseExpiresMS+5_000 <= f.NowMS:",
		What: "the lease fence accepts a finishing write up to 5 s after the lease ended"},
	{ID: "mon-fence-no-token", File: "core/monitor/store.go",
		From: "return r.State == StateLeased && r.LeaseToken == f.Token && r.LeaseOwner == f.Owner &&",
		To:   "return r.State == StateLeased && r.LeaseOwner == f.Owner &&",
		What: "the fence compares the owner but not the lease token (one worker id, two claims)",
		Equivalent: "the fence is the whole claim: every claim increments poll_attempts and sets a new " +
			"lease_expires_ms, which SameClaim also compares, so no two claims of one record agree on everything but the token"},
	{ID: "mon-fence-state-only", File: "core/monitor/store.go",
		From: "case !SameClaim(current, f):",
		To:   "case current.State != StateLeased:",
		What: "the fence checks only state = leased: a writer whose lease was taken over still writes"},
	{ID: "mon-reclaim-live-lease", File: "core/monitor/store.go",
		From: "case f.Expired && current.LeaseExpiresMS > f.NowMS:",
		To:   "case f.Expired && current.LeaseExpiresMS > f.NowMS+60_000:",
		What: "a reclaim takes a lease up to 60 s before it ends",
		Equivalent: "the only reclaimer (Service.claim) reclaims only when lease_expires_ms <= now by the same " +
			"now it puts in the fence, and a record changed since that read fails SameClaim first: this store check is defence in depth"},
	{ID: "mon-reclaim-early", File: "core/monitor/service.go",
		From: "if rec.State == StateLeased && rec.LeaseExpiresMS <= now && rec.UpdatedMS <= now {",
		To:   "if rec.State == StateLeased && rec.LeaseExpiresMS <= now+60_000 && rec.UpdatedMS <= now {",
		What: "a poller reclaims a lease that still has up to 60 s to run",
		Equivalent: "the store's fence refuses the early reclaim (claim_lost) and the poller then reports the live " +
			"lease exactly as without the mutant: one refused write, no other difference in any history"},
	{ID: "mon-claimable-no-retry-wait", File: "core/monitor/state.go",
		From: "return s == StatePending || s == StateWatching || s == StateRetryWait",
		To:   "return s == StatePending || s == StateWatching",
		What: "a change in retry_wait is never claimed again"},
	{ID: "mon-failure-cap-off-by-one", File: "core/monitor/service.go",
		From: "if !retryable || failures >= c.MaxConsecutiveFailures {",
		To:   "if !retryable || failures > c.MaxConsecutiveFailures {",
		What: "the consecutive-failure cap is off by one (one poll too many)"},
	{ID: "mon-reclaim-cap-off-by-one", File: "core/monitor/service.go",
		From: "if failures >= rec.MaxConsecutiveFailures {",
		To:   "if failures > rec.MaxConsecutiveFailures {",
		What: "a reclaim counts the failure cap off by one"},
	{ID: "mon-retry-after-ignored", File: "core/monitor/poll.go",
		From: "return s.failure(wctx, c, ce.Code, true, core.RetryAfterOf(readErr))",
		To:   "return s.failure(wctx, c, ce.Code, true, 0)",
		What: "the CMS's Retry-After is ignored: the next poll follows the backoff alone"},
	{ID: "mon-no-backoff", File: "core/monitor/service.go",
		From: "NextPollMS: now + max(s.cfg.RetryDelay",
		To:   "NextPollMS: now + max(0*s.cfg.RetryDelay",
		What: "a failed poll is retried at once (no exponential backoff)"},
	{ID: "mon-response-invalid-retried", File: "core/monitor/poll.go",
		From: "if ce.Retryable && ce.Code != CodeResponseInvalid {",
		To:   "if ce.Retryable {",
		What: "a contract violation marked retryable by the client is retried",
		Equivalent: "the only LifecycleReader (adapters/cms) never marks lifecycle_monitor.response_invalid retryable " +
			"(core.Fail, Wrap(…, false, …)): the guard is for other clients, and the mutated branch is never taken"},
	{ID: "mon-outcome-id-constant", File: "core/monitor/outbox.go",
		From: "OutcomeID: OutcomeID(eventID, state, finishedMS),",
		To:   "OutcomeID: OutcomeID(eventID, state, 0),",
		What: "the outcome id ignores finished_ms (a wrong field in change.terminal)"},
	{ID: "mon-hint-in-retry-wait", File: "core/monitor/hint.go",
		From: "return r.SchemaVersion == SchemaVersion && r.SiteID == h.SiteID && r.State == StateWatching &&",
		To:   "return r.SchemaVersion == SchemaVersion && r.SiteID == h.SiteID && r.State.Claimable() &&",
		What: "a change hint shortens a retry_wait backoff"},
	{ID: "mon-hint-ignores-retry-after", File: "core/monitor/hint.go",
		From: "r.HintMS <= h.NowMS-h.MinGapMS) &&\n\t\tr.WaitUntilMS <= h.NowMS",
		To:   "r.HintMS <= h.NowMS-h.MinGapMS)",
		What: "a hint moves the next poll while a Retry-After the CMS gave a hinted poll still runs (issue 39 finding 1)"},
	{ID: "mon-regular-poll-from-timeline", File: "core/monitor/service.go",
		From: "if c.RegularPollMS > 0 {",
		To:   "if c.RegularPollMS > 0 && false {",
		What: "the regular poll time is read back from the 5-entry timeline: the sixth early hinted failure counts (issue 39 finding 2)"},
	{ID: "mon-negative-failures-valid", File: "core/monitor/validate.go",
		From: "r.PollAttempts < 0 || r.ConsecutiveFailures < 0 ||",
		To:   "r.PollAttempts < 0 ||",
		What: "a record with an impossible (negative) failure count passes validation"},
	{ID: "mon-poll-interval-ignored", File: "core/monitor/service.go",
		From: "State: StateWatching, NextPollMS: now + s.cfg.PollInterval.Milliseconds(),",
		To:   "State: StateWatching, NextPollMS: now + s.cfg.PollInterval.Milliseconds()/30,",
		What: "a watching change is polled again after 1 s instead of the poll interval"},

	// core/release
	{ID: "release-compact-token-reencoded", File: "core/release/approval_layout.go",
		From: "\ta.Token = BuildToken([]byte(a.Body), a.Sig)\n",
		To:   "\treencoded, _ := json.Marshal(p)\n\ta.Token = BuildToken(reencoded, a.Sig)\n",
		What: "a compact approval's token is rebuilt from the payload encoded again (json.Marshal of the parsed body), not from the signed bytes: it no longer verifies"},
	{ID: "rel-lease-holds-grace", File: "core/release/lease.go",
		From: "if l.LeaseExpiresMS <= nowMS {\n\t\treturn core.Fail(expiredCode)",
		To:   "if l.LeaseExpiresMS+60_000 <= nowMS {\n\t\treturn core.Fail(expiredCode)",
		What: "a step finishes under a lease that ended up to 60 s ago"},
	{ID: "rel-expired-cap-off-by-one", File: "core/release/lease.go",
		From: "\tn.Status = StateRetryWait\n\tif l.Attempts >= l.MaxAttempts {",
		To:   "\tn.Status = StateRetryWait\n\tif l.Attempts > l.MaxAttempts {",
		What: "an expired lease on the last attempt is retried instead of failed"},
	{ID: "rel-failed-cap-off-by-one", File: "core/release/lease.go",
		From: "if !retryable || l.Attempts >= l.MaxAttempts {",
		To:   "if !retryable || l.Attempts > l.MaxAttempts {",
		What: "the attempt cap of evidence and delivery is off by one"},
	{ID: "rel-retry-after-ignored", File: "core/release/lease.go",
		From: "n.NextAttemptMS = nowMS + max(backoff(l.Attempts), min(max(retryAfter, 0), MaxRetryAfter).Milliseconds())",
		To:   "n.NextAttemptMS = nowMS + backoff(l.Attempts)",
		What: "Retry-After of the evidence provider and the CMS delivery endpoint is ignored"},
	{ID: "rel-second-result-accepted", File: "core/release/ingest.go",
		From: "if old.Status == JobSucceeded {\n\t\t\t\treturn false, nil, core.Fail(CodeJobConflict)",
		To:   "if old.Status == JobFailed {\n\t\t\t\treturn false, nil, core.Fail(CodeJobConflict)",
		What: "a second, different result replaces an accepted one"},
	{ID: "rel-claim-mark-dropped-without-evidence", File: "core/release/ingest.go",
		From: "if named != nil && named.claim != nil {\n\t\t\t\t\trec.AwaitingClaim = false",
		To:   "if named != nil {\n\t\t\t\t\trec.AwaitingClaim = false",
		What: "a tallied job input whose evidence request was not created at ingest stores its succeeded job without awaiting_claim (no wake entry)"},
	{ID: "rel-result-written-over", File: "core/release/ingest.go",
		From: "if cur.ResultSHA256 != res.ResultSHA256 || cur.PlanID != res.PlanID {",
		To:   "if false {",
		What: "a result not yet accepted by its job record is replaced by a different one (the job record can name a result no longer stored)"},
	{ID: "rel-owed-never-settled", File: "core/release/approval.go",
		From: "\tnext.Lease = ev.succeeded(nowMS)\n",
		To:   "\tnext.Lease = ev.Lease\n",
		What: "an approval's owed release.approved is never settled (its evidence stays leased: re-published by every run, the delivery held)"},
	{ID: "rel-approval-result-unchecked", File: "core/release/approval.go",
		From: "if sha, ok := acceptedResultSHA(snap, job.JobID); !ok || sha != p.ResultSHA256 {",
		To:   "if _, ok := acceptedResultSHA(snap, job.JobID); !ok {",
		What: "an approval is used for a result it was not issued for"},
	{ID: "rel-ready-without-approvals", File: "core/release/approval.go",
		From: "\t\t\t\tout.Ready = false\n\t\t\t\tcontinue",
		To:   "\t\t\t\tcontinue",
		What: "a release counts as ready with approvals missing"},
	{ID: "rel-retryable-send-is-success", File: "core/release/coordinator.go",
		From: "if sendErr == nil {\n\t\tnext.Lease = d.succeeded(finishedMS)",
		To:   "if sendErr == nil || core.IsRetryable(sendErr) {\n\t\tnext.Lease = d.succeeded(finishedMS)",
		What: "a delivery answered 503 is recorded as delivered"},
	{ID: "rel-failed-block-final", File: "core/release/block.go",
		From: "\t\treturn errors.Join(err, stepErr)",
		To:   "\t\treturn stepErr",
		What: "a block whose write failed is left to the sweep, which never meets the release again (seed 62877 on e3ebf34, its fix reverted)"},
	{ID: "rel-compact-walk-marks-owed", File: "core/release/coordinator.go",
		From: "\t\tif owedByEvidence(snap, approval) {",
		To:   "\t\tif false && owedByEvidence(snap, approval) {",
		What: "the walk marks an owed compact approval's evidence succeeded without reporting it (its release.approved is lost)"},
	{ID: "rel-compact-delivery-while-owed", File: "core/release/coordinator.go",
		From: "\tif !ready.Ready || held {",
		To:   "\tif !ready.Ready || (held && false) {",
		What: "the delivery of a compact release is prepared while one of its approvals is owed (delivery.ready before release.approved; the owed lease wakes a delivered release)"},
	{ID: "rel-acked-evidence-not-ended", File: "core/release/coordinator.go",
		From: "\tif c.acknowledgedEvidenceFailure(snap, plan) {",
		To:   "\tif false && c.acknowledgedEvidenceFailure(snap, plan) {",
		What: "an acknowledged failed evidence request does not end its release: a late input blocks it again and pages (its fix reverted)"},

	{ID: "rel-ended-not-parked", File: "core/release/coordinator.go",
		From: "\t\tif err := c.park(ctx, &snap); err != nil {\n\t\t\treturn nil, nil, nil, err\n\t\t}\n",
		To:   "",
		What: "a run of an ended release leaves what a late input put in the wake index there (issue 39 finding 11)"},
	{ID: "rel-blocked-walked", File: "core/release/coordinator.go",
		From: "\tif err := c.stillBlocked(ctx, snap, now); err != nil {\n\t\treturn Outcome{}, err\n\t}\n",
		To:   "",
		What: "the walk of a blocked release that still holds its failure selects and approves a late locale (issue 39 finding 12)"},
	{ID: "rel-settle-silent-success", File: "core/release/approval.go",
		From: "\t\treturn core.Fail(CodeEvidenceStateInvalid)\n\t}\n\tnowMS := core.Millis(c.now())",
		To:   "\t\treturn nil\n\t}\n\tnowMS := core.Millis(c.now())",
		What: "a settle that cannot write (the owed approval's evidence fails its checks) reports success (issue 39 finding 13)"},
	{ID: "rel-block-keeps-unpublishable-owed", File: "core/release/block.go",
		From: "owed[a.RequestID] = owed[a.RequestID] || c.publishableOwed(snap, a)",
		To:   "owed[a.RequestID] = owed[a.RequestID] || owedByEvidence(snap, a)",
		What: "blocking keeps the evidence of an owed approval that can never be published in the wake index (issue 39 finding 14)"},

	// functions/poller/handler
	{ID: "poller-terminal-fields-swapped", File: "functions/poller/handler/handler.go",
		From: "State: string(a.State), RemoteStatus: optional(a.RemoteStatus), ErrorCode: optional(a.ErrorCode),",
		To:   "State: string(a.State), RemoteStatus: optional(a.ErrorCode), ErrorCode: optional(a.RemoteStatus),",
		What: "change.terminal carries remote_status and error_code swapped"},
	{ID: "poller-outbox-never-cleared", File: "functions/poller/handler/handler.go",
		From: "if err := h.mon.Announced(ctx, a); err != nil {",
		To:   "if err := error(nil); err != nil {",
		What: "a published outcome is never cleared from the outbox"},
	{ID: "poller-no-follow-up", File: "functions/poller/handler/handler.go",
		From: "\tcase out.State.Claimable():\n\t\tif err := h.scheduleAt(ctx, KindPoll, out.EventID, out.NextPoll); err != nil {",
		To:   "\tcase out.State == monitor.StatePending:\n\t\tif err := h.scheduleAt(ctx, KindPoll, out.EventID, out.NextPoll); err != nil {",
		What: "no follow-up poll message after a poll (only the sweep finds the change again)"},
	{ID: "poller-owed-not-announced", File: "functions/poller/handler/handler.go",
		From: "\t\treturn h.announce(ctx, *out.Owed)",
		To:   "\t\treturn nil",
		What: "a poll that finished a change leaves its outcome to the sweep (never announced inline)"},
	{ID: "mon-outbox-grace-ignored", File: "core/monitor/outbox.go",
		From: "ids, err := s.store.Owed(ctx, now-s.cfg.OutboxGrace.Milliseconds(), limit)",
		To:   "ids, err := s.store.Owed(ctx, now, limit)",
		What: "the sweep re-publishes outcomes still being announced by their poll (no outbox grace)"},
	{ID: "poller-batch-failures-dropped", File: "functions/poller/handler/sqs.go",
		From: "resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: batch.Records[i].MessageId})",
		To:   "_ = i",
		What: "failed messages of a batch are acknowledged (never redelivered)"},

	// functions/coordinator/handler
	{ID: "coord-ready-as-delivered", File: "core/release/driver.go",
		From: "\tcase OutcomeDeliveryReady:\n\t\tdetailType = contract.DetailDeliveryReady",
		To:   "\tcase OutcomeDeliveryReady:\n\t\tdetailType = contract.DetailDeliveryDelivered",
		What: "delivery.ready is published as delivery.delivered"},
	{ID: "coord-approved-not-published", File: "core/release/driver.go",
		From: "if err := p.Bus.Publish(ctx, contract.DetailReleaseApproved, d); err != nil {",
		To:   "if err := error(nil); err != nil {",
		What: "release.approved is settled without being published"},
	{ID: "coord-compact-settle-before-publish", File: "core/release/driver.go",
		From: "\ta := ae.Event\n\tif err := d.p.Publisher.PublishApproved(ctx, a); err != nil {\n\t\treturn false, err\n\t}\n\tif err := d.c.SettleApproval(ctx, a.EventID, a.JobID, a.ApprovalID, ae.Tally); err != nil {",
		To:   "\ta := ae.Event\n\t_ = d.c.SettleApproval(ctx, a.EventID, a.JobID, a.ApprovalID, ae.Tally)\n\tif err := d.p.Publisher.PublishApproved(ctx, a); err != nil {\n\t\treturn false, err\n\t}\n\tif err := error(nil); err != nil {",
		What: "an approval is settled (a compact one's evidence finished) before its release.approved is published: a failed publish loses the event"},
	{ID: "coord-republish-every-approval", File: "core/release/driver.go",
		From: "if !ApprovalOwed(rec, snap.Evidence[rec.RequestID]) || !d.approvalBinds(rec, plan, job) {",
		To:   "if !d.approvalBinds(rec, plan, job) {",
		What: "a returning message re-publishes every stored approval, owed or not (issue 25 finding 6, its fix reverted: the announcement storm)"},
	{ID: "coord-issuer-names-unique", File: "functions/coordinator/config/config.go",
		From: "first, seen := out[issuer]\n\t\tif !seen {",
		To:   "first, seen := out[issuer]\n\t\tif seen {\n\t\t\treturn nil, nil, fmt.Errorf(\"%s: issuer %q repeated\", name, issuer)\n\t\t}\n\t\tif !seen {",
		What: "an issuer named twice in its kind's variable is refused (issue 25 finding 8, its fix reverted: no key rotation under one issuer name)"},
	{ID: "secretkey-reload-failure-silent", File: "adapters/secretkey/cache.go",
		From: "c.expiry = now.Add(retryAfterFailure)\n\t\tc.alarm(ctx, err)\n",
		To:   "c.expiry = now.Add(retryAfterFailure)\n",
		What: "a key set re-read that fails keeps the old set silently: no log, no metric (issue 25 finding 7, its fix reverted)"},
	{ID: "plan-seal-throttled-reread-final", File: "core/release/plan_seal.go",
		From: "met := c.unmatched.met(r.Seal, c.clock.Now())",
		To:   "met := time.Time{}",
		What: "a seal under none of the keys is final whatever the set's read time: after a re-read the 10 s limit refused (or that failed) (key-reload seed 100, its fix reverted: a plan another environment resealed under NEW during rotation step 2 blocks the release for good)"},

	// adapters (default block: on the simulated path with the memory stores)
	{ID: "eventbus-failed-entry-is-success", File: "adapters/eventbus/eventbus.go",
		From: "if out.FailedEntryCount > 0 || (len(out.Entries) == 1 && out.Entries[0].ErrorCode != nil) {",
		To:   "if out.FailedEntryCount > 1 {",
		What: "a PutEvents failed entry is taken as success"},
	{ID: "delayqueue-delay-floor", File: "adapters/delayqueue/delayqueue.go",
		From: "return int32((d + time.Second - 1) / time.Second)",
		To:   "return int32(d / time.Second / 2)",
		What: "DelaySeconds is half the wait: messages arrive early"},
	{ID: "cms-429-not-retryable", File: "adapters/cms/lifecycle.go",
		From: "retryable := status == http.StatusTooManyRequests || (status >= 500 && status <= 599)",
		To:   "retryable := status >= 500 && status <= 599",
		What: "a CMS 429 fails the change instead of retrying"},
	{ID: "signing-rotation-slip", File: "signing/event.go",
		From: "\tfor _, k := range keys {\n\t\tif ok(k) {",
		To:   "\tfor _, k := range keys[1:] {\n\t\tif ok(k) {",
		What: "a key-rotation slip: events are verified against the previous keys only"},

	// adapters on the adapters block
	{ID: "monitordb-fence-no-expiry", File: "adapters/monitordb/store.go",
		From: "expiry := expression.Name(attrLeaseExpiresMS).GreaterThan(now)",
		To:   "expiry := expression.Name(attrLeaseExpiresMS).GreaterThan(expression.Value(0))",
		What: "the finishing write's condition drops the lease expiry"},
	{ID: "monitordb-create-condition-dropped", File: "adapters/monitordb/store.go",
		From: "WithCondition(expression.AttributeNotExists(expression.Name(attrEventID))))",
		To:   "WithCondition(expression.AttributeNotExists(expression.Name(attrHintMS))))",
		What: "Create's attribute_not_exists tests the wrong attribute: a duplicate dispatch overwrites the record"},
	{ID: "monitordb-claim-ignores-next-poll", File: "adapters/monitordb/store.go",
		From: "\t\texpression.Name(attrNextPollMS).LessThanEqual(now),\n\t\texpression.Name(attrUpdatedMS).LessThanEqual(now),\n\t)\n\tupdate := expression.Set(expression.Name(attrState), expression.Value(string(monitor.StateLeased))).",
		To:   "\t\texpression.Name(attrUpdatedMS).LessThanEqual(now),\n\t)\n\tupdate := expression.Set(expression.Name(attrState), expression.Value(string(monitor.StateLeased))).",
		What: "the claim's condition drops next_poll_ms <= now: a change is polled before it is due"},
	{ID: "monitordb-hint-ignores-retry-after", File: "adapters/monitordb/store.go",
		From: "\t\texpression.Or(\n\t\t\texpression.AttributeNotExists(expression.Name(attrWaitUntilMS)),\n\t\t\texpression.Name(attrWaitUntilMS).LessThanEqual(now)),\n",
		To:   "",
		What: "the hint's condition expression drops wait_until_ms: a hint polls before a Retry-After ended (issue 39 finding 1)"},
	{ID: "monitordb-hint-wrong-shard", File: "adapters/monitordb/store.go",
		From: "Set(expression.Name(attrWakeShard), expression.Value(Shard(h.EventID))).",
		To:   "Set(expression.Name(attrWakeShard), expression.Value(0)).",
		What: "a hint writes the wake key into the wrong shard"},
	{ID: "monitordb-cursor-not-advanced", File: "adapters/monitordb/store.go",
		From: "next = next.Advance(shard, last, done)",
		To:   "_ = last\n\t\tnext = next.Advance(shard, nil, done)",
		What: "the due cursor is not advanced past the entries taken"},
	{ID: "monitordb-terminal-not-owed", File: "adapters/monitordb/store.go",
		From: "if u.Owes() {",
		To:   "if u.State == monitor.StateFailed {",
		What: "a terminal outcome gets no outbox key (only failed ones are owed)"},
	{ID: "releasedb-version-condition-dropped", File: "adapters/releasedb/store.go",
		From: "cond = expression.Name(attrVersion).Equal(expression.Value(prev))",
		To:   "cond = expression.AttributeExists(expression.Name(topology.AttrPK))",
		What: "a versioned write drops its version condition (last writer wins)"},
	{ID: "releasedb-sweep-skips-deliveries", File: "adapters/releasedb/due.go",
		From: "Delivery: k.SK == release.SKDelivery,",
		To:   "Delivery: false,",
		What: "the release sweep re-enqueues a due delivery as a run step",
		Equivalent: "a run step of a release that holds a delivery does nothing but hand it on: RunNextRelease " +
			"finds it first (existingDelivery: delivered → the delivered outcome; failed → delivery_failed, blocked " +
			"as Deliver blocks it; otherwise delivery_ready, Changed false, so nothing is published) and the handler's " +
			"next sends the deliver step at the delivery's wake time, which then runs exactly as the sweep's deliver " +
			"step would. One more queue hop: no write, event, outcome or documented bound differs"},
	{ID: "releasedb-schema-unchecked", File: "adapters/releasedb/store.go",
		From: "if !ok || n.Value != strconv.Itoa(release.SchemaVersion) {",
		To:   "if !ok && n != nil {",
		What: "an item of another schema_version, or without one, is read as if it were of format 1"},
	{ID: "monitordb-shard-count", File: "adapters/monitordb/store.go",
		From: "func Shard(eventID string) int { return core.Shard(topology.WakeShards, eventID) }",
		To:   "func Shard(eventID string) int { return core.Shard(topology.WakeShards-1, eventID) }",
		What: "records are spread over 15 of the 16 shards",
		Equivalent: "every writer and reader derives the shard from this one function and every query reads " +
			"all 16 shards: the layout changes, no history does"},
	// Issue 24's other findings (a)–(f), each its fix reverted: found by
	// the simulation (issue 24; its findings are in CHANGELOG.md).
	{ID: "poller-hint-refused-not-rescheduled", File: "functions/poller/handler/hint.go",
		From: "\t\tif leaseLost(err) {\n\t\t\t// Not an input error: acknowledged (never quarantined) once\n\t\t\t// the next poll is scheduled, as on the SQS and sweep paths.\n\t\t\treturn h.afterLostLease(ctx, d.EventID, err)\n\t\t}\n",
		To:   "",
		What: "a hinted poll whose finishing write is refused is quarantined with nothing scheduled (only the sweep rescues the change)"},
	{ID: "poller-hint-waits-for-lease", File: "functions/poller/handler/hint.go",
		From: "\tres, err := h.mon.Hint(ctx, d)\n\tif err != nil {\n\t\treturn fmt.Errorf(\"hint: %w\", err)\n\t}\n",
		To: "\tres, err := h.mon.Hint(ctx, d)\n\tif err != nil {\n\t\treturn fmt.Errorf(\"hint: %w\", err)\n\t}\n" +
			"\tdeadline := h.clock.Now().Add(h.reader.Timeout())\n" +
			"\tfor res.State == monitor.StateLeased && h.clock.Now().Before(deadline) && h.budget(ctx) {\n" +
			"\t\twait, cancel := context.WithTimeout(ctx, DefaultMargin/25)\n" +
			"\t\t<-wait.Done()\n\t\tcancel()\n" +
			"\t\tif ctx.Err() != nil {\n\t\t\treturn core.Retry(CodeDeadline)\n\t\t}\n" +
			"\t\tif res, err = h.mon.Hint(ctx, d); err != nil {\n\t\t\treturn fmt.Errorf(\"hint: %w\", err)\n\t\t}\n\t}\n",
		What: "a hint for a leased change is tried again every 200 ms for the whole CMS timeout (many writes per hint)"},
	{ID: "monitordb-snapshot-trailing-bytes", File: "adapters/monitordb/snapshot.go",
		From: "len(out) > lifecycle.MaxSnapshotBytes || src.Len() != 0 {",
		To:   "len(out) > lifecycle.MaxSnapshotBytes {",
		What: "bytes after the DEFLATE snapshot are ignored: a tampered record passes the integrity check"},
	{ID: "signedhttp-huge-retry-after-ignored", File: "adapters/signedhttp/signedhttp.go",
		From: "secs, err := strconv.ParseUint(v, 10, 64)\n\t\tif err != nil || secs >= uint64(MaxRetryAfter/time.Second) {",
		To:   "secs, err := strconv.ParseUint(v, 10, 32)\n\t\tif err != nil {\n\t\t\treturn 0\n\t\t}\n\t\tif secs >= uint64(MaxRetryAfter/time.Second) {",
		What: "a Retry-After of 2^32 s or more is ignored instead of capped at 1 h (CMS, evidence and delivery clients)"},
	{ID: "mon-hint-raced-as-clock-regressed", File: "core/monitor/hint.go",
		From: "\t\treturn CodeHintRaced\n",
		To:   "\t\treturn CodeClockRegressed\n",
		What: "a hint that lost the race to another poller's write is logged clock_regressed"},
	{ID: "mon-hinted-early-failure-counted", File: "core/monitor/service.go",
		From: "if regular, ok := hintedEarly(c, now, s.cfg.PollInterval); ok && retryable {",
		To:   "if regular, ok := hintedEarly(c, now, s.cfg.PollInterval); ok && retryable && c.HintMS < 0 {",
		What: "a hinted poll that fails during a CMS outage before the regular poll time spends the failure budget"},
	// Issue 36: the classes an independent mutant set found surviving,
	// written by the project before the checks that judge them (Set:
	// SetBeforeChecks; make mutants reports their score apart).
	{ID: "rel-tally-retry-stale", File: "core/release/tally.go", Set: SetBeforeChecks,
		From: "\t\tsnap.Tally = fresh.Tally\n",
		To:   "\t\t_ = fresh\n",
		What: "a tally write that lost its race is retried from the stale snapshot (every retry conflicts again)"},
	{ID: "rel-reseal-oldest-key", File: "core/release/plan_seal.go", Set: SetBeforeChecks,
		From: "if next.Seal, err = planSeal(keys[0], &next); err != nil {",
		To:   "if next.Seal, err = planSeal(keys[len(keys)-1], &next); err != nil {",
		What: "a plan is resealed under the oldest key of the set, not the current one"},
	{ID: "rel-seal-final-without-reread", File: "core/release/plan_seal.go", Set: SetBeforeChecks,
		From: "if err != nil || !readAt.After(met) {",
		To:   "if err != nil || readAt.Before(met.Add(-87600 * time.Hour)) {",
		What: "a plan seal under none of the keys is final although the key set was not re-read since the seal was met"},
	{ID: "secretkey-read-at-attempt", File: "adapters/secretkey/cache.go", Set: SetBeforeChecks,
		From: "return c.reload(ctx, now), c.good, nil",
		To:   "return c.reload(ctx, now), now, nil",
		What: "the key cache's read-at is the time of the re-read attempt, even when it failed"},
	{ID: "rel-conflict-as-duplicate", File: "core/release/ingest.go", Set: SetBeforeChecks,
		From: "\t\t\tif old.Status == JobSucceeded {\n\t\t\t\treturn false, nil, core.Fail(CodeJobConflict)",
		To:   "\t\t\tif old.Status == JobSucceeded {\n\t\t\t\treturn false, nil, nil",
		What: "a second, different completion of a succeeded job is taken as a harmless duplicate (not refused, not reported)"},
	{ID: "rel-result-hash-unchecked", File: "core/release/coordinator.go", Set: SetBeforeChecks,
		From: "if err != nil || h != rec.ResultSHA256 {",
		To:   "if err != nil {",
		What: "a stored result's text is not cross-checked against the hash its job record accepted"},
	{ID: "rel-retention-tally-kept", File: "core/release/retention.go", Set: SetBeforeChecks,
		From: "\tcase *TallyRecord:\n\t\tlastMS = r.UpdatedMS\n",
		To:   "\tcase *TallyRecord:\n\t\treturn 0, false\n",
		What: "an ended release's tally record never expires"},
	{ID: "releasedb-expire-sources-only", File: "adapters/releasedb/expire.go", Set: SetBeforeChecks,
		From: "for _, prefix := range []string{release.SKSourcePrefix, release.SKResultPrefix} {",
		To:   "for _, prefix := range []string{release.SKSourcePrefix} {",
		What: "an ended release's result texts are never given their expiry (only the sources)"},
	{ID: "rel-owed-not-after-failed-evidence", File: "core/release/approval.go", Set: SetBeforeChecks,
		From: "ev.JobID == a.JobID && ev.Status != StateSucceeded",
		To:   "ev.JobID == a.JobID && ev.Status != StateSucceeded && ev.Status != StateFailed",
		What: "an approval whose evidence record is failed loses its owed-event marker"},
	{ID: "mon-sweep-grace-seconds", File: "core/monitor/service.go", Set: SetBeforeChecks,
		From: "now-s.cfg.SweepGrace.Milliseconds()",
		To:   "now-int64(s.cfg.SweepGrace/time.Second)",
		What: "the sweep's grace is taken in seconds where milliseconds are meant (the sweep takes changes 30 ms past due)"},
	{ID: "signedhttp-date-uncapped", File: "adapters/signedhttp/signedhttp.go", Set: SetBeforeChecks,
		From: "\t} else if at, err := http.ParseTime(v); err == nil {\n\t\td = at.Sub(now)\n\t}",
		To:   "\t} else if at, err := http.ParseTime(v); err == nil && at.After(now) {\n\t\treturn at.Sub(now)\n\t}",
		What: "a Retry-After given as an HTTP date is not capped at 1 h"},
	{ID: "monitordb-owed-projection-no-state", File: "adapters/monitordb/store.go", Set: SetBeforeChecks,
		From: "expression.Name(attrState), expression.Name(attrOutboxMS))).Build()",
		To:   "expression.Name(attrOutboxMS))).Build()",
		What: "the owed-outcome projection misses the state attribute (the sweep never sees an owed outcome)"},
	{ID: "monitordb-mark-invalid-remarks", File: "adapters/monitordb/store.go", Set: SetBeforeChecks,
		From: "expression.Name(attrState).Equal(expression.Value(string(monitor.StateFailed))),\n\t\t\texpression.Name(attrLastErrorCode).Equal(expression.Value(monitor.CodeStateInvalid)))))",
		To:   "expression.Name(attrState).Equal(expression.Value(\"never\")),\n\t\t\texpression.Name(attrLastErrorCode).Equal(expression.Value(monitor.CodeStateInvalid)))))",
		What: "the write that marks a record invalid drops its not-already-invalid condition (a second marking, a new outcome id)"},
	{ID: "monitordb-cursor-done-early", File: "adapters/monitordb/store.go", Set: SetBeforeChecks,
		From: "done := len(r) < limit && taken[shard] == len(r)",
		To:   "done := taken[shard] == len(r)",
		What: "a due shard whose page was taken whole is declared done although its query may have more"},
	{ID: "poller-lost-lease-no-followup", File: "functions/poller/handler/handler.go", Set: SetBeforeChecks,
		From: "\tif serr := h.scheduleAt(ctx, KindPoll, eventID, at); serr != nil {\n\t\treturn fmt.Errorf(\"schedule %s after lost lease: %w\", eventID, serr)\n\t}\n",
		To:   "\t_ = at\n",
		What: "no next-poll message after a refused finishing write (only the sweep finds the change, minutes later)"},
	{ID: "poller-budget-no-margin", File: "functions/poller/handler/handler.go", Set: SetBeforeChecks,
		From: "return time.Until(deadline) > h.reader.Timeout()+h.margin",
		To:   "return time.Until(deadline) > 0",
		What: "a poll starts whatever time is left before the Lambda deadline (no CMS timeout + margin guard)"},
}
