package release_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

// failKind makes the store refuse writes of records of type T with err.
func failKind[T release.Record](b *bundle, err error) {
	b.store.FailPuts(func(rec release.Record) error {
		if _, ok := rec.(T); ok {
			return err
		}
		return nil
	})
}

var errDown = errors.New("table unavailable")

func readyBundle(t *testing.T, eventID string) (*bundle, releasetest.PlanSpec) {
	t.Helper()
	b := setup(t)
	plan := releasetest.NewPlan(eventID, "de-DE")
	b.ingestPlan(t, plan)
	b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{})
	return b, plan
}

func TestStoreFaults(t *testing.T) {
	tests := []struct {
		name      string
		arrange   func(b *bundle)
		act       func(b *bundle) error
		code      string
		retryable bool
	}{
		{"evidence write down", func(b *bundle) { failKind[*release.EvidenceRecord](b, errDown) },
			func(b *bundle) error { _, err := b.c.RunNextRelease(b.ctx, "evt-s"); return err }, "evidence.state.write_failed", true},
		{"approval write conflict", func(b *bundle) { failKind[*release.ApprovalRecord](b, release.ErrConflict) },
			func(b *bundle) error { _, err := b.c.RunNextRelease(b.ctx, "evt-s"); return err }, "release.approval.conflict", true},
		{"approval write down", func(b *bundle) { failKind[*release.ApprovalRecord](b, errDown) },
			func(b *bundle) error { _, err := b.c.RunNextRelease(b.ctx, "evt-s"); return err }, "release.store.write_failed", true},
		{"delivery prepare down", func(b *bundle) { failKind[*release.DeliveryRecord](b, errDown) },
			func(b *bundle) error {
				// The approving step, its approval settled, then the run
				// that prepares the delivery.
				o, err := b.c.RunNextRelease(b.ctx, "evt-s")
				if err == nil {
					err = b.c.SettleApproval(b.ctx, "evt-s", o.JobID, o.ApprovalID, !o.Tallied)
				}
				if err == nil {
					_, err = b.c.RunNextRelease(b.ctx, "evt-s")
				}
				return err
			}, "cms.delivery.write_failed", true},
		{"delivery not prepared", func(b *bundle) {},
			func(b *bundle) error { _, err := b.c.Deliver(b.ctx, "evt-s"); return err }, release.CodeDeliveryMissing, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, _ := readyBundle(t, "evt-s")
			tt.arrange(b)
			err := tt.act(b)
			wantCode(t, err, tt.code)
			if core.IsRetryable(err) != tt.retryable {
				t.Fatalf("retryable = %v", core.IsRetryable(err))
			}
		})
	}
	// A refused approval write leaves the evidence retryable.
	b, _ := readyBundle(t, "evt-s2")
	failKind[*release.ApprovalRecord](b, release.ErrConflict)
	_, _ = b.c.RunNextRelease(b.ctx, "evt-s2")
	if rec := b.onlyEvidence(t, "evt-s2"); rec.Status != release.StateRetryWait || rec.LastErrorCode != "release.approval.conflict" {
		t.Fatalf("%+v", rec)
	}
}

func TestIngestStoreFaults(t *testing.T) {
	b := setup(t)
	failKind[*release.SourceRecord](b, errDown)
	_, _, err := b.c.Ingest(b.ctx, "localeflow.plan.accepted", b.fx.Detail(releasetest.NewPlan("evt-i", "de-DE").PlanPayload()))
	wantCode(t, err, "coordinator.store.write_failed")
	if !core.IsRetryable(err) {
		t.Fatal("store outage must be retryable")
	}
	// A concurrent writer won the plan: the same payload is a no-op.
	b.store.FailPuts(nil)
	plan := releasetest.NewPlan("evt-c", "de-DE")
	b.ingestPlan(t, plan)
	_, changed, err := b.c.Ingest(b.ctx, "localeflow.plan.accepted", b.fx.Detail(plan.PlanPayload()))
	if err != nil || changed {
		t.Fatalf("%v %v", changed, err)
	}
}

func TestDeliveryLeaseFaults(t *testing.T) {
	t.Run("claim lost", func(t *testing.T) {
		b, _ := readyBundle(t, "evt-d1")
		b.run(t, "evt-d1")
		failKind[*release.DeliveryRecord](b, release.ErrConflict)
		_, err := b.c.Deliver(b.ctx, "evt-d1")
		wantCode(t, err, release.CodeDeliveryClaimLost)
		if b.cms.Sends != 0 {
			t.Fatal("sent without the lease")
		}
	})
	t.Run("finish lost", func(t *testing.T) {
		b, _ := readyBundle(t, "evt-d2")
		b.run(t, "evt-d2")
		puts := 0
		b.store.FailPuts(func(rec release.Record) error {
			if _, ok := rec.(*release.DeliveryRecord); ok {
				if puts++; puts > 1 {
					return release.ErrConflict
				}
			}
			return nil
		})
		_, err := b.c.Deliver(b.ctx, "evt-d2")
		wantCode(t, err, release.CodeDeliveryFinishLost)
	})
	t.Run("send outlives the lease", func(t *testing.T) {
		b, _ := readyBundle(t, "evt-d3")
		b.run(t, "evt-d3")
		b.reconfigure(t, func(d *release.Dependencies, _ *release.Config) { d.CMS = slowCMS{b} })
		_, err := b.c.Deliver(b.ctx, "evt-d3")
		wantCode(t, err, release.CodeDeliveryLeaseExpired)
		// The expired lease is retried by the next attempt.
		b.reconfigure(t, func(d *release.Dependencies, _ *release.Config) { d.CMS = b.cms })
		if o, err := b.c.Deliver(b.ctx, "evt-d3"); err != nil || o.Status != release.OutcomeDelivered {
			t.Fatalf("%+v %v", o, err)
		}
	})
	t.Run("bundle no longer matches", func(t *testing.T) {
		b, _ := readyBundle(t, "evt-d4")
		b.run(t, "evt-d4")
		s := b.snap(t, "evt-d4")
		d := *s.Delivery
		d.BundleSHA256, d.Version = strings.Repeat("0", 64), d.Version+1
		if err := b.store.Put(b.ctx, &d, d.Version-1); err != nil {
			t.Fatal(err)
		}
		_, err := b.c.Deliver(b.ctx, "evt-d4")
		wantCode(t, err, "cms.delivery.bundle_mismatch")
	})
}

