package releasedb

import (
	"context"
	"testing"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/dev/localtest"
	"github.com/localeflow/localeflow/topology"
)

// refuseJob refuses, for good, the evidence of one job.
type refuseJob struct {
	next  release.EvidenceProvider
	jobID string
}

func (p refuseJob) Obtain(ctx context.Context, req *contract.EvidenceRequest) ([]byte, error) {
	if req.JobID == p.jobID {
		return nil, core.Fail("http_400")
	}
	return p.next.Obtain(ctx, req)
}

// TestCoordinatorIndexesOnDynamoDB runs the coordinator on DynamoDB Local
// and reads the real sparse indexes: an owed approval's evidence record
// sits in the wake index until the approval is settled, and a release
// blocked for good leaves the wake index and shows in the attention index
// (the parking transaction removes the index keys).
func TestCoordinatorIndexesOnDynamoDB(t *testing.T) {
	localtest.Require(t)
	db, table := newTable(t)
	store := New(db, table)
	ctx := context.Background()
	fx := releasetest.NewFixture()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clock := core.ClockFunc(func() time.Time { return now })
	resp := &releasetest.Responder{Fixture: fx, Clock: clock}
	approval, publication := fx.Authorities()
	deps := release.Dependencies{
		Store: store, EventKey: fx.EventKey, Evidence: releasetest.Provider{Responder: resp}, CMS: &releasetest.CMS{},
		Verifiers: fx.Verifiers(), Approval: approval, Publication: publication,
	}
	cfg := release.DefaultConfig("rev-1", "worker-1")
	c, err := release.NewCoordinator(deps, clock, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	plan := releasetest.NewPlan("evt-ddb", "de-DE", "fr-FR", "it-IT")
	ingest := func(detailType string, payload []byte) {
		t.Helper()
		if _, _, err := c.Ingest(ctx, detailType, fx.Detail(payload)); err != nil {
			t.Fatal(err)
		}
	}
	ingest(contract.DetailPlanAccepted, plan.PlanPayload())
	ingest(contract.DetailJobCompleted, plan.ResultPayload("it-IT", releasetest.ResultOptions{}))
	// it-IT is approved: its event is owed until settled.
	o, err := c.RunNextRelease(ctx, "evt-ddb")
	if err != nil || o.ApprovalID == "" {
		t.Fatalf("%+v %v", o, err)
	}
	waitIndex(t, db, table, topology.IndexWake, []string{"evidence#" + onlyEvidence(t, store, release.StateLeased)})
	if err := c.SettleApproval(ctx, "evt-ddb", "job-it-IT", o.ApprovalID, !o.Tallied); err != nil {
		t.Fatal(err)
	}
	waitIndex(t, db, table, topology.IndexWake, nil)
	// fr-FR waits for a retry; then de-DE, selected first, fails for good.
	resp.FailFirst = resp.Calls() + 1
	ingest(contract.DetailJobCompleted, plan.ResultPayload("fr-FR", releasetest.ResultOptions{}))
	if _, err := c.RunNextRelease(ctx, "evt-ddb"); !core.HasCode(err, "evidence.http_503") {
		t.Fatalf("fr-FR attempt: %v", err)
	}
	ingest(contract.DetailJobCompleted, plan.ResultPayload("de-DE", releasetest.ResultOptions{}))
	waitIndex(t, db, table, topology.IndexWake, []string{"evidence#" + onlyEvidence(t, store, release.StateRetryWait), "job#job-de-DE"})
	deps.Evidence = refuseJob{next: deps.Evidence, jobID: "job-de-DE"}
	if c, err = release.NewCoordinator(deps, clock, nil, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RunNextRelease(ctx, "evt-ddb"); !core.HasCode(err, "evidence.http_400") {
		t.Fatalf("de-DE attempt: %v", err)
	}
	waitIndex(t, db, table, topology.IndexWake, nil)
	snap, err := store.Load(ctx, "evt-ddb")
	if err != nil {
		t.Fatal(err)
	}
	failed := ""
	for id, e := range snap.Evidence {
		if e.Status == release.StateFailed {
			failed = "evidence#" + id
		}
	}
	waitIndex(t, db, table, topology.IndexAttention, []string{release.SKBlocked, failed})
	page, err := store.Due(ctx, core.Millis(now.Add(24*time.Hour)), "", 10)
	if err != nil || len(page.Items) != 0 {
		t.Fatalf("a blocked release is still due: %+v %v", page, err)
	}
}

// TestCompactOwedApprovalOnDynamoDB: an approval (docs/design.md "Owed
// events of compact approvals") is owed through its evidence record: its
// wake entry is what stays while the event is owed, and settling it
// removes that entry.
func TestCompactOwedApprovalOnDynamoDB(t *testing.T) {
	localtest.Require(t)
	db, table := newTable(t)
	store := New(db, table)
	ctx := context.Background()
	fx := releasetest.NewFixture()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clock := core.ClockFunc(func() time.Time { return now })
	approval, publication := fx.Authorities()
	c, err := release.NewCoordinator(release.Dependencies{
		Store: store, EventKey: fx.EventKey, Evidence: releasetest.Provider{Responder: &releasetest.Responder{Fixture: fx, Clock: clock}},
		CMS: &releasetest.CMS{}, Verifiers: fx.Verifiers(), Approval: approval, Publication: publication,
	}, clock, nil, release.DefaultConfig("rev-1", "worker-1"))
	if err != nil {
		t.Fatal(err)
	}
	plan := releasetest.NewPlan("evt-ddb-c", "de-DE", "fr-FR")
	if _, _, err := c.Ingest(ctx, contract.DetailPlanAccepted, fx.Detail(plan.PlanPayload())); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Ingest(ctx, contract.DetailJobCompleted, fx.Detail(plan.ResultPayload("fr-FR", releasetest.ResultOptions{}))); err != nil {
		t.Fatal(err)
	}
	o, err := c.RunNextRelease(ctx, "evt-ddb-c")
	if err != nil || o.ApprovalID == "" {
		t.Fatalf("%+v %v", o, err)
	}
	snap, err := store.Load(ctx, "evt-ddb-c")
	if err != nil {
		t.Fatal(err)
	}
	a := snap.Approvals["job-fr-FR"]
	if !release.ApprovalOwed(a, snap.Evidence[a.RequestID]) {
		t.Fatalf("approval %+v not owed through its evidence", a)
	}
	waitIndex(t, db, table, topology.IndexWake, []string{"evidence#" + a.RequestID})
	if err := c.SettleApproval(ctx, "evt-ddb-c", "job-fr-FR", o.ApprovalID, !o.Tallied); err != nil {
		t.Fatal(err)
	}
	waitIndex(t, db, table, topology.IndexWake, nil)
	if snap, err = store.Load(ctx, "evt-ddb-c"); err != nil || snap.Evidence[a.RequestID].Status != release.StateSucceeded {
		t.Fatalf("evidence after the settle: %+v %v", snap.Evidence[a.RequestID], err)
	}
}

func onlyEvidence(t *testing.T, s *Store, status release.State) string {
	t.Helper()
	snap, err := s.Load(context.Background(), "evt-ddb")
	if err != nil {
		t.Fatal(err)
	}
	for id, e := range snap.Evidence {
		if e.Status == status {
			return id
		}
	}
	t.Fatalf("no %s evidence", status)
	return ""
}
