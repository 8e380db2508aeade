package release_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

func TestThreeLocalesOutOfOrderDeliveredOnce(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-3", "fr-FR", "de-DE", "it-IT")
	b.ingestPlan(t, plan)
	if o := b.run(t, "evt-3"); o.Status != release.OutcomeWaiting || o.JobID != "" || !o.WakeAt.IsZero() {
		t.Fatalf("no completed job: %+v", o)
	}
	for _, locale := range []string{"it-IT", "de-DE", "fr-FR"} {
		b.ingestResult(t, plan, locale, releasetest.ResultOptions{})
		o := b.run(t, "evt-3")
		if !o.Changed || o.TargetLocale != locale || o.ApprovalID == "" {
			t.Fatalf("after %s: %+v", locale, o)
		}
		want := release.OutcomeApproved
		if locale == "fr-FR" {
			want = release.OutcomeDeliveryReady
		}
		if o.Status != want {
			t.Fatalf("after %s status %s, want %s", locale, o.Status, want)
		}
		b.clock.Advance(time.Second)
	}
	// Reruns only report the prepared delivery; nothing new is written.
	o := b.run(t, "evt-3")
	if o.Status != release.OutcomeDeliveryReady || o.Changed || o.DeliveryID == "" {
		t.Fatalf("rerun: %+v", o)
	}
	for i := 0; i < 3; i++ {
		d, err := b.c.Deliver(b.ctx, "evt-3")
		if err != nil {
			t.Fatal(err)
		}
		if d.Status != release.OutcomeDelivered || d.Changed != (i == 0) || d.DeliveryID != o.DeliveryID {
			t.Fatalf("deliver %d: %+v", i, d)
		}
	}
	if o := b.run(t, "evt-3"); o.Status != release.OutcomeDelivered {
		t.Fatalf("after delivery: %+v", o)
	}
	if b.cms.Sends != 1 || len(b.cms.Deliveries) != 1 {
		t.Fatalf("cms saw %d sends, %d deliveries", b.cms.Sends, len(b.cms.Deliveries))
	}
	s := b.snap(t, "evt-3")
	if len(s.Approvals) != 3 || len(s.Evidence) != 3 {
		t.Fatalf("%d approvals, %d evidence records", len(s.Approvals), len(s.Evidence))
	}
	for _, e := range s.Evidence {
		if e.Status != release.StateSucceeded || e.Attempts != 1 {
			t.Fatalf("evidence %+v", e)
		}
	}
	// The CMS can verify the bundle with the publication public key alone.
	var req contract.DeliveryRequest
	if err := json.Unmarshal(b.cms.Deliveries[o.DeliveryID], &req); err != nil {
		t.Fatal(err)
	}
	_, pub := b.fx.Authorities()
	raw, err := release.OpenToken(release.PublicationContext, pub.PublicKey(), req.Bundle)
	if err != nil {
		t.Fatal(err)
	}
	var bundle contract.Bundle
	if err := json.Unmarshal(raw, &bundle); err != nil {
		t.Fatal(err)
	}
	if bundle.DeliveryID != o.DeliveryID || len(bundle.Locales) != 3 || bundle.Locales[0].TargetLocale != "de-DE" || bundle.Locales[2].TargetLocale != "it-IT" {
		t.Fatalf("bundle %+v", bundle)
	}
	appr, _ := b.fx.Authorities()
	for _, l := range bundle.Locales {
		if _, err := release.OpenToken(release.ApprovalContext, appr.PublicKey(), l.Approval); err != nil {
			t.Fatalf("approval of %s does not verify: %v", l.TargetLocale, err)
		}
		if !strings.HasPrefix(l.Text, "SECRET-TARGET") {
			t.Fatalf("bundle text %q", l.Text)
		}
	}
	wrong := ed25519.NewKeyFromSeed(make([]byte, 32)).Public().(ed25519.PublicKey)
	if _, err := release.OpenToken(release.PublicationContext, wrong, req.Bundle); err == nil {
		t.Fatal("bundle verified with a wrong key")
	}
	if _, err := release.OpenToken(release.ApprovalContext, pub.PublicKey(), req.Bundle); err == nil {
		t.Fatal("bundle verified in the approval context")
	}
}

