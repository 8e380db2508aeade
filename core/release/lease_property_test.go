package release_test

import (
	"context"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

// TestEvidenceLeaseStateMachine drives one evidence request through random
// claims, finishes (with current and stale claims) and clock steps, and
// checks the lease invariants after every step: attempts never exceed
// max_attempts nor go down, max_attempts never changes, a claim never takes
// a live lease, a stale claim never finishes, and succeeded and failed are
// final.
func TestEvidenceLeaseStateMachine(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ctx := context.Background()
		store := releasetest.NewMemStore()
		state := release.EvidenceState{Store: store}
		req := request("evt-p")
		maxAttempts := rapid.IntRange(1, 6).Draw(t, "max")
		lease := time.Duration(rapid.IntRange(1, 120).Draw(t, "lease")) * time.Second
		now := t0
		var claims []*release.Claim
		var last *release.EvidenceRecord
		load := func() *release.EvidenceRecord {
			snap, err := store.Load(ctx, "evt-p")
			if err != nil {
				t.Fatal(err)
			}
			return snap.Evidence[req.RequestID]
		}
		for step := 0; step < 40; step++ {
			snap, _ := store.Load(ctx, "evt-p")
			before := snap.Evidence[req.RequestID]
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0:
				c, err := state.Claim(ctx, &snap, req, "w", now, lease, maxAttempts)
				rec := load()
				switch {
				case err != nil:
					code := core.CodeOf(err)
					if code == release.CodeAttemptsExhausted && rec.Status != release.StateFailed ||
						code == release.CodeAlreadyConsumed && rec.Status != release.StateSucceeded ||
						code != release.CodeAttemptsExhausted && code != release.CodeAlreadyConsumed {
						t.Fatalf("claim error %v with record %+v", err, rec)
					}
				case c == nil:
					live := rec.Status == release.StateLeased && rec.LeaseExpiresMS > core.Millis(now)
					if !live && rec.NextAttemptMS <= core.Millis(now) {
						t.Fatalf("claimable record not claimed: %+v", rec)
					}
				default:
					if before != nil && before.Status == release.StateLeased && before.LeaseExpiresMS > core.Millis(now) {
						t.Fatalf("claimed over a live lease: %+v", before)
					}
					if rec.Status != release.StateLeased || rec.LeaseToken != c.LeaseToken || c.Attempt != rec.Attempts {
						t.Fatalf("claim %+v, record %+v", c, rec)
					}
					claims = append(claims, c)
				}
			case 1, 2:
				if len(claims) == 0 {
					continue
				}
				c := claims[rapid.IntRange(0, len(claims)-1).Draw(t, "claim")]
				var err error
				if rapid.Bool().Draw(t, "succeed") {
					err = state.Succeed(ctx, &snap, c, now)
				} else {
					err = state.Fail(ctx, &snap, c, &core.Error{Code: "evidence.x", Retryable: rapid.Bool().Draw(t, "retryable")}, now)
				}
				rec := load()
				current := before.Status == release.StateLeased && before.LeaseToken == c.LeaseToken && before.LeaseExpiresMS > core.Millis(now)
				if err != nil && current {
					t.Fatalf("finish of the current lease failed: %v", err)
				}
				if err != nil && rec.Version != before.Version {
					t.Fatalf("failed finish changed the record")
				}
				if err == nil && !current && before.Status != release.StateSucceeded {
					t.Fatalf("stale claim finished: before %+v", before)
				}
			case 3:
				now = now.Add(time.Duration(rapid.IntRange(0, 4000).Draw(t, "ms")) * time.Millisecond * 30)
			}
			rec := load()
			if rec == nil {
				continue
			}
			if rec.Attempts > rec.MaxAttempts || rec.MaxAttempts != maxAttempts {
				t.Fatalf("attempts %d of %d", rec.Attempts, rec.MaxAttempts)
			}
			if last != nil {
				if rec.Attempts < last.Attempts {
					t.Fatal("attempts went down")
				}
				if (last.Status == release.StateSucceeded || last.Status == release.StateFailed) && rec.Status != last.Status {
					t.Fatalf("left final state %s for %s", last.Status, rec.Status)
				}
			}
			last = rec
		}
	})
}
