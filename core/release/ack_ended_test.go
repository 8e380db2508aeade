package release_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

const opARN = "arn:aws:iam::123456789012:user/op"

// failBlocked makes the store refuse the next n writes of a blocked
// record (n < 0: every one) with err.
func failBlocked(b *bundle, n int, err error) {
	b.store.FailPuts(func(rec release.Record) error {
		if _, ok := rec.(*release.BlockedRecord); !ok || n == 0 {
			return nil
		}
		n--
		return err
	})
}

// needsAttention lists the sort keys of the event's records in the
// attention index (what health counts).
func needsAttention(t *testing.T, b *bundle, eventID string) []string {
	t.Helper()
	s := b.snap(t, eventID)
	var recs []release.Record
	for _, e := range s.Evidence {
		recs = append(recs, e)
	}
	for _, j := range s.Jobs {
		recs = append(recs, j)
	}
	if s.Delivery != nil {
		recs = append(recs, s.Delivery)
	}
	if s.Blocked != nil {
		recs = append(recs, s.Blocked)
	}
	var out []string
	for _, r := range recs {
		if _, _, _, att := release.Wake(r); att {
			_, sk := r.Key()
			out = append(out, sk)
		}
	}
	return out
}

// evidenceFailsForGood makes the first evidence request of a one-locale
// release fail on its last (only) attempt: evidence.http_503, final.
func evidenceFailsForGood(t *testing.T, eventID string) (*bundle, releasetest.PlanSpec) {
	t.Helper()
	b := setup(t)
	b.reconfigure(t, func(_ *release.Dependencies, cfg *release.Config) { cfg.EvidenceMaxAttempts = 1 })
	b.resp.FailFirst = 1
	plan := releasetest.NewPlan(eventID, "de-DE")
	b.ingestPlan(t, plan)
	b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{})
	return b, plan
}

// TestFailedBlockIsRetried (dev/proof/sim seed 62877 on main e3ebf34):
// the step whose evidence request failed on its last attempt could not
// write the blocked record (a store failure). The failed evidence record
// is in the attention index only and the job's awaiting_claim is cleared,
// so nothing of the release wakes any more: before the fix the step
// returned its final error anyway ("blocking is best effort") and nobody
// ever blocked the release, until a late input blocked it days later,
// after the operator had acknowledged the failure. The step must fail
// retryable instead (the message returns) and its retry must block.
func TestFailedBlockIsRetried(t *testing.T) {
	b, _ := evidenceFailsForGood(t, "evt-bretry")
	failBlocked(b, 1, errors.New("table unavailable"))
	_, err := b.c.RunNextRelease(b.ctx, "evt-bretry")
	if err == nil || !core.IsRetryable(err) {
		t.Fatalf("step whose block failed = %v, want a retryable error", err)
	}
	wantCode(t, err, release.CodeStoreWriteFailed)
	if !strings.Contains(err.Error(), "evidence.http_503") {
		t.Fatalf("the step's final code is lost: %v", err)
	}
	if !strings.Contains(b.logs.String(), `"code":"evidence.http_503"`) ||
		!strings.Contains(b.logs.String(), `"block_code":"release.store.write_failed"`) {
		t.Fatalf("the failed block is not logged with both codes: %s", b.logs.String())
	}
	if s := b.snap(t, "evt-bretry"); s.Blocked != nil {
		t.Fatalf("blocked record written despite the failure: %+v", s.Blocked)
	}
	if due := b.due(t); len(due) != 0 {
		t.Fatalf("unexpected wake entries: %+v", due)
	}
	// The returned message runs the step again: it meets the used-up
	// request and blocks the release.
	b.clock.Advance(30 * time.Second)
	err = b.runFail(t, "evt-bretry", release.CodeAttemptsExhausted)
	if core.IsRetryable(err) {
		t.Fatal("the retried step's error must be final")
	}
	s := b.snap(t, "evt-bretry")
	if s.Blocked == nil || s.Blocked.Code != release.CodeAttemptsExhausted {
		t.Fatalf("release not blocked after the retry: %+v", s.Blocked)
	}
	blocked, err := b.c.Blocked(b.ctx, "evt-bretry")
	if err != nil || !blocked {
		t.Fatalf("Blocked = %v, %v", blocked, err)
	}
	// A lost race (release.block.lost) is retried the same way.
	b2, _ := evidenceFailsForGood(t, "evt-blost")
	failBlocked(b2, 1, release.ErrConflict)
	_, err = b2.c.RunNextRelease(b2.ctx, "evt-blost")
	wantCode(t, err, release.CodeBlockLost)
	if !core.IsRetryable(err) {
		t.Fatal("release.block.lost must be retryable")
	}
}

