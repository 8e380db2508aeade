package releasetest

import (
	"context"
	"testing"
	"time"

	"github.com/localeflow/localeflow/core/release"
)

// TestExpireTextsAndLaggedDeletion: ExpireTexts sets an expiry on the
// event's source and result records only; DeleteExpired deletes a record
// only once its expiry plus its lag has passed, never before, and a later
// Put of a text record drops its expiry (a PutItem replaces the item).
func TestExpireTextsAndLaggedDeletion(t *testing.T) {
	ctx := context.Background()
	m := NewMemStore()
	for _, r := range []release.Record{
		&release.SourceRecord{EventID: "evt-a", JobID: "job-1", SourceSHA256: "a", Text: "x", Version: 1},
		&release.ResultRecord{EventID: "evt-a", PlanID: "plan-1", JobID: "job-1", ResultSHA256: "b", ResultJSON: "{}", Version: 1},
		&release.JobRecord{EventID: "evt-a", PlanID: "plan-1", JobID: "job-1", Status: "succeeded", PayloadSHA256: "c", Version: 1},
		&release.SourceRecord{EventID: "evt-b", JobID: "job-1", SourceSHA256: "a", Text: "x", Version: 1},
	} {
		if err := m.Put(ctx, r, 0); err != nil {
			t.Fatal(err)
		}
	}
	at := time.Date(2026, 12, 8, 0, 0, 0, 0, time.UTC)
	if err := m.ExpireTexts(ctx, "evt-a", at); err != nil {
		t.Fatal(err)
	}
	if err := m.ExpireTexts(ctx, "bad id!", at); err == nil {
		t.Fatal("an invalid event id was accepted")
	}
	got := m.TextExpiry("evt-a")
	if len(got) != 2 || got["source#job-1"] != at.Unix() || got["result#job-1"] != at.Unix() {
		t.Fatalf("text expiry of evt-a = %v", got)
	}
	if got := m.TextExpiry("evt-b"); got["source#job-1"] != 0 {
		t.Fatalf("evt-b's texts got an expiry: %v", got)
	}
	lag := func(_, sk string) time.Duration {
		if sk == "result#job-1" {
			return 48 * time.Hour
		}
		return time.Hour
	}
	if gone := m.DeleteExpired(at.Add(59*time.Minute), lag); len(gone) != 0 {
		t.Fatalf("deleted before expiry + lag: %v", gone)
	}
	gone := m.DeleteExpired(at.Add(time.Hour), lag)
	if len(gone) != 1 || gone[0].SortKey != "source#job-1" {
		t.Fatalf("deleted %v, want the source record only", gone)
	}
	gone = m.DeleteExpired(at.Add(48*time.Hour), lag)
	if len(gone) != 1 || gone[0].SortKey != "result#job-1" {
		t.Fatalf("deleted %v, want the result record", gone)
	}
	snap, err := m.Load(ctx, "evt-a")
	if err != nil || len(snap.Jobs) != 1 {
		t.Fatalf("the job record must stay: %v %v", snap.Jobs, err)
	}
	// A rewritten text record loses its expiry.
	if err := m.ExpireTexts(ctx, "evt-b", at); err != nil {
		t.Fatal(err)
	}
	if err := m.Put(ctx, &release.SourceRecord{EventID: "evt-b", JobID: "job-1", SourceSHA256: "a", Text: "x", Version: 2}, 1); err != nil {
		t.Fatal(err)
	}
	if got := m.TextExpiry("evt-b"); got["source#job-1"] != 0 {
		t.Fatalf("a rewritten text record kept its expiry: %v", got)
	}
}
