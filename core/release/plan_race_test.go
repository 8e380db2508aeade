package release_test

import (
	"context"
	"errors"
	"testing"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

// planRaceStore lets a concurrent delivery of the same plan win the plan
// record write (its Put is refused as a conflict), then fails the read
// that follows, as a store outage would.
type planRaceStore struct {
	*releasetest.MemStore
	winner     func()
	loads      int
	failAtLoad int
}

func (s *planRaceStore) Load(ctx context.Context, eventID string) (release.Snapshot, error) {
	s.loads++
	if s.loads == s.failAtLoad {
		return release.Snapshot{}, errors.New("injected read failure")
	}
	return s.MemStore.Load(ctx, eventID)
}

func (s *planRaceStore) Put(ctx context.Context, rec release.Record, prev int64) error {
	if _, ok := rec.(*release.PlanRecord); ok && s.winner != nil {
		win := s.winner
		s.winner = nil
		win()
	}
	return s.MemStore.Put(ctx, rec, prev)
}

// TestPlanRaceWithAFailedReadIsRetried: two deliveries of one plan raced;
// the loser's plan write was refused and the read that checks the winner's
// payload failed. The loser answered coordinator.plan.conflict, a final
// code that quarantined a validly signed input (found by the simulation's
// "no blanket excuses" checker, seed 199 of the merged default block). A
// failed read is now a retryable store read failure, and the retry finds
// the same plan stored.
func TestPlanRaceWithAFailedReadIsRetried(t *testing.T) {
	b := setup(t)
	st := &planRaceStore{MemStore: b.store}
	b.reconfigure(t, func(d *release.Dependencies, _ *release.Config) { d.Store = st })
	plan := releasetest.NewPlan("evt-race", "de-DE", "fr-FR")
	detail := b.fx.Detail(plan.PlanPayload())
	winner, err := release.NewCoordinator(release.Dependencies{
		Store: b.store, EventKey: b.deps.EventKey, Evidence: b.deps.Evidence, CMS: b.deps.CMS,
		Verifiers: b.deps.Verifiers, Approval: b.deps.Approval, Publication: b.deps.Publication,
	}, b.clock, b.log, b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	st.winner = func() {
		if _, _, err := winner.Ingest(b.ctx, contract.DetailPlanAccepted, detail); err != nil {
			t.Errorf("winner: %v", err)
		}
	}
	st.failAtLoad = 2 // the first Load finds no plan; the second follows the refused write
	_, _, err = b.c.Ingest(b.ctx, contract.DetailPlanAccepted, detail)
	if core.HasCode(err, release.CodePlanConflict) || !core.IsRetryable(err) {
		t.Fatalf("loser after a failed read = %v; want a retryable store read failure", err)
	}
	if _, _, err := b.c.Ingest(b.ctx, contract.DetailPlanAccepted, detail); err != nil {
		t.Fatalf("retry = %v; want the same plan found stored", err)
	}
}
