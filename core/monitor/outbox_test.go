package monitor_test

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/lifecycle"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/monitor/memstore"
)

// announceOwed asserts the outcome owed for id, announces it and checks that it
// is no longer owed.
func announceOwed(t *testing.T, b bundle, id string, state monitor.State, code string) monitor.Announcement {
	t.Helper()
	ctx := context.Background()
	a, ok, err := b.svc.Announcement(ctx, id)
	if err != nil || !ok {
		t.Fatalf("Announcement(%s) = %v, %v: the outcome is not owed", id, ok, err)
	}
	if a.EventID != id || a.State != state || a.ErrorCode != code || a.OutcomeID != monitor.OutcomeID(id, state, a.FinishedMS) {
		t.Fatalf("announcement = %+v, want %s/%s", a, state, code)
	}
	// The sweep sees it once the grace has passed.
	b.clock.Advance(monitor.OutboxGrace)
	ids, err := b.svc.OwedOutcomes(ctx, 10)
	if err != nil || len(ids) != 1 || ids[0] != id {
		t.Fatalf("OwedOutcomes = %v, %v", ids, err)
	}
	again, _, _ := b.svc.Announcement(ctx, id)
	if again.OutcomeID != a.OutcomeID {
		t.Fatalf("outcome id changed between reads: %s then %s", a.OutcomeID, again.OutcomeID)
	}
	if err := b.svc.Announced(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := b.svc.Announcement(ctx, id); ok || err != nil {
		t.Fatalf("still owed after Announced: %v, %v", ok, err)
	}
	if ids, _ := b.svc.OwedOutcomes(ctx, 10); len(ids) != 0 {
		t.Fatalf("OwedOutcomes after Announced = %v", ids)
	}
	return a
}

func TestOutcomeOwedAfterReclaimToFailed(t *testing.T) {
	ctx := context.Background()
	b := setup(t, monitor.Config{Lease: time.Minute})
	register(t, b, "evt-1")
	for i := 1; i <= 5; i++ {
		c := claimOne(t, b, "evt-1")
		b.clock.Set(c.LeaseExpires)
		out, err := b.svc.PollOnce(ctx, "evt-1", reader())
		if err != nil || out.Polled {
			t.Fatalf("reclaim %d = %+v, %v", i, out, err)
		}
		if i < 5 {
			if out.Owed != nil {
				t.Fatalf("reclaim %d owes an outcome: %+v", i, out.Owed)
			}
			b.clock.Set(out.NextPoll)
			continue
		}
		if out.State != monitor.StateFailed || out.Owed == nil || out.Owed.ErrorCode != monitor.ReclaimErrorCode {
			t.Fatalf("reclaim to failed = %+v (owed %+v)", out, out.Owed)
		}
	}
	announceOwed(t, b, "evt-1", monitor.StateFailed, monitor.ReclaimErrorCode)
}

func TestOutcomeOwedAfterStateInvalid(t *testing.T) {
	ctx := context.Background()
	b := setup(t, monitor.Config{})
	register(t, b, "evt-1")
	b.store.Tamper("evt-1", func(r *monitor.Record) { r.JobCount = 9 })
	_, err := b.svc.PollOnce(ctx, "evt-1", reader())
	wantCode(t, err, monitor.CodeStateInvalid)
	a := announceOwed(t, b, "evt-1", monitor.StateFailed, monitor.CodeStateInvalid)
	if a.SiteID != "" || a.PlanID != "" {
		t.Fatalf("announcement of an invalid record carries its identity: %+v", a)
	}
}

func TestOutcomeOwedAfterTerminalPollAndRegistration(t *testing.T) {
	ctx := context.Background()
	b := setup(t, monitor.Config{})
	register(t, b, "evt-1")
	out, err := b.svc.PollOnce(ctx, "evt-1", reader(answer("published")))
	if err != nil || out.State != monitor.StateTerminal || out.Owed == nil || out.Owed.RemoteStatus != "published" ||
		out.Owed.SiteID != "site-berlin" || out.Owed.PlanID != "plan-42" || out.Owed.LifecycleSHA256 == "" {
		t.Fatalf("terminal poll = %+v (owed %+v), %v", out, out.Owed, err)
	}
	a := announceOwed(t, b, "evt-1", monitor.StateTerminal, "")
	if a.OutcomeID != out.Owed.OutcomeID {
		t.Fatalf("outcome id of the poll %s differs from the stored one %s", out.Owed.OutcomeID, a.OutcomeID)
	}

	d, err := monitor.ParseDispatched([]byte(detail(t, "evt-2", "cancelled")))
	if err != nil {
		t.Fatal(err)
	}
	st, err := b.svc.Register(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.Announcement(); !ok {
		t.Fatalf("terminal registration owes no outcome: %+v", st)
	}
	announceOwed(t, b, "evt-2", monitor.StateTerminal, "")
}

func TestAnnouncedKeepsANewerOutcome(t *testing.T) {
	ctx := context.Background()
	b := setup(t, monitor.Config{})
	register(t, b, "evt-1")
	out, err := b.svc.PollOnce(ctx, "evt-1", reader(answer("published")))
	if err != nil || out.Owed == nil {
		t.Fatalf("poll = %+v, %v", out, err)
	}
	stale := *out.Owed
	stale.FinishedMS--
	if err := b.svc.Announced(ctx, stale); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := b.svc.Announcement(ctx, "evt-1"); !ok {
		t.Fatal("a stale Announced cleared the outbox")
	}
}

// A record written by another schema version, or without one, is refused
// before it is leased and left exactly as it was: it stays listed as due
// (only an operator may change it), every poll refuses it again, and
// health is blocked.
func TestSchemaAlteredRecordIsNeverLeased(t *testing.T) {
	for _, version := range []int{monitor.SchemaVersion + 1, 0} {
		t.Run(fmt.Sprint(version), func(t *testing.T) {
			ctx := context.Background()
			b := setup(t, monitor.Config{Lease: time.Minute})
			register(t, b, "evt-1")
			b.store.Tamper("evt-1", func(r *monitor.Record) { r.SchemaVersion = version })
			planted, _ := b.store.Get(ctx, "evt-1")
			_, err := b.svc.PollOnce(ctx, "evt-1", reader())
			wantCode(t, err, monitor.CodeSchemaAltered)
			b.clock.Advance(time.Hour)
			if ids, err := b.svc.Due(ctx, 10); err != nil || len(ids) != 1 {
				t.Fatalf("due = %v, %v", ids, err)
			}
			_, err = b.svc.PollOnce(ctx, "evt-1", reader())
			wantCode(t, err, monitor.CodeSchemaAltered)
			if _, err := b.svc.Status(ctx, "evt-1"); !core.HasCode(err, monitor.CodeSchemaAltered) {
				t.Fatalf("status: %v", err)
			}
			if rec, _ := b.store.Get(ctx, "evt-1"); !reflect.DeepEqual(rec, planted) {
				t.Fatalf("record of another schema version was changed: %+v", rec)
			}
			h, err := b.svc.Health(ctx)
			if err != nil || h.Status != monitor.HealthBlocked || h.Failed != 1 || h.ExpiredLeases != 0 {
				t.Fatalf("health = %+v, %v", h, err)
			}
		})
	}
}

// A finishing write whose claim's failure limit, failure count or attempt
// differs from the stored record is claim_lost: it never writes a failure
// count the record's own limit forbids.
func TestFinishFencesOnTheWholeClaim(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		edit func(*monitor.Claim)
	}{
		{"raised failure limit", func(c *monitor.Claim) { c.MaxConsecutiveFailures, c.ConsecutiveFailures = 20, 5 }},
		{"other failure count", func(c *monitor.Claim) { c.ConsecutiveFailures = 3 }},
		{"other attempt", func(c *monitor.Claim) { c.Attempt = 7 }},
		{"other identity", func(c *monitor.Claim) { c.PlanID = "plan-other" }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := setup(t, monitor.Config{})
			register(t, b, "evt-1")
			c := claimOne(t, b, "evt-1")
			held, _ := b.store.Get(ctx, "evt-1")
			forged := c
			tt.edit(&forged)
			_, err := b.svc.Retry(ctx, forged, "cms.timeout")
			wantCode(t, err, monitor.CodeClaimLost)
			_, err = b.svc.Fail(ctx, forged, "cms.http_404")
			wantCode(t, err, monitor.CodeClaimLost)
			rec, _ := b.store.Get(ctx, "evt-1")
			if rec.State != monitor.StateLeased || rec.ConsecutiveFailures != held.ConsecutiveFailures || rec.UpdatedMS != held.UpdatedMS {
				t.Fatalf("forged claim changed the record: %+v", rec)
			}
			// The real claim still finishes.
			if st, err := b.svc.Retry(ctx, c, "cms.timeout"); err != nil || st.State != monitor.StateRetryWait {
				t.Fatalf("retry with the real claim = %+v, %v", st, err)
			}
		})
	}
}

