package monitortest

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/lifecycle"
	"github.com/localeflow/localeflow/core/monitor"
)

// Harness tells the suite how to make a store and how to tamper with it.
type Harness struct {
	// New returns an empty store for one subtest.
	New func(t *testing.T) monitor.Store
	// Tamper rewrites a stored record bypassing every condition.
	Tamper func(t *testing.T, s monitor.Store, eventID string, edit func(*monitor.Record))
	// NotAtomic, when set, says why the implementation under the store does
	// not serialize concurrent conditional writes (moto_server): the
	// subtests of concurrent writers then skip, naming it.
	NotAtomic string
}

// skipNotAtomic skips a subtest of concurrent writers under h.NotAtomic.
func (h Harness) skipNotAtomic(t *testing.T) {
	t.Helper()
	if h.NotAtomic != "" {
		t.Skip(h.NotAtomic)
	}
}

// T0 is the suite's epoch in milliseconds.
var T0 = core.Millis(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))

// NewRecord is a valid pending record for eventID registered at nowMS.
func NewRecord(eventID string, nowMS int64) monitor.Record {
	change := core.SHA256Hex([]byte("change:" + eventID))
	binding, err := monitor.Binding(eventID, "site-berlin", "plan-42", "v2026.11.29", 7, 2, change, 5)
	if err != nil {
		panic(err)
	}
	return monitor.Record{
		EventID: eventID, SiteID: "site-berlin", PlanID: "plan-42", WebsiteVersion: "v2026.11.29",
		SourceSequence: 7, JobCount: 2, ChangeSHA256: change, BindingSHA256: binding,
		State: monitor.StatePending, MaxConsecutiveFailures: 5,
		NextPollMS: nowMS, CreatedMS: nowMS, UpdatedMS: nowMS, SchemaVersion: monitor.SchemaVersion,
	}
}

// Snapshot is a valid lifecycle answer with status for rec.
func Snapshot(rec monitor.Record, status string) lifecycle.Response {
	body := fmt.Sprintf(`{"schema":"localeflow.cms-lifecycle.v1","request_id":"req-%s","event_id":%q,"site_id":%q,"plan_id":%q,"website_version":%q,"source_sequence":%d,"status":%q,"required_locales":["de-DE","fr-FR"],"approved_locales":["de-DE"],"blocked_locales":[["fr-FR","cms.glossary_missing"]],"queue_counts":{"pending":1},"delivery":null,"tombstone":null}`,
		status, rec.EventID, rec.SiteID, rec.PlanID, rec.WebsiteVersion, rec.SourceSequence, status)
	resp, err := lifecycle.Parse(rec.Target(), "", []byte(body))
	if err != nil {
		panic(err)
	}
	return resp
}

func lease(owner string, now int64) monitor.Lease {
	return monitor.Lease{Owner: owner, Token: "tok-" + owner + fmt.Sprint(now), NowMS: now, ExpiresMS: now + 60_000}
}

func create(t *testing.T, s monitor.Store, rec monitor.Record) {
	t.Helper()
	if _, ok, err := s.Create(context.Background(), rec); err != nil || !ok {
		t.Fatalf("Create(%s) = %v, %v", rec.EventID, ok, err)
	}
}

func claim(t *testing.T, s monitor.Store, id string, l monitor.Lease) monitor.Record {
	t.Helper()
	rec, ok, err := s.Claim(context.Background(), id, l)
	if err != nil || !ok {
		t.Fatalf("Claim(%s) = %v, %v", id, ok, err)
	}
	return rec
}

func expiredFence(held monitor.Record, now int64) monitor.Fence {
	f := monitor.FenceOf(held, now)
	f.Expired = true
	return f
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if !core.HasCode(err, code) {
		t.Fatalf("error = %v, want %s", err, code)
	}
}

func equalRecords(t *testing.T, got, want monitor.Record) {
	t.Helper()
	if string(got.Lifecycle) != string(want.Lifecycle) {
		t.Fatalf("lifecycle differs:\n got %s\nwant %s", got.Lifecycle, want.Lifecycle)
	}
	got.Lifecycle, want.Lifecycle = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("record differs:\n got %+v\nwant %+v", got, want)
	}
}