func TestRunSkipsUnfinishedAndFailedJobs(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-f", "de-DE", "fr-FR")
	b.ingestPlan(t, plan)
	if _, _, err := b.c.Ingest(b.ctx, "localeflow.job.completed", b.fx.Detail(plan.FailedPayload("de-DE"))); err != nil {
		t.Fatal(err)
	}
	b.ingestResult(t, plan, "fr-FR", releasetest.ResultOptions{})
	o := b.run(t, "evt-f")
	if o.Status != release.OutcomeApproved || o.TargetLocale != "fr-FR" {
		t.Fatalf("%+v", o)
	}
	// A failed locale never approves: readiness stays false.
	if o := b.run(t, "evt-f"); o.Status != release.OutcomeWaiting || o.JobID != "" {
		t.Fatalf("%+v", o)
	}
}

func TestRunPlanMissing(t *testing.T) {
	b := setup(t)
	b.runErr(t, "evt-none", release.CodePlanMissing)
	b.runErr(t, "bad id", release.CodeEventIDInvalid)
}

func TestEvidenceRetryBackoffAndExhaustion(t *testing.T) {
	b := setup(t)
	b.resp.FailFirst = 100
	plan := releasetest.NewPlan("evt-503", "de-DE")
	b.ingestPlan(t, plan)
	b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{})
	wantDelays := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second}
	for attempt := 1; attempt <= 5; attempt++ {
		err := b.runFail(t, "evt-503", "evidence.http_503")
		if core.IsRetryable(err) != (attempt < 5) {
			t.Fatalf("attempt %d: retryable=%v; the last attempt's error is final", attempt, core.IsRetryable(err))
		}
		rec := b.onlyEvidence(t, "evt-503")
		if rec.Attempts != attempt || rec.LastErrorCode != "evidence.http_503" {
			t.Fatalf("attempt %d: %+v", attempt, rec)
		}
		if attempt < 5 {
			if rec.Status != release.StateRetryWait || rec.NextAttemptMS != core.Millis(b.clock.Now().Add(wantDelays[attempt-1])) {
				t.Fatalf("attempt %d: status %s next %d", attempt, rec.Status, rec.NextAttemptMS)
			}
			// Not due yet: waiting with a wake time.
			o := b.run(t, "evt-503")
			if o.Status != release.OutcomeWaiting || o.WakeAt != core.FromMillis(rec.NextAttemptMS) {
				t.Fatalf("before backoff: %+v", o)
			}
			b.clock.Advance(wantDelays[attempt-1])
		} else if rec.Status != release.StateFailed {
			t.Fatalf("after 5 attempts status %s", rec.Status)
		}
	}
	b.runErr(t, "evt-503", release.CodeAttemptsExhausted)
	if b.resp.Calls() != 5 {
		t.Fatalf("provider called %d times", b.resp.Calls())
	}
}

func TestNonRetryableEvidenceFailureIsFinal(t *testing.T) {
	b := setup(t)
	b.resp.Review = releasetest.ReviewIndependent
	plan := releasetest.NewPlan("evt-legal", "de-DE")
	b.ingestPlan(t, plan)
	b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{HumanReviewRequired: true})
	b.runErr(t, "evt-legal", release.CodeIndependentLegalForbidden)
	if rec := b.onlyEvidence(t, "evt-legal"); rec.Status != release.StateFailed || rec.LastErrorCode != release.CodeIndependentLegalForbidden {
		t.Fatalf("%+v", rec)
	}
	b.runErr(t, "evt-legal", release.CodeAttemptsExhausted)
}

