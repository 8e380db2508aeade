package release_test

import (
	"context"
	"testing"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

// racingCopy is a store on which a copy of the same job input (SQS
// delivers duplicates) wins the race: just before the ingestion under
// test writes the job's result or its job record for the first time, the
// copy's identical write goes in.
type racingCopy struct {
	release.Store
	sk    string // the sort key the copy writes first
	raced bool
}

func (r *racingCopy) Put(ctx context.Context, rec release.Record, prev int64) error {
	if _, sk := rec.Key(); sk == r.sk && prev == 0 && !r.raced {
		r.raced = true
		if err := r.Store.Put(ctx, rec, 0); err != nil {
			return err
		}
	}
	return r.Store.Put(ctx, rec, prev)
}

// TestRacingCopyOfAJobInputIsADuplicate: a job input whose plan is not
// stored yet is read first (not written first); when a racing copy of
// the same input creates the result or the job record between that read
// and this ingestion's create, the create is refused — and the ingestion
// reads again and goes on as from a read (an identical input: a
// duplicate, acknowledged), as a written-first input does. It returned
// the conflict as an error: the message was received again, and on its
// last receive a validly signed input went to the DLQ with no fault to
// explain it (adapters seed 1744 on 4cb9354; this test failed before the
// fix with release.store.conflict).
func TestRacingCopyOfAJobInputIsADuplicate(t *testing.T) {
	for _, sk := range []string{release.SKResultPrefix + "job-de-DE", release.SKJobPrefix + "job-de-DE"} {
		t.Run(sk, func(t *testing.T) {
			b := setup(t)
			store := &racingCopy{Store: b.store, sk: sk}
			b.reconfigure(t, func(d *release.Dependencies, _ *release.Config) { d.Store = store })
			plan := releasetest.NewPlan("evt-race", "de-DE")
			// The job's completion before its plan: nothing to write first.
			detail := b.fx.Detail(plan.ResultPayload("de-DE", releasetest.ResultOptions{}))
			if _, _, err := b.c.Ingest(b.ctx, contract.DetailJobCompleted, detail); err != nil {
				t.Fatalf("the losing copy of a duplicate input failed: %v", err)
			}
			if !store.raced {
				t.Fatal("the racing copy never wrote: the test does not reach the race")
			}
			snap := b.snap(t, "evt-race")
			if j := snap.Jobs["job-de-DE"]; j == nil || j.Status != release.JobSucceeded || snap.Results["job-de-DE"] == nil {
				t.Fatalf("after the race: job %+v, result stored %v", j, snap.Results["job-de-DE"] != nil)
			}
		})
	}
}