type slowCMS struct{ b *bundle }

func (s slowCMS) Deliver(ctx context.Context, site, event string, body []byte) error {
	s.b.clock.Advance(release.DefaultEvidenceLease)
	return s.b.cms.Deliver(ctx, site, event, body)
}

func TestCorruptRecords(t *testing.T) {
	tests := []struct {
		name    string
		corrupt func(s release.Snapshot) release.Record
		code    string
	}{
		{"result missing", func(s release.Snapshot) release.Record { return nil }, "result.missing"},
		{"result of another plan", func(s release.Snapshot) release.Record {
			r := *s.Results["job-de-DE"]
			r.PlanID = "plan-x"
			return &r
		}, "result.plan_mismatch"},
		{"result json corrupt", func(s release.Snapshot) release.Record {
			r := *s.Results["job-de-DE"]
			r.ResultJSON = `{"candidate":1}`
			return &r
		}, "result.invalid"},
		{"result hash wrong", func(s release.Snapshot) release.Record {
			r := *s.Results["job-de-DE"]
			r.ResultSHA256 = strings.Repeat("0", 64)
			return &r
		}, release.CodeResultJobMismatch},
		{"source text changed", func(s release.Snapshot) release.Record {
			r := *s.Sources["job-de-DE"]
			r.Text = "other"
			return &r
		}, "result.source_mismatch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := setup(t)
			plan := releasetest.NewPlan("evt-k", "de-DE")
			b.ingestPlan(t, plan)
			if tt.code == "result.missing" {
				// A succeeded status without its result record.
				job := &release.JobRecord{EventID: "evt-k", PlanID: plan.PlanID, JobID: "job-de-DE", Status: release.JobSucceeded, PayloadSHA256: strings.Repeat("1", 64), Version: 1}
				if err := b.store.Put(b.ctx, job, 0); err != nil {
					t.Fatal(err)
				}
			} else {
				b.ingestResult(t, plan, "de-DE", releasetest.ResultOptions{})
				s := b.snap(t, "evt-k")
				rec := tt.corrupt(s)
				rec2 := bump(rec)
				if err := b.store.Put(b.ctx, rec2, rec2.RecordVersion()-1); err != nil {
					t.Fatal(err)
				}
			}
			b.runErr(t, "evt-k", tt.code)
		})
	}
}

func bump(rec release.Record) release.Record {
	switch r := rec.(type) {
	case *release.ResultRecord:
		r.Version++
	case *release.SourceRecord:
		r.Version++
	}
	return rec
}

func TestValidateConfig(t *testing.T) {
	tests := []struct {
		name   string
		change func(d *release.Dependencies, cfg *release.Config)
		code   string
	}{
		{"no store", func(d *release.Dependencies, _ *release.Config) { d.Store = nil }, release.CodeConfig},
		{"no verifier", func(d *release.Dependencies, _ *release.Config) { d.Verifiers.HumanReview = nil }, release.CodeConfig},
		{"bad revision", func(_ *release.Dependencies, cfg *release.Config) { cfg.EvidenceRevision = "" }, release.CodeRevisionInvalid},
		{"bad worker", func(_ *release.Dependencies, cfg *release.Config) { cfg.WorkerID = strings.Repeat("w", 129) }, release.CodeWorkerIDInvalid},
		{"lease too long", func(_ *release.Dependencies, cfg *release.Config) { cfg.EvidenceLease = 2 * time.Hour }, release.CodeEvidenceLeaseInvalid},
		{"attempts 0", func(_ *release.Dependencies, cfg *release.Config) { cfg.EvidenceMaxAttempts = 0 }, release.CodeMaxAttemptsInvalid},
		{"delivery attempts 21", func(_ *release.Dependencies, cfg *release.Config) { cfg.DeliveryMaxAttempts = 21 }, release.CodeDeliveryMaxAttempts},
		{"ttl 0", func(_ *release.Dependencies, cfg *release.Config) { cfg.ApprovalTTL = 0 }, release.CodeApprovalTTLInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := setup(t)
			deps, cfg := b.deps, b.cfg
			tt.change(&deps, &cfg)
			c, err := release.NewCoordinator(deps, b.clock, b.log, cfg)
			wantCode(t, err, tt.code)
			if c != nil {
				t.Fatal("NewCoordinator returned a coordinator with an invalid wiring")
			}
		})
	}
	// A coordinator that was not built by NewCoordinator refuses every step.
	var zero release.Coordinator
	_, err := zero.RunNextRelease(context.Background(), "evt-1")
	wantCode(t, err, release.CodeConfig)
	_, err = release.NewApprovalAuthority([]byte("short"))
	wantCode(t, err, "release.authority.key_invalid")
	_, err = release.OpenToken(release.ApprovalContext, make([]byte, 32), "v1.x")
	wantCode(t, err, "token.invalid")
}