func TestReviewPolicies(t *testing.T) {
	tests := []struct {
		name   string
		review releasetest.Review
		opts   releasetest.ResultOptions
		code   string
	}{
		{"human required, human given", releasetest.ReviewAuto, releasetest.ResultOptions{HumanReviewRequired: true}, ""},
		{"independent required, model review", releasetest.ReviewAuto, releasetest.ResultOptions{IndependentReviewRequired: true}, ""},
		{"independent required, human given", releasetest.ReviewHuman, releasetest.ResultOptions{IndependentReviewRequired: true}, ""},
		{"human required, model review", releasetest.ReviewIndependent, releasetest.ResultOptions{HumanReviewRequired: true}, release.CodeIndependentLegalForbidden},
		{"same provider reviews", releasetest.ReviewSameProvider, releasetest.ResultOptions{IndependentReviewRequired: true}, release.CodeIndependentNotIndependent},
		{"no escalation expected", releasetest.ReviewHuman, releasetest.ResultOptions{}, release.CodeEscalationUnexpected},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := setup(t)
			b.resp.Review = tt.review
			plan := releasetest.NewPlan("evt-r", "de-DE")
			b.ingestPlan(t, plan)
			b.ingestResult(t, plan, "de-DE", tt.opts)
			if tt.code == "" {
				if o := b.run(t, "evt-r"); o.Status != release.OutcomeDeliveryReady {
					t.Fatalf("%+v", o)
				}
				return
			}
			b.runErr(t, "evt-r", tt.code)
		})
	}
}

func TestOperationGuard(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-g", "de-DE")
	b.ingestPlan(t, plan)
	b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{})
	b.c.SetGuard(func(_ context.Context, lease time.Duration) error {
		if lease != release.DefaultEvidenceLease {
			t.Errorf("guard got lease %v", lease)
		}
		return core.Fail("lambda.time_short")
	})
	b.runErr(t, "evt-g", release.CodeGuardFailed)
	if b.resp.Calls() != 0 {
		t.Fatal("evidence requested despite the guard")
	}
	// A guard refusal does not release the claim: it is left to expire,
	// and the next run after the lease sees lease_expired and retries.
	rec := b.onlyEvidence(t, "evt-g")
	if rec.Status != release.StateLeased {
		t.Fatalf("%+v", rec)
	}
	if o := b.run(t, "evt-g"); o.Status != release.OutcomeWaiting || o.WakeAt != core.FromMillis(rec.LeaseExpiresMS) {
		t.Fatalf("while leased: %+v", o)
	}
	// A guard that passes once (the evidence call) and then refuses the
	// receipt verification fails with the retryable release code.
	b.clock.Advance(release.DefaultEvidenceLease)
	calls := 0
	b.c.SetGuard(func(context.Context, time.Duration) error {
		calls++
		if calls > 1 {
			return core.Fail("lambda.time_short")
		}
		return nil
	})
	err := b.runFail(t, "evt-g", "release.operation_guard")
	if !core.IsRetryable(err) {
		t.Fatal("verification guard failure must be retryable")
	}
	if rec := b.onlyEvidence(t, "evt-g"); rec.Status != release.StateRetryWait || rec.LastErrorCode != "release.operation_guard" || rec.Attempts != 2 {
		t.Fatalf("%+v", rec)
	}
	b.c.SetGuard(nil)
	b.clock.Advance(time.Hour)
	if o := b.run(t, "evt-g"); o.Status != release.OutcomeDeliveryReady {
		t.Fatalf("%+v", o)
	}
}

func TestApprovalExpiryNeedsNewRevision(t *testing.T) {
	b := setup(t)
	b.reconfigure(t, func(_ *release.Dependencies, cfg *release.Config) { cfg.ApprovalTTL = time.Hour })
	plan := releasetest.NewPlan("evt-x", "de-DE", "fr-FR")
	b.ingestPlan(t, plan)
	b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{})
	if o := b.run(t, "evt-x"); o.Status != release.OutcomeApproved {
		t.Fatalf("%+v", o)
	}
	b.clock.Advance(2 * time.Hour)
	// The expired locale is selected again, but its evidence revision was
	// consumed.
	b.runErr(t, "evt-x", release.CodeAlreadyConsumed)
	b.reconfigure(t, func(_ *release.Dependencies, cfg *release.Config) { cfg.EvidenceRevision = "rev-2" })
	if o := b.run(t, "evt-x"); o.Status != release.OutcomeApproved || !o.Changed {
		t.Fatalf("%+v", o)
	}
	if n := len(b.snap(t, "evt-x").Evidence); n != 2 {
		t.Fatalf("%d evidence records", n)
	}
}