// RunStoreSuite runs the conformance suite against h.
func RunStoreSuite(t *testing.T, h Harness) {
	ctx := context.Background()
	t.Run("create and get round trip", func(t *testing.T) {
		s := h.New(t)
		rec := NewRecord("evt-1", T0)
		got, created, err := s.Create(ctx, rec)
		if err != nil || !created {
			t.Fatalf("Create = %v, %v", created, err)
		}
		equalRecords(t, got, rec)
		read, err := s.Get(ctx, "evt-1")
		if err != nil {
			t.Fatal(err)
		}
		equalRecords(t, read, rec)
		if _, err := monitor.Validate(read); err != nil {
			t.Fatalf("stored record invalid: %v", err)
		}
	})
	t.Run("create existing returns it unchanged", func(t *testing.T) {
		s := h.New(t)
		rec := NewRecord("evt-1", T0)
		create(t, s, rec)
		other := NewRecord("evt-1", T0+5)
		other.PlanID = "plan-x"
		got, created, err := s.Create(ctx, other)
		if err != nil || created {
			t.Fatalf("Create = %v, %v", created, err)
		}
		equalRecords(t, got, rec)
	})
	t.Run("get missing", func(t *testing.T) {
		s := h.New(t)
		_, err := s.Get(ctx, "evt-none")
		wantCode(t, err, monitor.CodeEventMissing)
	})
	t.Run("claim", func(t *testing.T) {
		s := h.New(t)
		rec := NewRecord("evt-1", T0)
		create(t, s, rec)
		l := lease("w1", T0+10)
		got := claim(t, s, "evt-1", l)
		equalRecords(t, got, monitor.ApplyClaim(rec, l))
		read, _ := s.Get(ctx, "evt-1")
		equalRecords(t, read, got)
		cur, ok, err := s.Claim(ctx, "evt-1", lease("w2", T0+20))
		if err != nil || ok {
			t.Fatalf("second claim = %v, %v", ok, err)
		}
		equalRecords(t, cur, got)
	})
	t.Run("claim refuses not due and regressed clock", func(t *testing.T) {
		s := h.New(t)
		rec := NewRecord("evt-1", T0)
		rec.NextPollMS = T0 + 100
		create(t, s, rec)
		if _, ok, err := s.Claim(ctx, "evt-1", lease("w", T0+99)); ok || err != nil {
			t.Fatalf("claim before next poll = %v, %v", ok, err)
		}
		rec2 := NewRecord("evt-2", T0)
		create(t, s, rec2)
		if _, ok, err := s.Claim(ctx, "evt-2", lease("w", T0-1)); ok || err != nil {
			t.Fatalf("claim with clock before updated = %v, %v", ok, err)
		}
		if _, ok, err := s.Claim(ctx, "evt-1", lease("w", T0+100)); !ok || err != nil {
			t.Fatalf("claim at next poll = %v, %v", ok, err)
		}
		_, _, err := s.Claim(ctx, "evt-none", lease("w", T0))
		wantCode(t, err, monitor.CodeEventMissing)
	})
	t.Run("a record of another schema version or none is refused and left as it is", func(t *testing.T) {
		for _, version := range []int{monitor.SchemaVersion + 1, 0} {
			t.Run(fmt.Sprint(version), func(t *testing.T) { otherVersionRefused(t, h, version) })
		}
	})
	t.Run("create writes this schema version", func(t *testing.T) {
		s := h.New(t)
		rec := NewRecord("evt-1", T0)
		rec.SchemaVersion = 0
		got, ok, err := s.Create(ctx, rec)
		if err != nil || !ok || got.SchemaVersion != monitor.SchemaVersion {
			t.Fatalf("Create = %+v, %v, %v", got, ok, err)
		}
		if read, _ := s.Get(ctx, "evt-1"); read.SchemaVersion != monitor.SchemaVersion {
			t.Fatalf("stored schema version %d", read.SchemaVersion)
		}
	})
	t.Run("claim refuses final states", func(t *testing.T) {
		s := h.New(t)
		rec := NewRecord("evt-1", T0)
		rec.State, rec.RemoteStatus = monitor.StateTerminal, "cancelled"
		create(t, s, rec)
		if _, ok, err := s.Claim(ctx, "evt-1", lease("w", T0+1)); ok || err != nil {
			t.Fatalf("claim of terminal = %v, %v", ok, err)
		}
	})
	t.Run("concurrent claims: exactly one wins", func(t *testing.T) {
		h.skipNotAtomic(t)
		s := h.New(t)
		create(t, s, NewRecord("evt-1", T0))
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := 0
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, ok, err := s.Claim(ctx, "evt-1", lease(fmt.Sprintf("w%d", i), T0+1))
				if err != nil {
					t.Errorf("claim: %v", err)
				}
				if ok {
					mu.Lock()
					wins++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if wins != 1 {
			t.Fatalf("%d claims won", wins)
		}
	})
	t.Run("transition under a live fence", func(t *testing.T) {
		s := h.New(t)
		create(t, s, NewRecord("evt-1", T0))
		l := lease("w1", T0+10)
		held := claim(t, s, "evt-1", l)
		snap := Snapshot(held, "processing")
		u := monitor.Update{State: monitor.StateWatching, NextPollMS: T0 + 30_020, SetSnapshot: true,
			RemoteStatus: snap.Status, LifecycleSHA256: snap.SHA256, Lifecycle: snap.Canonical, UpdatedMS: T0 + 20}
		got, err := s.Transition(ctx, monitor.FenceOf(held, T0+20), u)
		if err != nil {
			t.Fatal(err)
		}
		equalRecords(t, got, monitor.ApplyUpdate(held, u))
		read, _ := s.Get(ctx, "evt-1")
		equalRecords(t, read, got)
		if _, err := monitor.Validate(read); err != nil {
			t.Fatalf("record after transition invalid: %v", err)
		}
		// Retry keeps the stored snapshot.
		l2 := lease("w2", T0+30_020)
		held = claim(t, s, "evt-1", l2)
		u2 := monitor.Update{State: monitor.StateRetryWait, ConsecutiveFailures: 1, NextPollMS: T0 + 40_000, LastErrorCode: "cms.timeout", UpdatedMS: T0 + 30_030}
		got, err = s.Transition(ctx, monitor.FenceOf(held, T0+30_030), u2)
		if err != nil {
			t.Fatal(err)
		}
		equalRecords(t, got, monitor.ApplyUpdate(held, u2))
		if got.RemoteStatus != "processing" || len(got.Lifecycle) == 0 {
			t.Fatalf("retry dropped the snapshot: %+v", got)
		}
	})
	t.Run("fence failures", func(t *testing.T) {
		s := h.New(t)
		create(t, s, NewRecord("evt-1", T0))
		l := lease("w1", T0+10)
		held := claim(t, s, "evt-1", l)
		u := monitor.Update{State: monitor.StateFailed, ConsecutiveFailures: 1, LastErrorCode: "cms.http_404", NextPollMS: T0 + 20, UpdatedMS: T0 + 20}
		live := monitor.FenceOf(held, T0+20)
		with := func(edit func(*monitor.Fence)) monitor.Fence {
			f := live
			edit(&f)
			return f
		}
		cases := []struct {
			name string
			f    monitor.Fence
			code string
		}{
			{"other token", with(func(f *monitor.Fence) { f.Token = "tok-other" }), monitor.CodeClaimLost},
			{"other owner", with(func(f *monitor.Fence) { f.Owner = "w9" }), monitor.CodeClaimLost},
			{"lease expired", with(func(f *monitor.Fence) { f.NowMS = held.LeaseExpiresMS }), monitor.CodeLeaseExpired},
			{"clock regressed", with(func(f *monitor.Fence) { f.NowMS = T0 + 9 }), monitor.CodeClockRegressed},
			{"missing", with(func(f *monitor.Fence) { f.EventID = "evt-none" }), monitor.CodeClaimMissing},
			{"expired fence on a live lease", with(func(f *monitor.Fence) { f.Expired = true }), monitor.CodeClaimLost},
			{"other poll attempt", with(func(f *monitor.Fence) { f.Attempt++ }), monitor.CodeClaimLost},
			{"other failure limit", with(func(f *monitor.Fence) { f.MaxConsecutiveFailures = 20 }), monitor.CodeClaimLost},
			{"other failure count", with(func(f *monitor.Fence) { f.ConsecutiveFailures = 4 }), monitor.CodeClaimLost},
			{"other lease expiry", with(func(f *monitor.Fence) { f.LeaseExpiresMS++ }), monitor.CodeClaimLost},
			{"other identity", with(func(f *monitor.Fence) { f.JobCount = 9 }), monitor.CodeClaimLost},
			{"other change", with(func(f *monitor.Fence) { f.ChangeSHA256 = strings.Repeat("0", 64) }), monitor.CodeClaimLost},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				uu := u
				uu.UpdatedMS = c.f.NowMS
				_, err := s.Transition(ctx, c.f, uu)
				wantCode(t, err, c.code)
				read, _ := s.Get(ctx, "evt-1")
				equalRecords(t, read, held)
			})
		}
		if _, err := s.Transition(ctx, live, u); err != nil {
			t.Fatalf("live fence: %v", err)
		}
		_, err := s.Transition(ctx, live, u)
		wantCode(t, err, monitor.CodeClaimLost)
	})
	t.Run("reclaim under an expired fence", func(t *testing.T) {
		s := h.New(t)
		create(t, s, NewRecord("evt-1", T0))
		l := lease("w1", T0+10)
		held := claim(t, s, "evt-1", l)
		now := held.LeaseExpiresMS
		u := monitor.Update{State: monitor.StateRetryWait, ConsecutiveFailures: 1, LastErrorCode: monitor.ReclaimErrorCode, NextPollMS: now + 5000, UpdatedMS: now}
		got, err := s.Transition(ctx, expiredFence(held, now), u)
		if err != nil {
			t.Fatal(err)
		}
		equalRecords(t, got, monitor.ApplyUpdate(held, u))
		_, err = s.Transition(ctx, expiredFence(held, now), u)
		wantCode(t, err, monitor.CodeClaimLost)
	})
	t.Run("due lists wakeable records in wake order", func(t *testing.T) {
		s := h.New(t)
		// evt-a pending due at T0+5, evt-b pending due later, evt-c leased
		// (claimed at T0+10, its wake key stays at next_poll_ms T0), evt-d
		// terminal, evt-e failed, evt-f watching due at T0+1.
		a := NewRecord("evt-a", T0)
		a.NextPollMS = T0 + 5
		create(t, s, a)
		b := NewRecord("evt-b", T0)
		b.NextPollMS = T0 + 1_000_000
		create(t, s, b)
		create(t, s, NewRecord("evt-c", T0))
		claim(t, s, "evt-c", lease("w", T0+10))
		d := NewRecord("evt-d", T0)
		d.State, d.RemoteStatus = monitor.StateTerminal, "superseded"
		create(t, s, d)
		create(t, s, NewRecord("evt-e", T0))
		le := lease("w", T0)
		he := claim(t, s, "evt-e", le)
		if _, err := s.Transition(ctx, monitor.FenceOf(he, T0), monitor.Update{State: monitor.StateFailed, ConsecutiveFailures: 1, LastErrorCode: "cms.http_404", NextPollMS: T0, UpdatedMS: T0}); err != nil {
			t.Fatal(err)
		}
		// Its outcome announced: until then a store may keep the owed
		// final record in its wake listing (docs/design.md "Owed outcomes
		// in the wake index").
		if err := s.Announced(ctx, "evt-e", T0); err != nil {
			t.Fatal(err)
		}
		create(t, s, NewRecord("evt-f", T0))
		lf := lease("w", T0)
		heldF := claim(t, s, "evt-f", lf)
		snap := Snapshot(heldF, "ready")
		if _, err := s.Transition(ctx, monitor.FenceOf(heldF, T0), monitor.Update{State: monitor.StateWatching, NextPollMS: T0 + 1, SetSnapshot: true, RemoteStatus: "ready", LifecycleSHA256: snap.SHA256, Lifecycle: snap.Canonical, UpdatedMS: T0}); err != nil {
			t.Fatal(err)
		}
		check := func(now int64, limit int, want ...string) {
			t.Helper()
			got, err := s.Due(ctx, now, limit)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("Due(%d, %d) = %v, want %v", now, limit, got, want)
			}
		}
		check(T0-1, 10)
		check(T0, 10, "evt-c")
		check(T0+1, 10, "evt-c", "evt-f")
		check(T0+5, 10, "evt-c", "evt-f", "evt-a")
		check(T0+5, 1, "evt-c")
		check(T0+60_010, 10, "evt-c", "evt-f", "evt-a")
		check(T0+2_000_000, 10, "evt-c", "evt-f", "evt-a", "evt-b")
	})
	t.Run("the claim does not move the wake key", func(t *testing.T) {
		s := h.New(t)
		rec := NewRecord("evt-1", T0)
		rec.NextPollMS = T0 + 5
		create(t, s, rec)
		due := func(now int64) bool {
			t.Helper()
			ids, err := s.Due(ctx, now, 10)
			if err != nil {
				t.Fatal(err)
			}
			page, _, err := s.DuePage(ctx, now, 10, monitor.DueCursor{})
			if err != nil {
				t.Fatal(err)
			}
			listed := strings.Join(ids, ",") == "evt-1"
			if paged := strings.Join(page, ",") == "evt-1"; paged != listed {
				t.Fatalf("at %d: Due %v, DuePage %v", now, ids, page)
			}
			return listed
		}
		l := lease("w1", T0+10) // expires at T0+60_010
		held := claim(t, s, "evt-1", l)
		if wake, ok := held.WakeMS(); !ok || wake != T0+5 || held.NextPollMS != T0+5 {
			t.Fatalf("claimed record wakes at %d (%v), next_poll_ms %d; want both at T0+5", wake, ok, held.NextPollMS)
		}
		read, err := s.Get(ctx, "evt-1")
		if err != nil {
			t.Fatal(err)
		}
		// A store whose wake key disagrees with the record decodes it
		// corrupt; it must validate.
		if _, err := monitor.Validate(read); err != nil {
			t.Fatalf("claimed record invalid: %v", err)
		}
		equalRecords(t, read, held)
		// Still listed where it was, while the lease lives.
		if !due(T0 + 10) {
			t.Fatal("a claimed record left the due listing (the claim moved its wake key)")
		}
		if due(T0 + 4) {
			t.Fatal("claimed record listed before its next_poll_ms")
		}
		// Meeting it costs a refused claim and changes nothing.
		cur, ok, err := s.Claim(ctx, "evt-1", lease("w2", T0+20))
		if err != nil || ok {
			t.Fatalf("claim of a live lease = %v, %v", ok, err)
		}
		equalRecords(t, cur, held)
		// The census holds it (health sees open leases).
		recs, err := s.Census(ctx)
		if err != nil || len(recs) != 1 || recs[0].EventID != "evt-1" {
			t.Fatalf("census = %d records, %v", len(recs), err)
		}
		// Expired: still found due, and reclaimed under the expired fence.
		if !due(T0 + 60_010) {
			t.Fatal("expired lease not listed due")
		}
		u := monitor.Update{State: monitor.StateRetryWait, ConsecutiveFailures: 1, LastErrorCode: monitor.ReclaimErrorCode,
			NextPollMS: T0 + 65_010, UpdatedMS: T0 + 60_010}
		back, err := s.Transition(ctx, expiredFence(held, T0+60_010), u)
		if err != nil {
			t.Fatal(err)
		}
		equalRecords(t, back, monitor.ApplyUpdate(held, u))
		if due(T0 + 65_009) {
			t.Fatal("reclaimed record listed before its retry")
		}
		if !due(T0 + 65_010) {
			t.Fatal("reclaimed record not listed at its retry")
		}
		// The completion moves the key once: watching at its next poll.
		l2 := lease("w3", T0+65_010)
		held2 := claim(t, s, "evt-1", l2)
		snap := Snapshot(held2, "processing")
		w := monitor.Update{State: monitor.StateWatching, ConsecutiveFailures: 0, NextPollMS: T0 + 95_010,
			SetSnapshot: true, RemoteStatus: "processing", LifecycleSHA256: snap.SHA256, Lifecycle: snap.Canonical, UpdatedMS: T0 + 65_020}
		if _, err := s.Transition(ctx, monitor.FenceOf(held2, T0+65_020), w); err != nil {
			t.Fatal(err)
		}
		if due(T0+95_009) || !due(T0+95_010) {
			t.Fatal("watching record not listed exactly from its next poll")
		}
	})
	t.Run("due pages through many records", func(t *testing.T) {
		s := h.New(t)
		const n = 230
		for i := range n {
			create(t, s, NewRecord(fmt.Sprintf("evt-%03d", i), T0+int64(i)))
		}
		got, err := s.Due(ctx, T0+n, 1000)
		if err != nil || len(got) != n {
			t.Fatalf("Due = %d ids, %v", len(got), err)
		}
		seen := map[string]bool{}
		for _, id := range got {
			if seen[id] {
				t.Fatalf("duplicate %s", id)
			}
			seen[id] = true
		}
		got, err = s.Due(ctx, T0+n, 150)
		if err != nil || len(got) != 150 {
			t.Fatalf("Due limited = %d ids, %v", len(got), err)
		}
		// The earliest wakers come first.
		sorted := append([]string(nil), got...)
		sort.Strings(sorted)
		if sorted[0] != "evt-000" || sorted[149] != "evt-149" {
			t.Fatalf("Due did not return the earliest: %v..%v", sorted[0], sorted[149])
		}
	})
	t.Run("due pages continue after the cursor, ties and shards included", func(t *testing.T) {
		s := h.New(t)
		const n = 37
		want := map[string]bool{}
		for i := range n {
			rec := NewRecord(fmt.Sprintf("evt-%03d", i), T0)
			// Three wake times only: many ties, spread over every shard.
			rec.NextPollMS = T0 + int64(i%3)
			create(t, s, rec)
			want[rec.EventID] = true
		}
		notDue := NewRecord("evt-later", T0)
		notDue.NextPollMS = T0 + 1000
		create(t, s, notDue)
		var cursor monitor.DueCursor
		seen := map[string]bool{}
		for page := 0; ; page++ {
			if page > n {
				t.Fatal("paging does not end")
			}
			ids, next, err := s.DuePage(ctx, T0+10, 5, cursor)
			if err != nil {
				t.Fatal(err)
			}
			if len(ids) > 5 {
				t.Fatalf("page of %d ids, limit 5", len(ids))
			}
			if len(ids) == 0 {
				break
			}
			for _, id := range ids {
				if seen[id] || !want[id] {
					t.Fatalf("page %d: %s listed twice or not due", page, id)
				}
				seen[id] = true
			}
			cursor = next
		}
		if len(seen) != n {
			t.Fatalf("paging listed %d of %d due ids", len(seen), n)
		}
		// The first page is the earliest (ties in any order).
		ids, _, err := s.DuePage(ctx, T0+10, 3, monitor.DueCursor{})
		if err != nil || len(ids) != 3 {
			t.Fatalf("first page = %v, %v", ids, err)
		}
		for _, id := range ids {
			var i int
			if _, err := fmt.Sscanf(id, "evt-%03d", &i); err != nil {
				t.Fatalf("unexpected id %s: %v", id, err)
			}
			if i%3 != 0 {
				t.Fatalf("first page %v holds %s, which is not among the earliest", ids, id)
			}
		}
	})
	t.Run("mark invalid", func(t *testing.T) {
		s := h.New(t)
		create(t, s, NewRecord("evt-1", T0))
		claim(t, s, "evt-1", lease("w", T0+1))
		if err := s.MarkInvalid(ctx, "evt-1", T0+2); err != nil {
			t.Fatal(err)
		}
		rec, _ := s.Get(ctx, "evt-1")
		if rec.State != monitor.StateFailed || rec.LastErrorCode != monitor.CodeStateInvalid || rec.LeaseToken != "" ||
			rec.LeaseOwner != "" || rec.LeaseExpiresMS != 0 || rec.UpdatedMS != T0+2 || rec.OutboxMS != T0+2 {
			t.Fatalf("record = %+v", rec)
		}
		// A store may list the owed record as due until it is announced
		// (monitor.Store.Due); its claim is refused.
		if _, ok, err := s.Claim(ctx, "evt-1", lease("w", T0+1_000_000)); ok || err != nil {
			t.Fatalf("claim of a record marked invalid = %v, %v", ok, err)
		}
		if ids, _ := s.Owed(ctx, T0+2, 10); strings.Join(ids, ",") != "evt-1" {
			t.Fatalf("record marked invalid owes no outcome: Owed = %v", ids)
		}
		// A second marking (a reader that saw the corrupt record before the
		// first) keeps the first outcome: the same outbox_ms, so the same
		// outcome_id, and nothing owed again once it was announced.
		if err := s.MarkInvalid(ctx, "evt-1", T0+5); err != nil {
			t.Fatal(err)
		}
		if again, _ := s.Get(ctx, "evt-1"); again.OutboxMS != T0+2 || again.UpdatedMS != T0+2 {
			t.Fatalf("a second MarkInvalid changed the outcome: %+v", again)
		}
		if err := s.Announced(ctx, "evt-1", T0+2); err != nil {
			t.Fatal(err)
		}
		if err := s.MarkInvalid(ctx, "evt-1", T0+9); err != nil {
			t.Fatal(err)
		}
		if ids, _ := s.Owed(ctx, T0+1_000_000, 10); len(ids) != 0 {
			t.Fatalf("an announced invalid record is owed again after a second MarkInvalid: %v", ids)
		}
		if ids, _ := s.Due(ctx, T0+1_000_000, 10); len(ids) != 0 {
			t.Fatalf("failed record still due once announced: %v", ids)
		}
		if err := s.MarkInvalid(ctx, "evt-none", T0); err != nil {
			t.Fatalf("MarkInvalid of a missing record: %v", err)
		}
		if _, err := s.Get(ctx, "evt-none"); !core.HasCode(err, monitor.CodeEventMissing) {
			t.Fatalf("MarkInvalid created a record: %v", err)
		}
	})
	t.Run("census holds open and attention records only", func(t *testing.T) {
		s := h.New(t)
		create(t, s, NewRecord("evt-pending", T0))
		ok := NewRecord("evt-done", T0)
		ok.State, ok.RemoteStatus = monitor.StateTerminal, "cancelled"
		create(t, s, ok)
		for _, id := range []string{"evt-published", "evt-blocked", "evt-failed"} {
			create(t, s, NewRecord(id, T0))
		}
		for id, status := range map[string]string{"evt-published": "published", "evt-blocked": "publication_blocked"} {
			l := lease("w", T0)
			held := claim(t, s, id, l)
			snap := Snapshot(held, status)
			if _, err := s.Transition(ctx, monitor.FenceOf(held, T0), monitor.Update{State: monitor.StateTerminal, NextPollMS: T0, SetSnapshot: true, RemoteStatus: status, LifecycleSHA256: snap.SHA256, Lifecycle: snap.Canonical, UpdatedMS: T0}); err != nil {
				t.Fatal(err)
			}
		}
		l := lease("w", T0)
		hf := claim(t, s, "evt-failed", l)
		if _, err := s.Transition(ctx, monitor.FenceOf(hf, T0), monitor.Update{State: monitor.StateFailed, ConsecutiveFailures: 1, LastErrorCode: "cms.http_404", NextPollMS: T0, UpdatedMS: T0}); err != nil {
			t.Fatal(err)
		}
		recs, err := s.Census(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range recs {
			ids = append(ids, r.EventID)
		}
		sort.Strings(ids)
		if strings.Join(ids, ",") != "evt-blocked,evt-failed,evt-pending" {
			t.Fatalf("Census = %v", ids)
		}
	})
	t.Run("outbox: final writes owe an outcome until announced", func(t *testing.T) {
		s := h.New(t)
		// evt-a: terminal at registration; evt-b: completed terminal;
		// evt-c: failed; evt-d: watching (owes nothing).
		a := NewRecord("evt-a", T0)
		a.State, a.RemoteStatus, a.OutboxMS = monitor.StateTerminal, "cancelled", T0
		create(t, s, a)
		finish := func(id string, now int64, u monitor.Update) monitor.Record {
			t.Helper()
			create(t, s, NewRecord(id, T0))
			l := lease("w", now)
			held := claim(t, s, id, l)
			if u.SetSnapshot {
				snap := Snapshot(held, u.RemoteStatus)
				u.LifecycleSHA256, u.Lifecycle = snap.SHA256, snap.Canonical
			}
			got, err := s.Transition(ctx, monitor.FenceOf(held, now), u)
			if err != nil {
				t.Fatal(err)
			}
			equalRecords(t, got, monitor.ApplyUpdate(held, u))
			return got
		}
		b := finish("evt-b", T0+10, monitor.Update{State: monitor.StateTerminal, NextPollMS: T0 + 10, SetSnapshot: true, RemoteStatus: "published", UpdatedMS: T0 + 10})
		c := finish("evt-c", T0+20, monitor.Update{State: monitor.StateFailed, ConsecutiveFailures: 1, LastErrorCode: "cms.http_404", NextPollMS: T0 + 20, UpdatedMS: T0 + 20})
		d := finish("evt-d", T0+30, monitor.Update{State: monitor.StateWatching, NextPollMS: T0 + 30_030, SetSnapshot: true, RemoteStatus: "processing", UpdatedMS: T0 + 30})
		if b.OutboxMS != T0+10 || c.OutboxMS != T0+20 || d.OutboxMS != 0 {
			t.Fatalf("outbox keys %d %d %d", b.OutboxMS, c.OutboxMS, d.OutboxMS)
		}
		for _, id := range []string{"evt-a", "evt-b", "evt-c", "evt-d"} {
			rec, err := s.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := monitor.Validate(rec); err != nil {
				t.Fatalf("%s invalid: %v", id, err)
			}
		}
		check := func(before int64, limit int, want ...string) {
			t.Helper()
			got, err := s.Owed(ctx, before, limit)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("Owed(%d, %d) = %v, want %v", before, limit, got, want)
			}
		}
		check(T0-1, 10)
		check(T0+10, 10, "evt-a", "evt-b")
		check(T0+1_000_000, 10, "evt-a", "evt-b", "evt-c")
		check(T0+1_000_000, 2, "evt-a", "evt-b")
		// A stale version does not clear; the right one does, once.
		if err := s.Announced(ctx, "evt-b", T0+9); err != nil {
			t.Fatal(err)
		}
		check(T0+1_000_000, 10, "evt-a", "evt-b", "evt-c")
		for range 2 {
			if err := s.Announced(ctx, "evt-b", T0+10); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Announced(ctx, "evt-none", T0+10); err != nil {
			t.Fatalf("Announced of a missing record: %v", err)
		}
		check(T0+1_000_000, 10, "evt-a", "evt-c")
		rec, _ := s.Get(ctx, "evt-b")
		want := b
		want.OutboxMS = 0
		equalRecords(t, rec, want)
		if _, err := monitor.Validate(rec); err != nil {
			t.Fatalf("announced record invalid: %v", err)
		}
	})
	t.Run("service over the store", func(t *testing.T) {
		runServiceFlow(t, h)
	})
	runHintSuite(t, h)
}

