package monitordb

import (
	"context"
	"testing"
	"time"

	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/monitor/monitortest"
	"github.com/localeflow/localeflow/dev/localtest"
)

// TestRetentionExpiresOnlyFinishedRecordsWithoutAttention: finished
// records were kept forever, so the table grew without bound. A finishing
// write now sets expires_at (the table's TTL) = finish + retention on a
// change that ended well, and never on one that needs attention (a remote
// failure or a failure).
func TestRetentionExpiresOnlyFinishedRecordsWithoutAttention(t *testing.T) {
	localtest.Require(t)
	db, table := newTable(t)
	base, err := New(db, table)
	if err != nil {
		t.Fatal(err)
	}
	const retention = 90 * 24 * time.Hour
	store := base.WithRetention(retention)
	ctx := context.Background()
	now := monitortest.T0 + 1_000
	finish := func(id, status string, state monitor.State, code string) monitor.Record {
		t.Helper()
		if _, ok, err := store.Create(ctx, monitortest.NewRecord(id, monitortest.T0)); err != nil || !ok {
			t.Fatalf("create %s: %v %v", id, ok, err)
		}
		held, ok, err := store.Claim(ctx, id, monitor.Lease{Owner: "w1", Token: "tok-" + id, NowMS: now, ExpiresMS: now + 60_000})
		if err != nil || !ok {
			t.Fatalf("claim %s: %v %v", id, ok, err)
		}
		u := monitor.Update{State: state, ConsecutiveFailures: 0, NextPollMS: now + 1, LastErrorCode: code, UpdatedMS: now + 1}
		if status != "" {
			snap := monitortest.Snapshot(held, status)
			u.SetSnapshot, u.RemoteStatus, u.LifecycleSHA256, u.Lifecycle = true, snap.Status, snap.SHA256, snap.Canonical
		}
		if state == monitor.StateFailed {
			u.ConsecutiveFailures = 1
		}
		got, err := store.Transition(ctx, monitor.FenceOf(held, now+1), u)
		if err != nil {
			t.Fatalf("transition %s: %v", id, err)
		}
		if _, err := monitor.Validate(got); err != nil {
			t.Fatalf("%s does not validate: %v", id, err)
		}
		return got
	}
	if got := finish("evt-published", "published", monitor.StateTerminal, ""); got.ExpiresAt != ExpiresAt(now+1, retention) {
		t.Errorf("published: expires_at %d, want %d", got.ExpiresAt, ExpiresAt(now+1, retention))
	}
	if got := finish("evt-blocked", "publication_blocked", monitor.StateTerminal, ""); got.ExpiresAt != 0 {
		t.Errorf("publication_blocked needs attention but expires at %d", got.ExpiresAt)
	}
	if got := finish("evt-failed", "", monitor.StateFailed, "cms.http_503"); got.ExpiresAt != 0 {
		t.Errorf("failed needs attention but expires at %d", got.ExpiresAt)
	}
	if got := finish("evt-watching", "processing", monitor.StateWatching, ""); got.ExpiresAt != 0 {
		t.Errorf("an open record expires at %d", got.ExpiresAt)
	}
}

// TestRetentionExpiresChangesFinalAtRegistration: a change superseded or
// cancelled at registration is written final by Create, which did not set
// expires_at, so such records were kept forever.
func TestRetentionExpiresChangesFinalAtRegistration(t *testing.T) {
	localtest.Require(t)
	db, table := newTable(t)
	base, err := New(db, table)
	if err != nil {
		t.Fatal(err)
	}
	const retention = 90 * 24 * time.Hour
	store := base.WithRetention(retention)
	ctx := context.Background()
	rec := monitortest.NewRecord("evt-superseded", monitortest.T0)
	rec.State, rec.RemoteStatus = monitor.StateTerminal, "superseded"
	rec.OutboxMS = rec.UpdatedMS
	if _, ok, err := store.Create(ctx, rec); err != nil || !ok {
		t.Fatalf("create: %v %v", ok, err)
	}
	got, err := store.Get(ctx, rec.EventID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ExpiresAt != ExpiresAt(rec.UpdatedMS, retention) {
		t.Errorf("expires_at %d, want %d", got.ExpiresAt, ExpiresAt(rec.UpdatedMS, retention))
	}
	if _, err := monitor.Validate(got); err != nil {
		t.Errorf("does not validate: %v", err)
	}
}
