package release_test

import (
	"testing"
	"time"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

// TestEvidenceRetryHonoursRetryAfter: the coordinator retried the evidence
// provider after its own backoff (5 s, 10 s, ...) even when the provider
// answered 429/503 with a longer Retry-After. The next attempt is now at
// now + max(backoff, Retry-After), Retry-After capped at 1 h, and the
// attempt still counts toward the attempt budget.
func TestEvidenceRetryHonoursRetryAfter(t *testing.T) {
	for _, tt := range []struct {
		name       string
		retryAfter time.Duration
		want       time.Duration // wait after the first failed attempt
	}{
		{"longer than the backoff", 120 * time.Second, 120 * time.Second},
		{"shorter than the backoff", 2 * time.Second, 5 * time.Second},
		{"none", 0, 5 * time.Second},
		{"capped", 5 * time.Hour, time.Hour},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := setup(t)
			b.resp.FailFirst, b.resp.RetryAfter = 1, tt.retryAfter
			plan := releasetest.NewPlan("evt-ra", "de-DE")
			b.ingestPlan(t, plan)
			b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{})
			failedAt := b.clock.Now()
			if err := b.runFail(t, "evt-ra", "evidence.http_503"); !core.IsRetryable(err) {
				t.Fatalf("first failure final: %v", err)
			}
			rec := b.onlyEvidence(t, "evt-ra")
			if rec.Status != release.StateRetryWait || rec.Attempts != 1 || rec.NextAttemptMS != core.Millis(failedAt.Add(tt.want)) {
				t.Fatalf("status %s attempts %d next %s, want retry_wait 1 %s", rec.Status, rec.Attempts,
					core.FromMillis(rec.NextAttemptMS).Sub(failedAt), tt.want)
			}
			// One second early: still waiting, with the server's wake time.
			b.clock.Advance(tt.want - time.Second)
			if o := b.run(t, "evt-ra"); o.Status != release.OutcomeWaiting || o.WakeAt != failedAt.Add(tt.want) {
				t.Fatalf("before Retry-After: %+v", o)
			}
			if b.resp.Calls() != 1 {
				t.Fatalf("provider called %d times before the Retry-After", b.resp.Calls())
			}
			b.clock.Advance(time.Second)
			if o := b.run(t, "evt-ra"); o.ApprovalID == "" || b.resp.Calls() != 2 {
				t.Fatalf("after Retry-After: %+v", o)
			}
		})
	}
}

// TestDeliveryRetryHonoursRetryAfter: a delivery the CMS answered 429/503
// with Retry-After 90 s was retried after the 5 s backoff; it now waits
// the 90 s.
func TestDeliveryRetryHonoursRetryAfter(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-dra", "de-DE")
	b.ingestPlan(t, plan)
	b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{})
	if o := b.run(t, "evt-dra"); o.Status != release.OutcomeDeliveryReady {
		t.Fatalf("%+v", o)
	}
	b.cms.FailFirst, b.cms.RetryAfter = 1, 90*time.Second
	failedAt := b.clock.Now()
	_, err := b.c.Deliver(b.ctx, "evt-dra")
	wantCode(t, err, "cms.http_503")
	d := b.snap(t, "evt-dra").Delivery
	if d.Status != release.StateRetryWait || d.NextAttemptMS != core.Millis(failedAt.Add(90*time.Second)) {
		t.Fatalf("status %s next %s, want retry_wait after 90s", d.Status, core.FromMillis(d.NextAttemptMS).Sub(failedAt))
	}
	b.clock.Advance(89 * time.Second)
	if o, err := b.c.Deliver(b.ctx, "evt-dra"); err != nil || o.Status != release.OutcomeDeliveryReady || o.WakeAt != failedAt.Add(90*time.Second) {
		t.Fatalf("before Retry-After: %+v, %v", o, err)
	}
	if b.cms.Sends != 1 {
		t.Fatalf("%d sends before the Retry-After", b.cms.Sends)
	}
	b.clock.Advance(time.Second)
	if o, err := b.c.Deliver(b.ctx, "evt-dra"); err != nil || o.Status != release.OutcomeDelivered {
		t.Fatalf("after Retry-After: %+v, %v", o, err)
	}
}