// fixedClock is a settable clock.
type fixedClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fixedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fixedClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

type statusReader struct{ status string }

func (r statusReader) Timeout() time.Duration { return time.Second }

func (r statusReader) ReadLifecycle(_ context.Context, target lifecycle.Target) (lifecycle.Response, error) {
	rec := monitor.Record{EventID: target.EventID, SiteID: target.SiteID, PlanID: target.PlanID,
		WebsiteVersion: target.WebsiteVersion, SourceSequence: target.SourceSequence, JobCount: target.JobCount}
	snap := Snapshot(rec, r.status)
	return lifecycle.Parse(target, snap.RequestID, snap.Canonical)
}

func runServiceFlow(t *testing.T, h Harness) {
	ctx := context.Background()
	s := h.New(t)
	clock := &fixedClock{now: core.FromMillis(T0)}
	svc, err := monitor.NewService(s, clock, nil, monitor.Config{WorkerID: "suite"})
	if err != nil {
		t.Fatal(err)
	}
	change := `{"event_id":"evt-flow","site_id":"site-berlin","website_version":"v2026.11.29","source_sequence":7}`
	canon, _ := core.CanonicalizeJSON([]byte(change))
	detail := fmt.Sprintf(`{"change":%s,"dispatch":{"event_id":"evt-flow","payload_sha256":%q,"status":"succeeded","remote_plan_id":"plan-42","remote_job_count":2,"remote_status":"enqueued","response_sha256":%q}}`,
		change, core.SHA256Hex(canon), strings.Repeat("b", 64))
	d, err := monitor.ParseDispatched([]byte(detail))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Register(ctx, d); err != nil {
		t.Fatal(err)
	}
	for i, status := range []string{"processing", "publishing", "published"} {
		out, err := svc.PollOnce(ctx, "evt-flow", statusReader{status})
		if err != nil || !out.Polled || out.RemoteStatus != status {
			t.Fatalf("poll %d = %+v, %v", i, out, err)
		}
		clock.set(out.NextPoll)
	}
	st, err := svc.Status(ctx, "evt-flow")
	if err != nil || st.State != monitor.StateTerminal || st.PollAttempts != 3 || st.ApprovedLocales[0] != "de-DE" {
		t.Fatalf("status = %+v, %v", st, err)
	}
	// A tampered record is marked failed and blocks health.
	create(t, s, NewRecord("evt-tamper", T0))
	h.Tamper(t, s, "evt-tamper", func(r *monitor.Record) { r.JobCount = 9 })
	_, err = svc.Status(ctx, "evt-tamper")
	wantCode(t, err, monitor.CodeStateInvalid)
	health, err := svc.Health(ctx)
	if err != nil || health.Status != monitor.HealthBlocked || health.Failed != 1 {
		t.Fatalf("health = %+v, %v", health, err)
	}
	rec, _ := s.Get(ctx, "evt-tamper")
	if rec.State != monitor.StateFailed || rec.LastErrorCode != monitor.CodeStateInvalid {
		t.Fatalf("tampered record = %+v", rec)
	}
}

