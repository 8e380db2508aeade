package monitor_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/lifecycle"
	"github.com/localeflow/localeflow/core/monitor"
)

// watchingRecord drives a record to watching and returns the bundle.
func watchingRecord(t *testing.T) bundle {
	t.Helper()
	b := setup(t, monitor.Config{})
	register(t, b, "evt-1")
	c := claimOne(t, b, "evt-1")
	if _, err := b.svc.Complete(context.Background(), c, response(t, c.Target(), "processing")); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestTamperedRecordIsMarkedFailed(t *testing.T) {
	ctx := context.Background()
	otherSnapshot := func(r *monitor.Record) {
		body := lifecycleBody("evt-1", "ready", "req-9")
		resp, _ := lifecycle.Parse(r.Target(), "", body)
		r.Lifecycle, r.LifecycleSHA256 = resp.Canonical, resp.SHA256
	}
	tests := []struct {
		name string
		base func(t *testing.T) bundle
		edit func(*monitor.Record)
	}{
		{"site id not token", watchingRecord, func(r *monitor.Record) { r.SiteID = "site berlin" }},
		{"plan id edited breaks binding", watchingRecord, func(r *monitor.Record) { r.PlanID = "plan-43" }},
		{"job count edited breaks binding", watchingRecord, func(r *monitor.Record) { r.JobCount = 3 }},
		{"binding hash edited", watchingRecord, func(r *monitor.Record) { r.BindingSHA256 = strings.Repeat("0", 64) }},
		{"change hash not hex", watchingRecord, func(r *monitor.Record) { r.ChangeSHA256 = "xyz" }},
		{"max failures 21", watchingRecord, func(r *monitor.Record) { r.MaxConsecutiveFailures = 21 }},
		{"failures above max", watchingRecord, func(r *monitor.Record) { r.ConsecutiveFailures = 6 }},
		{"negative attempts", watchingRecord, func(r *monitor.Record) { r.PollAttempts = -1 }},
		{"unknown state", watchingRecord, func(r *monitor.Record) { r.State = "sleeping" }},
		{"next poll before created", watchingRecord, func(r *monitor.Record) { r.NextPollMS = r.CreatedMS - 1 }},
		{"updated before created", watchingRecord, func(r *monitor.Record) { r.UpdatedMS = r.CreatedMS - 1 }},
		{"negative time", watchingRecord, func(r *monitor.Record) { r.CreatedMS = -5 }},
		{"lease fields when not leased", watchingRecord, func(r *monitor.Record) { r.LeaseToken = "tok" }},
		{"error code when watching", watchingRecord, func(r *monitor.Record) { r.LastErrorCode = "cms.timeout" }},
		{"watching without snapshot", watchingRecord, func(r *monitor.Record) { r.Lifecycle, r.LifecycleSHA256 = nil, "" }},
		{"snapshot hash differs", watchingRecord, func(r *monitor.Record) { r.LifecycleSHA256 = core.SHA256Hex([]byte("x")) }},
		{"snapshot status differs", watchingRecord, func(r *monitor.Record) { r.RemoteStatus = "ready" }},
		{"snapshot of another answer", watchingRecord, otherSnapshot},
		{"snapshot not canonical", watchingRecord, func(r *monitor.Record) {
			r.Lifecycle = lifecycleBody("evt-1", "processing", "req-x")
			r.LifecycleSHA256 = core.SHA256Hex(r.Lifecycle)
		}},
		{"snapshot with text", watchingRecord, func(r *monitor.Record) {
			r.Lifecycle = []byte(strings.Replace(string(r.Lifecycle), `"tombstone":null`, `"tombstone":null,"text":"Hallo Welt"`, 1))
			r.LifecycleSHA256 = core.SHA256Hex(r.Lifecycle)
		}},
		{"snapshot truncated", watchingRecord, func(r *monitor.Record) {
			r.Lifecycle = r.Lifecycle[:10]
			r.LifecycleSHA256 = core.SHA256Hex(r.Lifecycle)
		}},
		{"remote status unknown", watchingRecord, func(r *monitor.Record) { r.RemoteStatus = "exploded" }},
		{"terminal remote while watching", watchingRecord, func(r *monitor.Record) {
			resp, _ := lifecycle.Parse(r.Target(), "", lifecycleBody("evt-1", "published", "r"))
			r.Lifecycle, r.LifecycleSHA256, r.RemoteStatus = resp.Canonical, resp.SHA256, "published"
		}},
		{"terminal with non-terminal snapshot", watchingRecord, func(r *monitor.Record) { r.State = monitor.StateTerminal }},
		{"pending with remote status", func(t *testing.T) bundle {
			b := setup(t, monitor.Config{})
			register(t, b, "evt-1")
			return b
		}, func(r *monitor.Record) { r.RemoteStatus = "cancelled" }},
		{"pending with attempts", func(t *testing.T) bundle {
			b := setup(t, monitor.Config{})
			register(t, b, "evt-1")
			return b
		}, func(r *monitor.Record) { r.PollAttempts = 1 }},
		{"leased without token", func(t *testing.T) bundle {
			b := setup(t, monitor.Config{})
			register(t, b, "evt-1")
			claimOne(t, b, "evt-1")
			return b
		}, func(r *monitor.Record) { r.LeaseToken = "" }},
		{"lease expiring before update", func(t *testing.T) bundle {
			b := setup(t, monitor.Config{})
			register(t, b, "evt-1")
			claimOne(t, b, "evt-1")
			return b
		}, func(r *monitor.Record) { r.LeaseExpiresMS = r.UpdatedMS }},
		{"retry wait without error code", func(t *testing.T) bundle {
			b := setup(t, monitor.Config{})
			register(t, b, "evt-1")
			c := claimOne(t, b, "evt-1")
			if _, err := b.svc.Retry(context.Background(), c, "cms.timeout"); err != nil {
				t.Fatal(err)
			}
			return b
		}, func(r *monitor.Record) { r.LastErrorCode = "" }},
		{"retry wait with bad error code", func(t *testing.T) bundle {
			b := setup(t, monitor.Config{})
			register(t, b, "evt-1")
			c := claimOne(t, b, "evt-1")
			if _, err := b.svc.Retry(context.Background(), c, "cms.timeout"); err != nil {
				t.Fatal(err)
			}
			return b
		}, func(r *monitor.Record) { r.LastErrorCode = "Timeout!" }},
		{"immediate terminal with published", func(t *testing.T) bundle {
			b := setup(t, monitor.Config{})
			d, _ := monitor.ParseDispatched([]byte(detail(t, "evt-1", "cancelled")))
			if _, err := b.svc.Register(context.Background(), d); err != nil {
				t.Fatal(err)
			}
			return b
		}, func(r *monitor.Record) { r.RemoteStatus = "published" }},
		{"corrupt item", watchingRecord, func(r *monitor.Record) { r.Corrupt = true }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.base(t)
			if !b.store.Tamper("evt-1", tt.edit) {
				t.Fatal("record missing")
			}
			_, err := b.svc.Status(ctx, "evt-1")
			wantCode(t, err, monitor.CodeStateInvalid)
			rec, _ := b.store.Get(ctx, "evt-1")
			if rec.State != monitor.StateFailed || rec.LastErrorCode != monitor.CodeStateInvalid || rec.LeaseToken != "" {
				t.Fatalf("tampered record not marked failed: %+v", rec)
			}
			if _, ok, _ := b.svc.Claim(ctx, "evt-1"); ok {
				t.Fatal("tampered record was claimed")
			}
			h, err := b.svc.Health(ctx)
			if err != nil || h.Status != monitor.HealthBlocked || h.Failed != 1 {
				t.Fatalf("health = %+v, %v", h, err)
			}
		})
	}
}