func TestExistingDeliveryStates(t *testing.T) {
	b := setup(t)
	b.reconfigure(t, func(_ *release.Dependencies, cfg *release.Config) { cfg.DeliveryMaxAttempts = 2 })
	plan := releasetest.NewPlan("evt-d", "de-DE")
	b.ingestPlan(t, plan)
	b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{})
	o := b.run(t, "evt-d")
	if o.Status != release.OutcomeDeliveryReady || !o.Changed {
		t.Fatalf("%+v", o)
	}
	b.cms.FailFirst = 100
	for i := 0; i < 5; i++ {
		_, err := b.c.Deliver(b.ctx, "evt-d")
		d := b.snap(t, "evt-d").Delivery
		if i < 2 {
			wantCode(t, err, "cms.http_503")
			if retry := core.IsRetryable(err); retry != (i == 0) {
				t.Fatalf("attempt %d retryable=%v", i, retry)
			}
		}
		if i == 0 {
			if d.Status != release.StateRetryWait {
				t.Fatalf("%+v", d)
			}
			if w, _ := b.c.Deliver(b.ctx, "evt-d"); w.Status != release.OutcomeDeliveryReady || w.WakeAt.IsZero() {
				t.Fatalf("before backoff: %+v", w)
			}
			b.clock.Advance(5 * time.Second)
		}
		if i >= 2 {
			wantCode(t, err, release.CodeDeliveryFailed)
		}
	}
	if b.cms.Sends != 2 {
		t.Fatalf("%d sends", b.cms.Sends)
	}
	b.runErr(t, "evt-d", release.CodeDeliveryFailed)
}

func TestDeliveryLeaseExpiryRetries(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-dl", "de-DE")
	b.ingestPlan(t, plan)
	b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{})
	b.run(t, "evt-dl")
	// A worker that crashed mid-send left a lease behind.
	s := b.snap(t, "evt-dl")
	d := *s.Delivery
	d.Status, d.Attempts, d.LeaseOwner, d.LeaseToken = release.StateLeased, 1, "dead", "tok"
	d.LeaseExpiresMS = core.Millis(b.clock.Now().Add(time.Minute))
	d.Version = s.Delivery.Version + 1
	if err := b.store.Put(b.ctx, &d, s.Delivery.Version); err != nil {
		t.Fatal(err)
	}
	if o, err := b.c.Deliver(b.ctx, "evt-dl"); err != nil || o.Status != release.OutcomeDeliveryReady || o.WakeAt != core.FromMillis(d.LeaseExpiresMS) {
		t.Fatalf("%+v %v", o, err)
	}
	b.clock.Advance(time.Minute)
	if o, err := b.c.Deliver(b.ctx, "evt-dl"); err != nil || o.Status != release.OutcomeDelivered {
		t.Fatalf("%+v %v", o, err)
	}
	if d := b.snap(t, "evt-dl").Delivery; d.Attempts != 2 || d.Status != release.StateSucceeded {
		t.Fatalf("%+v", d)
	}
}

func TestTamperedDeliveryRefused(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-t", "de-DE")
	b.ingestPlan(t, plan)
	b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{})
	b.run(t, "evt-t")
	s := b.snap(t, "evt-t")
	d := *s.Delivery
	d.Signature = strings.Repeat("A", len(d.Signature))
	d.Version++
	if err := b.store.Put(b.ctx, &d, s.Delivery.Version); err != nil {
		t.Fatal(err)
	}
	b.runErr(t, "evt-t", release.CodeDeliveryInvalid)
	_, err := b.c.Deliver(b.ctx, "evt-t")
	wantCode(t, err, release.CodeDeliveryInvalid)
	if b.cms.Sends != 0 {
		t.Fatal("tampered delivery sent")
	}
}

