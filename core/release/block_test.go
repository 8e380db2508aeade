package release_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

// refusingProvider refuses, for good, the evidence of one job and
// otherwise answers like next.
type refusingProvider struct {
	next  release.EvidenceProvider
	jobID string
}

func (p refusingProvider) Obtain(ctx context.Context, req *contract.EvidenceRequest) ([]byte, error) {
	if req.JobID == p.jobID {
		return nil, core.Fail("http_400")
	}
	return p.next.Obtain(ctx, req)
}

func (b *bundle) due(t *testing.T) []release.DueItem {
	t.Helper()
	var out []release.DueItem
	cursor := ""
	for {
		page, err := b.store.Due(b.ctx, core.Millis(b.clock.Now().Add(1e15)), cursor, 100)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page.Items...)
		if page.Next == "" {
			return out
		}
		cursor = page.Next
	}
}

// TestBlockedReleaseLeavesWakeIndex: fr-FR's evidence waits for a retry
// when de-DE (which every run selects first) fails for good. The release
// can never complete, so none of its records may stay in the wake index
// (the sweep would re-run it for nothing); it is marked blocked instead,
// which health shows.
func TestBlockedReleaseLeavesWakeIndex(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-stuck", "de-DE", "fr-FR")
	b.ingestPlan(t, plan)
	b.resp.FailFirst = 1
	b.ingestResult(t, plan, "fr-FR", releasetest.ResultOptions{})
	b.runErr(t, "evt-stuck", "evidence.http_503") // fr-FR: retry_wait
	b.reconfigure(t, func(d *release.Dependencies, _ *release.Config) {
		d.Evidence = refusingProvider{next: d.Evidence, jobID: "job-de-DE"}
	})
	b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{})
	err := b.runFail(t, "evt-stuck", "evidence.http_400")
	if core.IsRetryable(err) {
		t.Fatal("refused evidence must be final")
	}
	if due := b.due(t); len(due) != 0 {
		t.Fatalf("a release blocked for good still wakes: %+v", due)
	}
	s := b.snap(t, "evt-stuck")
	if s.Blocked == nil || s.Blocked.Code != "evidence.http_400" || release.ValidateBlockedRecord(s.Blocked) != nil {
		t.Fatalf("blocked record %+v", s.Blocked)
	}
	if _, _, attMS, att := release.Wake(s.Blocked); !att || attMS != core.Millis(b.clock.Now()) {
		t.Fatal("the blocked release is not in the attention index")
	}
	// Running it again meets the same refusal and changes nothing.
	b.clock.Advance(2 * release.DefaultEvidenceLease)
	b.runErr(t, "evt-stuck", release.CodeAttemptsExhausted)
	if due := b.due(t); len(due) != 0 {
		t.Fatalf("re-run woke the blocked release: %+v", due)
	}
}

// TestTransientFinalErrorDoesNotBlock: a final error that a later run
// does not meet again (the operation guard) leaves the release in the wake
// index.
func TestTransientFinalErrorDoesNotBlock(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-guard", "de-DE")
	b.ingestPlan(t, plan)
	b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{})
	b.c.SetGuard(func(context.Context, time.Duration) error { return core.Fail("deadline") })
	b.runErr(t, "evt-guard", release.CodeGuardFailed)
	if s := b.snap(t, "evt-guard"); s.Blocked != nil {
		t.Fatalf("blocked by a transient error: %+v", s.Blocked)
	}
	if due := b.due(t); len(due) == 0 {
		t.Fatal("the release left the wake index")
	}
}

// TestWaitingReleaseIsNotDueBeforeItsBackoff: de-DE waits for its
// evidence backoff, fr-FR completed meanwhile and is never claimed before
// de-DE is approved. The release must not be due before the backoff ends
// (the sweep would run it on every pass and stack up steps).
func TestWaitingReleaseIsNotDueBeforeItsBackoff(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-wait", "de-DE", "fr-FR")
	b.ingestPlan(t, plan)
	b.resp.FailFirst = 1
	b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{})
	b.runErr(t, "evt-wait", "evidence.http_503") // de-DE: retry_wait
	b.ingestResult(t, plan, "fr-FR", releasetest.ResultOptions{})
	o := b.run(t, "evt-wait")
	if o.Status != release.OutcomeWaiting || o.JobID != "job-de-DE" || !o.WakeAt.After(b.clock.Now()) {
		t.Fatalf("%+v", o)
	}
	now := core.Millis(b.clock.Now())
	for _, it := range b.due(t) {
		if it.WakeMS <= now {
			t.Fatalf("due now while waiting for the backoff: %+v", it)
		}
	}
	// Once the backoff ends the release is due again, and completes.
	b.clock.Advance(o.WakeAt.Sub(b.clock.Now()))
	if due := b.due(t); len(due) == 0 {
		t.Fatal("release not due after its backoff")
	}
	for i := 0; i < 4; i++ {
		b.run(t, "evt-wait")
	}
	if s := b.snap(t, "evt-wait"); s.Delivery == nil {
		t.Fatal("release did not complete")
	}
}