func TestTamperedRecordFoundByClaim(t *testing.T) {
	ctx := context.Background()
	b := setup(t, monitor.Config{})
	register(t, b, "evt-1")
	register(t, b, "evt-2")
	b.store.Tamper("evt-1", func(r *monitor.Record) { r.WebsiteVersion = "v-other" })
	claims, err := b.svc.ClaimDue(ctx, 10)
	if err != nil || len(claims) != 1 || claims[0].EventID != "evt-2" {
		t.Fatalf("ClaimDue = %+v, %v", claims, err)
	}
	_, err = b.svc.PollOnce(ctx, "evt-1", reader())
	wantCode(t, err, monitor.CodeStateInvalid)
	rec, _ := b.store.Get(ctx, "evt-1")
	if rec.State != monitor.StateFailed || rec.LastErrorCode != monitor.CodeStateInvalid {
		t.Fatalf("record = %+v", rec)
	}
}

func TestOtherSchemaVersionIsRefusedNotRewritten(t *testing.T) {
	ctx := context.Background()
	b := watchingRecord(t)
	b.store.Tamper("evt-1", func(r *monitor.Record) { r.SchemaVersion = 2 })
	_, err := b.svc.Status(ctx, "evt-1")
	wantCode(t, err, monitor.CodeSchemaAltered)
	if rec, _ := b.store.Get(ctx, "evt-1"); rec.State != monitor.StateWatching {
		t.Fatalf("record of another version was rewritten: %+v", rec)
	}
}

