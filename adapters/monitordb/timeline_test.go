package monitordb

import (
	"context"
	"testing"
	"time"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/monitor/monitortest"
	"github.com/localeflow/localeflow/dev/localtest"
)

// TestTimelineKeptInTheRecord: a record showed only its current state; it
// now keeps its last transitions (time, state, remote status, code) in one
// compact attribute written by the finishing write itself, at most
// monitor.TimelineMax of them.
func TestTimelineKeptInTheRecord(t *testing.T) {
	localtest.Require(t)
	db, table := newTable(t)
	store, err := New(db, table)
	if err != nil {
		t.Fatal(err)
	}
	now := monitortest.T0 + 1_000
	clock := core.ClockFunc(func() time.Time { return core.FromMillis(now) })
	svc, err := monitor.NewService(store, clock, nil, monitor.Config{WorkerID: "w1", MaxConsecutiveFailures: 20,
		PollInterval: time.Second, BaseDelay: time.Second, MaxDelay: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rec := monitortest.NewRecord("evt-timeline", monitortest.T0)
	rec.MaxConsecutiveFailures = 20
	rec.BindingSHA256, _ = monitor.Binding(rec.EventID, rec.SiteID, rec.PlanID, rec.WebsiteVersion, rec.SourceSequence, rec.JobCount, rec.ChangeSHA256, 20)
	if _, ok, err := store.Create(ctx, rec); err != nil || !ok {
		t.Fatalf("create: %v %v", ok, err)
	}
	step := func(do func(monitor.Claim) (monitor.Status, error)) {
		t.Helper()
		now += 2_000
		c, ok, err := svc.Claim(ctx, rec.EventID)
		if err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
		now += 10
		if _, err := do(c); err != nil {
			t.Fatal(err)
		}
	}
	step(func(c monitor.Claim) (monitor.Status, error) { return svc.Retry(ctx, c, "cms.http_503") })
	step(func(c monitor.Claim) (monitor.Status, error) {
		return svc.Complete(ctx, c, monitortest.Snapshot(rec, "processing"))
	})
	st, err := svc.Status(ctx, rec.EventID)
	if err != nil {
		t.Fatal(err)
	}
	want := []monitor.TimelineEntry{
		{AtMS: monitortest.T0 + 3_010, State: monitor.StateRetryWait, Code: "cms.http_503"},
		{AtMS: monitortest.T0 + 5_020, State: monitor.StateWatching, RemoteStatus: "processing"},
	}
	if len(st.Timeline) != 2 || st.Timeline[0] != want[0] || st.Timeline[1] != want[1] {
		t.Fatalf("timeline %+v, want %+v", st.Timeline, want)
	}
	for range 5 {
		step(func(c monitor.Claim) (monitor.Status, error) { return svc.Retry(ctx, c, "cms.http_503") })
	}
	step(func(c monitor.Claim) (monitor.Status, error) {
		return svc.Complete(ctx, c, monitortest.Snapshot(rec, "published"))
	})
	got, err := store.Get(ctx, rec.EventID)
	if err != nil {
		t.Fatal(err)
	}
	last := got.Timeline[len(got.Timeline)-1]
	if len(got.Timeline) != monitor.TimelineMax || last.State != monitor.StateTerminal || last.RemoteStatus != "published" ||
		got.Timeline[0].State != monitor.StateRetryWait {
		t.Fatalf("timeline after 8 transitions %+v", got.Timeline)
	}
	if _, err := monitor.Validate(got); err != nil {
		t.Fatalf("record with a timeline does not validate: %v", err)
	}
	if n := len(EncodeTimeline(got.Timeline)); n > 400 {
		t.Fatalf("timeline takes %d bytes", n)
	}
}