// An approval altered in the store no longer verifies: its signed body
// itself (its expiry, with the top-level copy made to agree, so the
// record is well formed and reads: only the signature refuses it).
func TestTamperedApprovalBlocks(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-ta", "de-DE", "fr-FR")
	b.ingestPlan(t, plan)
	b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{})
	b.run(t, "evt-ta")
	s := b.snap(t, "evt-ta")
	a := *s.Approvals["job-de-DE"]
	body := strings.Replace(a.Body, fmt.Sprintf(`"expires_at_ms":%d`, a.ExpiresMS), fmt.Sprintf(`"expires_at_ms":%d`, a.ExpiresMS+1000), 1)
	if body == a.Body {
		t.Fatal("expiry not in the body")
	}
	a.SetSigned([]byte(body), a.Sig)
	a.ExpiresMS += 1000
	a.Version++
	if err := b.store.Put(b.ctx, &a, s.Approvals["job-de-DE"].Version); err != nil {
		t.Fatal(err)
	}
	b.runErr(t, "evt-ta", release.CodeApprovalInvalid)
}

func TestNextWake(t *testing.T) {
	b := setup(t)
	b.resp.FailFirst = 1
	plan := releasetest.NewPlan("evt-w", "de-DE")
	b.ingestPlan(t, plan)
	if _, ok, err := b.c.NextWake(b.ctx, "evt-w"); ok || err != nil {
		t.Fatalf("nothing stored yet: %v %v", ok, err)
	}
	b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{})
	b.runErr(t, "evt-w", "evidence.http_503")
	at, ok, err := b.c.NextWake(b.ctx, "evt-w")
	if err != nil || !ok || !at.Equal(t0.Add(5*time.Second)) {
		t.Fatalf("wake %v %v %v", at, ok, err)
	}
	b.reconfigure(t, func(_ *release.Dependencies, cfg *release.Config) { cfg.EvidenceRevision = "rev-2" })
	if _, ok, _ := b.c.NextWake(b.ctx, "evt-w"); ok {
		t.Fatal("old revision wakes")
	}
}

func TestResultValidationAgainstPlan(t *testing.T) {
	tests := []struct {
		name   string
		result func(plan releasetest.PlanSpec) []byte
		code   string
	}{
		{"job of another plan id", func(p releasetest.PlanSpec) []byte {
			p.PlanID = "plan-other"
			return p.ResultPayload("de-DE", releasetest.ResultOptions{})
		}, "queue.plan_mismatch"},
		{"result of another source text", func(p releasetest.PlanSpec) []byte {
			p.Jobs[0].SourceText = "different source"
			return p.ResultPayload("de-DE", releasetest.ResultOptions{})
		}, "result.source_mismatch"},
		{"result of another content type", func(p releasetest.PlanSpec) []byte {
			p.Jobs[0].ContentType = "banner"
			return p.ResultPayload("de-DE", releasetest.ResultOptions{})
		}, "result.binding_mismatch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := setup(t)
			plan := releasetest.NewPlan("evt-v", "de-DE")
			// The job arrives first, so it cannot be checked at ingestion.
			if _, _, err := b.c.Ingest(b.ctx, "localeflow.job.completed", b.fx.Detail(tt.result(releasetest.NewPlan("evt-v", "de-DE")))); err != nil {
				t.Fatal(err)
			}
			b.ingestPlan(t, plan)
			b.runErr(t, "evt-v", tt.code)
			if n := len(b.snap(t, "evt-v").Evidence); n != 0 {
				t.Fatalf("%d evidence records for an invalid result", n)
			}
		})
	}
}

func TestClockBeforeEpochRefused(t *testing.T) {
	b := setup(t)
	b.clock.now = time.Unix(-10, 0)
	b.runErr(t, "evt-1", "coordinator.time.invalid")
	_, _, err := b.c.Ingest(b.ctx, "localeflow.plan.accepted", b.fx.Detail(releasetest.NewPlan("evt-1", "de-DE").PlanPayload()))
	wantCode(t, err, "coordinator.time.invalid")
	_, err = b.c.Deliver(b.ctx, "evt-1")
	wantCode(t, err, "coordinator.time.invalid")
}