// otherVersionRefused plants records of schema version v (not
// monitor.SchemaVersion; 0 is a record without one) in the states every
// write can meet — due, leased, final with its outcome owed — and checks
// that every write refuses them and leaves them exactly as they were,
// that the owed listing skips them and that the census still lists the
// one that can wake (health reports it).
func otherVersionRefused(t *testing.T, h Harness, v int) {
	ctx := context.Background()
	s := h.New(t)
	create(t, s, NewRecord("evt-due", T0))
	create(t, s, NewRecord("evt-held", T0))
	held := claim(t, s, "evt-held", lease("w", T0+1))
	owed := NewRecord("evt-owed", T0)
	owed.State, owed.RemoteStatus, owed.OutboxMS = monitor.StateTerminal, "cancelled", T0
	create(t, s, owed)
	ids := []string{"evt-due", "evt-held", "evt-owed"}
	planted := map[string]monitor.Record{}
	for _, id := range ids {
		h.Tamper(t, s, id, func(r *monitor.Record) { r.SchemaVersion = v })
		rec, err := s.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := monitor.Validate(rec); !core.HasCode(err, monitor.CodeSchemaAltered) {
			t.Fatalf("%s: Validate = %v, want %s", id, err, monitor.CodeSchemaAltered)
		}
		planted[id] = rec
	}
	if cur, ok, err := s.Claim(ctx, "evt-due", lease("w", T0+2)); ok || err != nil {
		t.Fatalf("claim = %v, %v", ok, err)
	} else {
		equalRecords(t, cur, planted["evt-due"])
	}
	expired := expiredFence(held, held.LeaseExpiresMS)
	for _, f := range []monitor.Fence{monitor.FenceOf(held, T0+2), expired} {
		_, err := s.Transition(ctx, f, monitor.Update{State: monitor.StateFailed, ConsecutiveFailures: 1,
			LastErrorCode: "cms.http_404", NextPollMS: f.NowMS, UpdatedMS: f.NowMS})
		wantCode(t, err, monitor.CodeSchemaAltered)
	}
	for _, id := range ids {
		if err := s.MarkInvalid(ctx, id, T0+3); err != nil {
			t.Fatalf("MarkInvalid(%s): %v", id, err)
		}
	}
	if err := s.Announced(ctx, "evt-owed", T0); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Owed(ctx, T0+1_000_000, 10); err != nil || len(got) != 0 {
		t.Fatalf("Owed lists a record of another version: %v, %v", got, err)
	}
	for _, id := range ids {
		read, err := s.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		equalRecords(t, read, planted[id])
	}
	recs, err := s.Census(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, r := range recs {
		listed = append(listed, r.EventID)
	}
	if !strings.Contains(strings.Join(listed, ","), "evt-due") {
		t.Fatalf("Census = %v: the due record of another version is not reported", listed)
	}
}
