package release_test

import (
	"context"
	"testing"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

// frozenProvider answers like next, but first runs meanwhile: the calling
// worker is frozen in its evidence call (a GC pause, a frozen execution
// environment) past its lease while the world goes on.
type frozenProvider struct {
	next      release.EvidenceProvider
	meanwhile func()
}

func (p *frozenProvider) Obtain(ctx context.Context, req *contract.EvidenceRequest) ([]byte, error) {
	if f := p.meanwhile; f != nil {
		p.meanwhile = nil
		f()
	}
	return p.next.Obtain(ctx, req)
}

// TestApprovalAfterLeaseIsSafe proves why the approval write (and
// mark_approved) need no evidence lease (docs/design.md "Approvals after
// the evidence lease ended"): worker-1 obtains evidence, then comes back
// after its lease ended. (a) worker-2 took the lease over and approved the
// locale meanwhile: worker-1's approval write is refused
// (release.approval.conflict), so the locale holds one approval, worker-2's.
// (b) nobody took over: worker-1's approval is stored; it binds the result
// the job accepted and the step reports it. Either way, once the stored
// approval's event is settled (its evidence marked succeeded) the next
// step prepares the delivery from it.
func TestApprovalAfterLeaseIsSafe(t *testing.T) {
	for _, takeOver := range []bool{true, false} {
		name := map[bool]string{true: "taken over", false: "not taken over"}[takeOver]
		t.Run(name, func(t *testing.T) {
			b := setup(t)
			plan := releasetest.NewPlan("evt-late", "de-DE")
			b.ingestPlan(t, plan)
			b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{})
			cfg2 := b.cfg
			cfg2.WorkerID = "worker-2"
			w2, err := release.NewCoordinator(b.deps, b.clock, b.log, cfg2)
			if err != nil {
				t.Fatal(err)
			}
			var w2o release.Outcome
			frozen := &frozenProvider{next: b.deps.Evidence, meanwhile: func() {
				b.clock.Advance(b.cfg.EvidenceLease + 10*time.Second)
				if !takeOver {
					return
				}
				var err error
				if w2o, err = w2.RunNextRelease(b.ctx, "evt-late"); err != nil || w2o.ApprovalID == "" {
					t.Fatalf("worker-2: %+v %v", w2o, err)
				}
			}}
			b.reconfigure(t, func(d *release.Dependencies, _ *release.Config) { d.Evidence = frozen })
			o, err := b.c.RunNextRelease(b.ctx, "evt-late")
			s := b.snap(t, "evt-late")
			a := s.Approvals["job-de-DE"]
			if a == nil {
				t.Fatalf("approval %+v", a)
			}
			if a.ResultSHA256 != s.Jobs["job-de-DE"].ResultSHA256 || a.ResultSHA256 != s.Results["job-de-DE"].ResultSHA256 {
				t.Fatalf("the approval binds %s, the job accepted %s", a.ResultSHA256, s.Jobs["job-de-DE"].ResultSHA256)
			}
			if takeOver {
				wantCode(t, err, "release.approval.conflict")
				if !core.IsRetryable(err) || o.ApprovalID != "" || o.Changed {
					t.Fatalf("worker-1 after the take-over: %+v %v", o, err)
				}
				if a.ApprovalID != w2o.ApprovalID || a.RequestID == "" {
					t.Fatalf("stored approval %s, worker-2 approved %s", a.ApprovalID, w2o.ApprovalID)
				}
			} else {
				// The approval stands and is reported.
				if err != nil || o.Status != release.OutcomeApproved || o.ApprovalID != a.ApprovalID || !o.Changed {
					t.Fatalf("worker-1: %+v %v", o, err)
				}
				w2o = o
			}
			// The stored approval's event published and settled.
			b.settle(t, w2o)
			// Either way the next step goes on from the one approval.
			next, err := w2.RunNextRelease(b.ctx, "evt-late")
			if err != nil || next.Status != release.OutcomeDeliveryReady {
				t.Fatalf("next step: %+v %v", next, err)
			}
			s = b.snap(t, "evt-late")
			if got := s.Approvals["job-de-DE"]; got.ApprovalID != a.ApprovalID {
				t.Fatalf("approval replaced: %s, was %s", got.ApprovalID, a.ApprovalID)
			}
			for _, e := range s.Evidence {
				if e.Status != release.StateSucceeded {
					t.Fatalf("evidence %+v", e)
				}
			}
		})
	}
}
