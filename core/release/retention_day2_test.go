package release_test

import (
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

// TestDeliveredReleaseStaysDeliveredAfterTextsExpire (issue 25, finding
// 3): once a release is delivered its texts expire; a later step for the
// event (a duplicate input, a DLQ redrive, a quarantine replay, a stray
// deliver envelope) reports delivered, never blocks the release.
func TestDeliveredReleaseStaysDeliveredAfterTextsExpire(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-gone", "de-DE", "fr-FR")
	b.ingestPlan(t, plan)
	b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{})
	b.ingestResult(t, plan, "fr-FR", releasetest.ResultOptions{})
	for i := 0; i < 4; i++ {
		if o := b.run(t, "evt-gone"); o.Status == release.OutcomeDeliveryReady {
			break
		}
	}
	if o, err := b.c.Deliver(b.ctx, "evt-gone"); err != nil || o.Status != release.OutcomeDelivered {
		t.Fatalf("deliver = %+v, %v", o, err)
	}
	b.clock.Advance(8 * 24 * time.Hour)
	if n := b.store.DeleteTexts("evt-gone"); n != 4 {
		t.Fatalf("%d texts deleted, want 4", n)
	}
	// A duplicate input event: stored already, changes nothing.
	if _, changed, err := b.c.Ingest(b.ctx, "localeflow.job.completed", b.fx.Detail(plan.ResultPayload("de-DE", releasetest.ResultOptions{}))); err != nil || changed {
		t.Fatalf("duplicate ingest: changed=%v err=%v", changed, err)
	}
	for i := 0; i < 2; i++ {
		o, err := b.c.RunNextRelease(b.ctx, "evt-gone")
		if err != nil || o.Status != release.OutcomeDelivered || o.Changed {
			t.Fatalf("run after expiry = %+v, %v", o, err)
		}
		o, err = b.c.Deliver(b.ctx, "evt-gone")
		if err != nil || o.Status != release.OutcomeDelivered || o.Changed {
			t.Fatalf("deliver after expiry = %+v, %v", o, err)
		}
	}
	s := b.snap(t, "evt-gone")
	if s.Blocked != nil {
		t.Fatalf("delivered release blocked: %+v", s.Blocked)
	}
	if s.Delivery.Status != release.StateSucceeded || b.cms.Sends != 1 {
		t.Fatalf("delivery %+v, %d sends", s.Delivery, b.cms.Sends)
	}
	// A succeeded record that does not belong to the plan is still refused.
	d := *s.Delivery
	d.PlanID, d.Version = "plan-other", d.Version+1
	if err := b.store.Put(b.ctx, &d, s.Delivery.Version); err != nil {
		t.Fatal(err)
	}
	_, err := b.c.Deliver(b.ctx, "evt-gone")
	wantCode(t, err, release.CodeDeliveryInvalid)
	if core.IsRetryable(err) {
		t.Fatal("tampered delivered record retryable")
	}
}

// TestAttemptPolicyChangeBlocksVisibly (issue 25, finding 5): an evidence
// record created under another LOCALEFLOW_EVIDENCE_MAX_ATTEMPTS is
// evidence.state.attempt_policy_changed; the release is blocked (health
// shows it, the sweep stops running it) instead of failing every sweep.
func TestAttemptPolicyChangeBlocksVisibly(t *testing.T) {
	b := setup(t)
	b.resp.FailFirst = 1
	plan := releasetest.NewPlan("evt-policy", "de-DE")
	b.ingestPlan(t, plan)
	b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{})
	b.runErr(t, "evt-policy", "evidence.http_503") // retry_wait under 5 attempts
	b.reconfigure(t, func(_ *release.Dependencies, cfg *release.Config) { cfg.EvidenceMaxAttempts = 3 })
	b.clock.Advance(time.Minute)
	err := b.runFail(t, "evt-policy", release.CodeAttemptPolicyChanged)
	if core.IsRetryable(err) {
		t.Fatal("attempt_policy_changed retryable")
	}
	s := b.snap(t, "evt-policy")
	if s.Blocked == nil || s.Blocked.Code != release.CodeAttemptPolicyChanged {
		t.Fatalf("release not blocked: %+v", s.Blocked)
	}
	if due := b.due(t); len(due) != 0 {
		t.Fatalf("blocked release still due: %+v", due)
	}
}

// TestAcknowledgedReleaseStaysEndedAfterTextsExpire (day-2 simulation
// seeds 955, 1131, 1210, 1369, 1898, 2718, 2877, 2965): a job of the plan
// failed and the operator acknowledged it, which ends the release and
// starts its texts' retention; once the texts are gone a late input for
// the release (a duplicate, a redrive, a quarantine replay) is a no-op,
// never a new block (health would page for a release already handled).
func TestAcknowledgedReleaseStaysEndedAfterTextsExpire(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-acked", "de-DE", "fr-FR")
	b.ingestPlan(t, plan)
	b.ingestResult(t, plan, "fr-FR", releasetest.ResultOptions{})
	s := b.snap(t, "evt-acked")
	var failed *release.JobRecord
	for _, j := range s.Plan.Jobs {
		if _, ok := s.Jobs[j.JobID]; !ok {
			failed = &release.JobRecord{EventID: "evt-acked", PlanID: s.Plan.PlanID, JobID: j.JobID, Status: release.JobFailed,
				ErrorCode: "provider.down", PayloadSHA256: strings.Repeat("a", 64), ReceivedMS: core.Millis(b.clock.Now()), Version: 1}
		}
	}
	if failed == nil {
		t.Fatal("no job without a record")
	}
	if err := b.store.Put(b.ctx, failed, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := release.Acknowledge(b.ctx, b.store, "evt-acked", "", "arn:aws:iam::123456789012:user/op", "provider gave up", core.Millis(b.clock.Now())); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(8 * 24 * time.Hour)
	if n := b.store.DeleteTexts("evt-acked"); n == 0 {
		t.Fatal("no texts deleted")
	}
	for i := 0; i < 2; i++ {
		o, err := b.c.RunNextRelease(b.ctx, "evt-acked")
		if err != nil || o.Status != release.OutcomeWaiting || o.Changed || !o.WakeAt.IsZero() {
			t.Fatalf("run after acknowledgement and expiry = %+v, %v", o, err)
		}
	}
	if s := b.snap(t, "evt-acked"); s.Blocked != nil {
		t.Fatalf("acknowledged release blocked again: %+v", s.Blocked)
	}
}