// TestBlockedReleaseIsNotDelivered: a release is blocked for good (here:
// its blocked record and its parked delivery, as block writes them) while
// a deliver step for its prepared delivery is still queued. The deliver
// step must not send: blocked wins, with the final code release.blocked,
// and the delivery stays parked and unclaimed. Before the fix the step
// claimed the parked delivery (clearing parked) and sent it to the CMS.
func TestBlockedReleaseIsNotDelivered(t *testing.T) {
	b := setup(t)
	plan := releasetest.NewPlan("evt-bd", "de-DE")
	b.ingestPlan(t, plan)
	b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{})
	if o := b.run(t, "evt-bd"); o.Status != release.OutcomeDeliveryReady {
		t.Fatalf("%+v", o)
	}
	s := b.snap(t, "evt-bd")
	d := *s.Delivery
	d.Parked, d.Version = true, s.Delivery.Version+1
	blocked := &release.BlockedRecord{EventID: "evt-bd", Code: "result.invalid", BlockedMS: core.Millis(b.clock.Now()), Version: 1}
	if err := b.store.PutAll(b.ctx, release.Write{Rec: blocked}, release.Write{Rec: &d, Prev: s.Delivery.Version}); err != nil {
		t.Fatal(err)
	}
	o, err := b.c.Deliver(b.ctx, "evt-bd")
	wantCode(t, err, release.CodeReleaseBlocked)
	if core.IsRetryable(err) || o.Status != "" {
		t.Fatalf("%+v %v: want a final error and no outcome", o, err)
	}
	if b.cms.Sends != 0 {
		t.Fatalf("a blocked release was sent to the CMS (%d sends)", b.cms.Sends)
	}
	after := b.snap(t, "evt-bd")
	if got := after.Delivery; got.Status != release.StatePending || !got.Parked || got.Attempts != 0 || got.Version != d.Version {
		t.Fatalf("delivery changed: %+v", got)
	}
	if due := b.due(t); len(due) != 0 {
		t.Fatalf("the blocked release wakes again: %+v", due)
	}
	if !strings.Contains(b.logs.String(), `"code":"release.blocked"`) {
		t.Fatal("the refused deliver step is not logged with its code")
	}
}

// TestDeliveryOutOfAttemptsBlocks: the deliver step whose send uses up the
// last attempt fails with the CMS's code (cms.http_503, final), not with
// cms.delivery.failed. It must block the release then, with the failed
// delivery, so that one acknowledgement covers both; before the fix only a
// later step (a job event sent again days later, dev/proof/sim seed 955)
// met cms.delivery.failed and blocked it, showing health blocked again
// after the operator had acknowledged the failed delivery.
func TestDeliveryOutOfAttemptsBlocks(t *testing.T) {
	b := setup(t)
	b.reconfigure(t, func(_ *release.Dependencies, cfg *release.Config) { cfg.DeliveryMaxAttempts = 2 })
	plan := releasetest.NewPlan("evt-dx", "de-DE")
	b.ingestPlan(t, plan)
	b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{})
	b.run(t, "evt-dx")
	b.cms.FailFirst = 100
	_, err := b.c.Deliver(b.ctx, "evt-dx")
	wantCode(t, err, "cms.http_503")
	b.clock.Advance(time.Minute)
	_, err = b.c.Deliver(b.ctx, "evt-dx")
	wantCode(t, err, "cms.http_503")
	if core.IsRetryable(err) {
		t.Fatal("the last attempt's failure must be final")
	}
	s := b.snap(t, "evt-dx")
	if s.Delivery.Status != release.StateFailed {
		t.Fatalf("delivery %+v", s.Delivery)
	}
	if s.Blocked == nil || s.Blocked.Code != "cms.http_503" {
		t.Fatalf("the release is not blocked when its delivery failed for good: %+v", s.Blocked)
	}
	// A later step (a job event sent again) finds it blocked already and
	// adds no attention item.
	b.clock.Advance(time.Hour)
	b.runErr(t, "evt-dx", release.CodeDeliveryFailed)
	if again := b.snap(t, "evt-dx").Blocked; again.BlockedMS != s.Blocked.BlockedMS || again.Version != s.Blocked.Version {
		t.Fatalf("blocked again: %+v, was %+v", again, s.Blocked)
	}
}