// TestAcknowledgedEvidenceFailureEndsRelease (dev/proof/sim seed 62877
// on main e3ebf34): the evidence request failed for good, its release was
// never blocked (the block's write failed) and the operator acknowledged
// the failed evidence record, which starts the texts' retention. Once the
// texts are gone the producer sends the plan again (a late duplicate):
// the step must report the release ended (waiting, no wake) and write
// nothing; before the fix it blocked the release (result.source_missing),
// a fresh blocked record that paged for a release already handled.
func TestAcknowledgedEvidenceFailureEndsRelease(t *testing.T) {
	b, plan := evidenceFailsForGood(t, "evt-evack")
	failBlocked(b, -1, errors.New("table unavailable"))
	if _, err := b.c.RunNextRelease(b.ctx, "evt-evack"); err == nil {
		t.Fatal("want the step to fail")
	}
	b.store.FailPuts(nil)
	if got := needsAttention(t, b, "evt-evack"); len(got) != 1 || !strings.HasPrefix(got[0], release.SKEvidencePrefix) {
		t.Fatalf("attention before the acknowledgement: %v", got)
	}
	if _, err := release.Acknowledge(b.ctx, b.store, "evt-evack", "", opARN, "provider down for good", core.Millis(b.clock.Now())); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(8 * 24 * time.Hour)
	if n := b.store.DeleteTexts("evt-evack"); n == 0 {
		t.Fatal("no texts deleted")
	}
	before := b.snap(t, "evt-evack")
	for i := 0; i < 2; i++ {
		in, err := b.c.IngestInput(b.ctx, contract.DetailPlanAccepted, b.fx.Detail(plan.PlanPayload()))
		if err != nil || in.Changed {
			t.Fatalf("late duplicate plan: %+v, %v", in, err)
		}
		o, err := b.c.RunInput(b.ctx, in)
		if err != nil || o.Status != release.OutcomeWaiting || o.Changed || !o.WakeAt.IsZero() {
			t.Fatalf("run after acknowledgement and expiry = %+v, %v", o, err)
		}
		if o, err := b.c.Deliver(b.ctx, "evt-evack"); err != nil || o.Status != release.OutcomeWaiting {
			t.Fatalf("stray deliver after acknowledgement = %+v, %v", o, err)
		}
	}
	after := b.snap(t, "evt-evack")
	if after.Blocked != nil {
		t.Fatalf("acknowledged release blocked again: %+v", after.Blocked)
	}
	if got := needsAttention(t, b, "evt-evack"); len(got) != 0 {
		t.Fatalf("attention after the late input: %v", got)
	}
	for id, e := range after.Evidence {
		if e.Version != before.Evidence[id].Version {
			t.Fatalf("evidence record rewritten: %+v", e)
		}
	}
	if due := b.due(t); len(due) != 0 {
		t.Fatalf("the ended release wakes: %+v", due)
	}
}

// TestSupersededEvidenceFailureDoesNotEndRelease: an acknowledged failed
// evidence record of another evidence revision does not end the release:
// a run under the new revision makes a new request and approves.
func TestSupersededEvidenceFailureDoesNotEndRelease(t *testing.T) {
	b, _ := evidenceFailsForGood(t, "evt-evrev")
	b.runErr(t, "evt-evrev", "evidence.http_503")
	if _, err := release.Acknowledge(b.ctx, b.store, "evt-evrev", "", opARN, "revision 1 given up", core.Millis(b.clock.Now())); err != nil {
		t.Fatal(err)
	}
	b.reconfigure(t, func(_ *release.Dependencies, cfg *release.Config) { cfg.EvidenceRevision = "rev-2" })
	if o := b.run(t, "evt-evrev"); o.Status != release.OutcomeDeliveryReady {
		t.Fatalf("run under the new revision = %+v", o)
	}
}

// TestAcknowledgedDeliveryFailureEndsRelease: a prepared delivery failed
// for good and was acknowledged while the release was not blocked (its
// block's write failed every time); a later step reports the release
// ended and blocks nothing.
func TestAcknowledgedDeliveryFailureEndsRelease(t *testing.T) {
	b := setup(t)
	b.reconfigure(t, func(_ *release.Dependencies, cfg *release.Config) { cfg.DeliveryMaxAttempts = 1 })
	plan := releasetest.NewPlan("evt-dack", "de-DE")
	b.ingestPlan(t, plan)
	b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{})
	if o := b.run(t, "evt-dack"); o.Status != release.OutcomeDeliveryReady {
		t.Fatalf("%+v", o)
	}
	b.cms.FailFirst = 100
	failBlocked(b, -1, errors.New("table unavailable"))
	if _, err := b.c.Deliver(b.ctx, "evt-dack"); err == nil || !core.IsRetryable(err) {
		t.Fatalf("deliver whose block failed = %v, want retryable", err)
	}
	b.store.FailPuts(nil)
	if _, err := release.Acknowledge(b.ctx, b.store, "evt-dack", "", opARN, "CMS refused", core.Millis(b.clock.Now())); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(8 * 24 * time.Hour)
	b.store.DeleteTexts("evt-dack")
	if o, err := b.c.RunNextRelease(b.ctx, "evt-dack"); err != nil || o.Status != release.OutcomeWaiting {
		t.Fatalf("run after the acknowledgement = %+v, %v", o, err)
	}
	if o, err := b.c.Deliver(b.ctx, "evt-dack"); err != nil || o.Status != release.OutcomeWaiting {
		t.Fatalf("deliver after the acknowledgement = %+v, %v", o, err)
	}
	if s := b.snap(t, "evt-dack"); s.Blocked != nil || b.cms.Sends != 1 {
		t.Fatalf("blocked %+v, %d sends", s.Blocked, b.cms.Sends)
	}
}