func TestBindingRefusesImpossibleIdentity(t *testing.T) {
	if _, err := monitor.Binding("e", "s", "p", "v", 1, 1, strings.Repeat("a", 64), 5); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"utf8": func() error {
			_, err := monitor.Binding("e\xff", "s", "p", "v", 1, 1, strings.Repeat("a", 64), 5)
			return err
		}(),
		"hash": func() error { _, err := monitor.Binding("e", "s", "p", "v", 1, 1, "x", 5); return err }(),
		"jobs": func() error {
			_, err := monitor.Binding("e", "s", "p", "v", 1, 0, strings.Repeat("a", 64), 5)
			return err
		}(),
		"limit": func() error {
			_, err := monitor.Binding("e", "s", "p", "v", 1, 1, strings.Repeat("a", 64), 21)
			return err
		}(),
	} {
		if !core.HasCode(err, monitor.CodeBindingInvalid) {
			t.Errorf("%s: Binding = %v", name, err)
		}
	}
}

// FuzzValidate mutates a valid record field by field: Validate must never
// panic, and whatever it accepts must satisfy the record invariants.
func FuzzValidate(f *testing.F) {
	f.Add(uint8(0), "x", int64(1), []byte(nil))
	f.Add(uint8(7), "leased", int64(-1), []byte("{}"))
	f.Add(uint8(15), "", int64(0), []byte(`{"a":1}`))
	f.Fuzz(func(t *testing.T, field uint8, s string, n int64, raw []byte) {
		b := setup(t, monitor.Config{})
		register(t, b, "evt-1")
		c := claimOne(t, b, "evt-1")
		if field%2 == 0 {
			if _, err := b.svc.Complete(t.Context(), c, response(t, c.Target(), "processing")); err != nil {
				t.Fatal(err)
			}
		}
		rec, _ := b.store.Get(t.Context(), "evt-1")
		switch field % 16 {
		case 0:
			rec.State = monitor.State(s)
		case 1:
			rec.LeaseToken = s
		case 2:
			rec.LastErrorCode = s
		case 3:
			rec.RemoteStatus = s
		case 4:
			rec.Lifecycle = raw
		case 5:
			rec.Lifecycle, rec.LifecycleSHA256 = raw, core.SHA256Hex(raw)
		case 6:
			rec.NextPollMS = n
		case 7:
			rec.LeaseExpiresMS = n
		case 8:
			rec.UpdatedMS = n
		case 9:
			rec.ConsecutiveFailures = int(n)
		case 10:
			rec.PollAttempts = int(n)
		case 11:
			rec.SourceSequence = n
		case 12:
			rec.SiteID = s
		case 13:
			rec.LeaseOwner = s
		case 14:
			rec.MaxConsecutiveFailures = int(n)
		case 15:
			rec.CreatedMS = n
		}
		snap, err := monitor.Validate(rec)
		if err != nil {
			if !core.HasCode(err, monitor.CodeStateInvalid) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if (rec.State == monitor.StateLeased) != (rec.LeaseToken != "") || rec.UpdatedMS < rec.CreatedMS ||
			(snap != nil) != (len(rec.Lifecycle) > 0) || (snap != nil && snap.SHA256 != rec.LifecycleSHA256) ||
			!core.ValidToken(rec.SiteID) || rec.ConsecutiveFailures > rec.MaxConsecutiveFailures {
			t.Fatalf("accepted an impossible record: %+v", rec)
		}
	})
}

var _ = time.Second
