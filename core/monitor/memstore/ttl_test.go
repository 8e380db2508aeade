package memstore

import (
	"context"
	"testing"
	"time"

	"github.com/localeflow/localeflow/core/monitor"
)

// TestDeleteExpired: only finished records that need no attention are
// deleted, and only once their last write plus retention plus lag passed.
func TestDeleteExpired(t *testing.T) {
	ctx := context.Background()
	s := New()
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for id, st := range map[string]monitor.State{"done": monitor.StateTerminal, "open": monitor.StatePending} {
		if _, _, err := s.Create(ctx, monitor.Record{EventID: id, State: st, UpdatedMS: at.UnixMilli()}); err != nil {
			t.Fatal(err)
		}
	}
	lag := func(string) time.Duration { return time.Hour }
	if got := s.DeleteExpired(at.Add(2*time.Hour-time.Second), time.Hour, lag); len(got) != 0 {
		t.Fatalf("deleted before retention + lag: %v", got)
	}
	if got := s.DeleteExpired(at.Add(2*time.Hour), time.Hour, lag); len(got) != 1 || got[0] != "done" {
		t.Fatalf("deleted %v, want [done]", got)
	}
	if _, err := s.Get(ctx, "open"); err != nil {
		t.Fatalf("an open record was deleted: %v", err)
	}
	if got := s.DeleteExpired(at.Add(1000*time.Hour), 0, lag); len(got) != 0 {
		t.Fatalf("retention 0 deleted %v", got)
	}
}