// oversizeReader answers with a lifecycle response whose snapshot is above
// the cap (as a client that skipped the check would).
type oversizeReader struct{}

func (oversizeReader) Timeout() time.Duration { return time.Second }

func (oversizeReader) ReadLifecycle(_ context.Context, target lifecycle.Target) (lifecycle.Response, error) {
	body := lifecycleBody(target.EventID, "processing", "req-big")
	body = bytes.Replace(body, []byte(`"delivery":null`), []byte(`"delivery":{"note":"`+strings.Repeat("x", lifecycle.MaxSnapshotBytes)+`"}`), 1)
	canonical, err := core.CanonicalizeJSON(body)
	if err != nil {
		return lifecycle.Response{}, err
	}
	return lifecycle.Response{RequestID: "req-big", EventID: target.EventID, SiteID: target.SiteID, PlanID: target.PlanID,
		WebsiteVersion: target.WebsiteVersion, SourceSequence: target.SourceSequence, Status: "processing",
		Canonical: canonical, SHA256: core.SHA256Hex(canonical)}, nil
}

// An answer above the snapshot cap is refused before anything is written:
// the change fails with response_invalid at once instead of looping
// through lease expiries on a store that cannot hold it.
func TestOversizeAnswerFailsAsResponseInvalid(t *testing.T) {
	ctx := context.Background()
	b := setup(t, monitor.Config{})
	register(t, b, "evt-1")
	out, err := b.svc.PollOnce(ctx, "evt-1", oversizeReader{})
	if err != nil || out.State != monitor.StateFailed || out.ErrorCode != monitor.CodeResponseInvalid {
		t.Fatalf("poll = %+v, %v", out, err)
	}
	rec, _ := b.store.Get(ctx, "evt-1")
	if rec.Lifecycle != nil {
		t.Fatalf("oversize snapshot was stored (%d bytes)", len(rec.Lifecycle))
	}
}

// rejectingStore refuses every finishing write that stores a snapshot, as
// DynamoDB refuses an item above its size limit.
type rejectingStore struct{ *memstore.Store }

func (s rejectingStore) Transition(ctx context.Context, f monitor.Fence, u monitor.Update) (monitor.Record, error) {
	if u.SetSnapshot {
		return monitor.Record{}, core.Fail(monitor.CodeStoreRejected)
	}
	return s.Store.Transition(ctx, f, u)
}

// A write the store rejects for good fails the change with
// store_rejected instead of leaving its lease to expire.
func TestStoreRejectedCompletionFailsTheChange(t *testing.T) {
	ctx := context.Background()
	st := rejectingStore{memstore.New()}
	clock := &manualClock{now: t0}
	svc, err := monitor.NewService(st, clock, nil, monitor.Config{})
	if err != nil {
		t.Fatal(err)
	}
	register(t, bundle{store: st.Store, clock: clock, svc: svc}, "evt-1")
	out, err := svc.PollOnce(ctx, "evt-1", reader(answer("processing")))
	if err != nil || out.State != monitor.StateFailed || out.ErrorCode != monitor.CodeStoreRejected || out.Owed == nil {
		t.Fatalf("poll = %+v, %v", out, err)
	}
}
