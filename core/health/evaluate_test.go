package health_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/health"
	"github.com/localeflow/localeflow/core/health/healthtest"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/release"
)

const base = int64(1_764_460_800_000)

func monitorOnly(variant string) health.Census {
	return health.Census{MonitorItemCount: -1, Monitor: []monitor.Record{healthtest.MonitorRecord("evt-1", variant, base)}}
}

func TestEvaluateMonitorVariants(t *testing.T) {
	tests := []struct {
		name      string
		variant   string
		nowMS     int64
		state     string
		due       int
		expired   int
		failed    int
		remote    int
		reasons   []string
		nextDue   int64
		attention bool
	}{
		{"pending due", healthtest.Pending, base, "pending", 1, 0, 0, 0, nil, base, false},
		{"pending not yet due", healthtest.Pending, base - 1, "pending", 0, 0, 0, 0, nil, base, false},
		{"watching", healthtest.Watching, base + 2, "watching", 0, 0, 0, 0, nil, base + 1 + healthtest.PollInterval, false},
		{"watching due", healthtest.Watching, base + 1 + healthtest.PollInterval, "watching", 1, 0, 0, 0, nil, base + 1 + healthtest.PollInterval, false},
		{"retry_wait due", healthtest.RetryWait, base + 1 + healthtest.RetryDelay, "retry_wait", 1, 0, 0, 0, nil, base + 1 + healthtest.RetryDelay, false},
		{"leased live", healthtest.Leased, base + 1 + healthtest.LeaseMS - 1, "leased", 0, 0, 0, 0, nil, base + 1 + healthtest.LeaseMS, false},
		{"leased expired", healthtest.Leased, base + 1 + healthtest.LeaseMS, "leased", 0, 1, 0, 0, []string{health.ReasonMonitorExpiredLeases}, base + 1 + healthtest.LeaseMS, true},
		{"failed", healthtest.Failed, base + 2, "failed", 0, 0, 1, 0, []string{health.ReasonMonitorFailed}, 0, true},
		{"remote failure", healthtest.RemoteFailure, base + 2, "terminal", 0, 0, 0, 1, []string{health.ReasonMonitorRemoteFailures}, 0, true},
		{"terminal success", healthtest.Terminal, base + 2, "terminal", 0, 0, 0, 0, nil, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := health.Evaluate(tc.nowMS, monitorOnly(tc.variant))
			m := r.Monitor
			if len(m.Counts) != len(monitor.States()) {
				t.Fatalf("counts %v: want every state", m.Counts)
			}
			for st, n := range m.Counts {
				want := 0
				if st == tc.state {
					want = 1
				}
				if n != want {
					t.Fatalf("counts[%s] = %d, want %d (%v)", st, n, want, m.Counts)
				}
			}
			if m.Due != tc.due || m.ExpiredLeases != tc.expired || m.Failed != tc.failed || m.RemoteFailures != tc.remote {
				t.Fatalf("monitor = %+v", m)
			}
			wantStatus := health.StatusOK
			if len(tc.reasons) > 0 {
				wantStatus = health.StatusBlocked
			}
			if r.Status != wantStatus || !slices.Equal(r.Reasons, append([]string{}, tc.reasons...)) {
				t.Fatalf("status %s reasons %v, want %s %v", r.Status, r.Reasons, wantStatus, tc.reasons)
			}
			if len(r.Items) != 1 || r.Items[0].NextDueMS != tc.nextDue || r.Items[0].Attention != tc.attention || r.Items[0].State != tc.state {
				t.Fatalf("items = %+v", r.Items)
			}
		})
	}
}

func TestEvaluateInvalidMonitorRecordBlocks(t *testing.T) {
	tests := []struct {
		name   string
		tamper func(*monitor.Record)
		code   string
	}{
		{"binding", func(r *monitor.Record) { r.SiteID = "site-other" }, monitor.CodeStateInvalid},
		{"lease on a pending record", func(r *monitor.Record) { r.LeaseToken = "x" }, monitor.CodeStateInvalid},
		{"corrupt item", func(r *monitor.Record) { r.Corrupt = true }, monitor.CodeStateInvalid},
		{"other schema", func(r *monitor.Record) { r.SchemaVersion = 2 }, monitor.CodeSchemaAltered},
		{"id not a token", func(r *monitor.Record) { r.EventID = "evt <b>" }, monitor.CodeStateInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := healthtest.MonitorRecord("evt-1", healthtest.Pending, base)
			tc.tamper(&rec)
			r := health.Evaluate(base+5, health.Census{MonitorItemCount: -1, Monitor: []monitor.Record{rec}})
			if r.Status != health.StatusBlocked || !slices.Contains(r.Reasons, tc.code) || !slices.Contains(r.Reasons, health.ReasonMonitorFailed) {
				t.Fatalf("status %s reasons %v", r.Status, r.Reasons)
			}
			if r.Monitor.Failed != 1 || r.Monitor.Counts["pending"] != 0 || r.Monitor.Due != 0 {
				t.Fatalf("monitor = %+v", r.Monitor)
			}
			it := r.Items[0]
			if !it.Invalid || !it.Attention || it.ErrorCode != tc.code || strings.ContainsAny(it.EventID, "<> ") {
				t.Fatalf("item = %+v", it)
			}
		})
	}
}

func TestEvaluateTerminalApproximation(t *testing.T) {
	c := health.Census{MonitorItemCount: 1010, Monitor: []monitor.Record{
		healthtest.MonitorRecord("evt-1", healthtest.Pending, base),
		healthtest.MonitorRecord("evt-2", healthtest.RemoteFailure, base),
	}}
	r := health.Evaluate(base, c)
	if r.Monitor.Counts["terminal"] != 1+1008 || !r.TerminalApproximate {
		t.Fatalf("terminal = %d approx %v", r.Monitor.Counts["terminal"], r.TerminalApproximate)
	}
	c.MonitorItemCount = 1 // a stale count below what was read
	if r := health.Evaluate(base, c); r.Monitor.Counts["terminal"] != 1 {
		t.Fatalf("stale item count: terminal = %d", r.Monitor.Counts["terminal"])
	}
	c.MonitorItemCount = -1
	if r := health.Evaluate(base, c); r.Monitor.Counts["terminal"] != 1 || r.TerminalApproximate {
		t.Fatalf("unknown item count: terminal = %d", r.Monitor.Counts["terminal"])
	}
}

func TestEvaluateRelease(t *testing.T) {
	ev := func(id, st string) health.ReleaseRecord {
		return health.ReleaseRecord{EventID: "evt-1", SortKey: release.SKEvidencePrefix + id, Evidence: healthtest.Evidence("evt-1", id, st, base)}
	}
	dl := func(ev, st string) health.ReleaseRecord {
		return health.ReleaseRecord{EventID: ev, SortKey: release.SKDelivery, Delivery: healthtest.Delivery(ev, st, base)}
	}
	tests := []struct {
		name     string
		recs     []health.ReleaseRecord
		nowMS    int64
		evidence contract.LeaseHealth
		delivery contract.LeaseHealth
		reasons  []string
	}{
		{"open evidence and delivery", []health.ReleaseRecord{ev("req-1", "pending"), ev("req-2", "retry_wait"), ev("req-3", "leased"), dl("evt-1", "pending")}, base,
			contract.LeaseHealth{Counts: map[string]int{"pending": 1, "retry_wait": 1, "leased": 1, "failed": 0}, Open: 3, Due: 1},
			contract.LeaseHealth{Counts: map[string]int{"pending": 1, "retry_wait": 0, "leased": 0, "failed": 0}, Open: 1, Due: 1}, nil},
		{"expired evidence lease", []health.ReleaseRecord{ev("req-3", "leased")}, base + 1 + healthtest.LeaseMS,
			contract.LeaseHealth{Counts: map[string]int{"pending": 0, "retry_wait": 0, "leased": 1, "failed": 0}, Open: 1, ExpiredLeases: 1},
			contract.LeaseHealth{Counts: map[string]int{"pending": 0, "retry_wait": 0, "leased": 0, "failed": 0}},
			[]string{health.ReasonEvidenceExpiredLeases}},
		{"failed evidence and delivery", []health.ReleaseRecord{ev("req-1", "failed"), dl("evt-2", "failed"), dl("evt-3", "leased")}, base + 1 + healthtest.LeaseMS,
			contract.LeaseHealth{Counts: map[string]int{"pending": 0, "retry_wait": 0, "leased": 0, "failed": 1}, Failed: 1},
			contract.LeaseHealth{Counts: map[string]int{"pending": 0, "retry_wait": 0, "leased": 1, "failed": 1}, Open: 1, Failed: 1, ExpiredLeases: 1},
			[]string{health.ReasonDeliveryExpiredLeases, health.ReasonDeliveryFailed, health.ReasonEvidenceFailed}},
		{"corrupt delivery and invalid evidence", []health.ReleaseRecord{
			{EventID: "evt-9", SortKey: release.SKDelivery, Corrupt: true},
			func() health.ReleaseRecord { r := ev("req-1", "pending"); r.Evidence.LastErrorCode = "x.y"; return r }(),
			ev("req-2", "succeeded")}, base,
			contract.LeaseHealth{Counts: map[string]int{"pending": 0, "retry_wait": 0, "leased": 0, "failed": 2}, Failed: 2},
			contract.LeaseHealth{Counts: map[string]int{"pending": 0, "retry_wait": 0, "leased": 0, "failed": 1}, Failed: 1},
			[]string{health.CodeDeliveryInvalid, health.CodeEvidenceInvalid, health.ReasonDeliveryFailed, health.ReasonEvidenceFailed}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := health.Evaluate(tc.nowMS, health.Census{MonitorItemCount: -1, Release: tc.recs})
			if !reflect.DeepEqual(r.Release.Evidence, tc.evidence) || !reflect.DeepEqual(r.Release.Delivery, tc.delivery) {
				t.Fatalf("release = %+v, want evidence %+v delivery %+v", r.Release, tc.evidence, tc.delivery)
			}
			want := append([]string{}, tc.reasons...)
			slices.Sort(want)
			if !slices.Equal(r.Reasons, want) {
				t.Fatalf("reasons %v, want %v", r.Reasons, want)
			}
		})
	}
}

// TestReportJSONContract: the document has exactly the contract's keys.
func TestReportJSONContract(t *testing.T) {
	r := health.Evaluate(base, monitorOnly(healthtest.Failed))
	raw, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]map[string]json.RawMessage
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		t.Fatal(err)
	}
	if keys := sortedKeys(top); !slices.Equal(keys, []string{"checked_at_ms", "monitor", "release", "schema", "status"}) {
		t.Fatalf("top-level keys %v", keys)
	}
	if string(top["schema"]) != `"localeflow.health.v1"` || string(top["status"]) != `"blocked"` {
		t.Fatalf("schema/status: %s", raw)
	}
	doc = map[string]map[string]json.RawMessage{}
	for _, k := range []string{"monitor", "release"} {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(top[k], &m); err != nil {
			t.Fatal(err)
		}
		doc[k] = m
	}
	if keys := sortedKeys(doc["monitor"]); !slices.Equal(keys, []string{"counts", "due", "expired_leases", "failed", "remote_failures"}) {
		t.Fatalf("monitor keys %v", keys)
	}
	var counts map[string]int
	if err := json.Unmarshal(doc["monitor"]["counts"], &counts); err != nil || len(counts) != 6 || counts["failed"] != 1 {
		t.Fatalf("counts %v %v", counts, err)
	}
	if keys := sortedKeys(doc["release"]); !slices.Equal(keys, []string{"delivery", "evidence"}) {
		t.Fatalf("release keys %v", keys)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

type fakeCensus struct {
	recs []monitor.Record
	rel  []health.ReleaseRecord
	err  error
}

func (f fakeCensus) Census(context.Context) ([]monitor.Record, error) { return f.recs, f.err }
func (f fakeCensus) ReleaseCensus(context.Context) ([]health.ReleaseRecord, error) {
	return f.rel, f.err
}

type fixedCount struct {
	n   int64
	err error
}

func (f fixedCount) ItemCount(context.Context) (int64, error) { return f.n, f.err }

func TestCheckerReadsBothAndReportsUnavailable(t *testing.T) {
	clock := core.ClockFunc(func() time.Time { return core.FromMillis(base + 2) })
	ok := fakeCensus{recs: []monitor.Record{healthtest.MonitorRecord("evt-1", healthtest.Watching, base)},
		rel: []health.ReleaseRecord{{EventID: "evt-1", SortKey: release.SKDelivery, Delivery: healthtest.Delivery("evt-1", "pending", base)}}}
	c, err := health.NewChecker(ok, fixedCount{n: 50}, ok, clock, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Check(context.Background())
	if err != nil || r.Status != health.StatusOK || r.Monitor.Counts["watching"] != 1 || r.Release.Delivery.Open != 1 ||
		r.Monitor.Counts["terminal"] != 49 || r.CheckedAtMS != base+2 {
		t.Fatalf("check = %+v, %v", r, err)
	}
	c, _ = health.NewChecker(ok, fixedCount{err: errors.New("denied")}, ok, clock, nil)
	if r, err := c.Check(context.Background()); err != nil || r.Monitor.Counts["terminal"] != 0 || r.TerminalApproximate {
		t.Fatalf("without item count: %+v, %v", r.Monitor, err)
	}
	down := fakeCensus{err: core.Retry(monitor.CodeStoreUnavailable)}
	c, _ = health.NewChecker(down, nil, ok, clock, nil)
	if _, err := c.Check(context.Background()); !core.HasCode(err, health.CodeUnavailable) || !core.IsRetryable(err) {
		t.Fatalf("monitor down: %v", err)
	}
	c, _ = health.NewChecker(ok, nil, down, clock, nil)
	if _, err := c.Check(context.Background()); !core.HasCode(err, health.CodeUnavailable) {
		t.Fatalf("release down: %v", err)
	}
}

// TestEvaluateReleaseEntries: a blocked release needs an operator (health
// blocked, an attention item with its code); a never-claimed job and an
// approval awaiting delivery are due work, not attention; an entry whose
// record does not belong in the index is invalid.
func TestEvaluateReleaseEntries(t *testing.T) {
	job := &release.JobRecord{EventID: "evt-1", PlanID: "plan-1", JobID: "job-1", Status: release.JobSucceeded, PayloadSHA256: strings.Repeat("a", 64), ReceivedMS: base, AwaitingClaim: true, Version: 1}
	approval := &release.ApprovalRecord{EventID: "evt-2", JobID: "job-1", ApprovedMS: base + 5, AwaitingDelivery: true, Version: 1}
	blocked := &release.BlockedRecord{EventID: "evt-3", Code: release.CodeAttemptsExhausted, BlockedMS: base + 1, Version: 1}
	stale := *job
	stale.AwaitingClaim = false
	r := health.Evaluate(base+1, health.Census{MonitorItemCount: -1, Release: []health.ReleaseRecord{
		{EventID: "evt-1", SortKey: "job#job-1", Job: job},
		{EventID: "evt-2", SortKey: "approval#job-1", Approval: approval},
		{EventID: "evt-3", SortKey: release.SKBlocked, Blocked: blocked},
		{EventID: "evt-4", SortKey: "job#job-1", Job: &stale},
	}})
	if r.Status != health.StatusBlocked || !slices.Equal(r.Reasons, []string{health.ReasonReleaseBlocked, release.CodeRecordInvalid}) {
		t.Fatalf("status %s, reasons %v", r.Status, r.Reasons)
	}
	byEvent := map[string]health.Item{}
	for _, it := range r.Items {
		if it.Kind != health.KindRelease {
			t.Fatalf("item kind %s", it.Kind)
		}
		byEvent[it.EventID] = it
	}
	if it := byEvent["evt-3"]; !it.Attention || it.State != health.StateBlocked || it.ErrorCode != release.CodeAttemptsExhausted || it.Key != release.SKBlocked {
		t.Fatalf("blocked item %+v", it)
	}
	if it := byEvent["evt-1"]; it.Attention || it.State != health.StateAwaitingClaim || !it.Due || it.NextDueMS != base || it.Key != "job#job-1" {
		t.Fatalf("job item %+v", it)
	}
	if it := byEvent["evt-2"]; it.Attention || it.State != health.StateAwaitingDelivery || it.Due || it.NextDueMS != base+5 {
		t.Fatalf("approval item %+v", it)
	}
	if it := byEvent["evt-4"]; !it.Attention || !it.Invalid {
		t.Fatalf("stale entry %+v", it)
	}
	if r.Release.Evidence.Open+r.Release.Delivery.Open+r.Release.Evidence.Failed+r.Release.Delivery.Failed != 0 {
		t.Fatalf("release entries counted as evidence or delivery: %+v", r.Release)
	}
}

// TestFailedJobBlocksHealth: a release one of whose jobs failed cannot be
// delivered until the job runs again upstream. Before, the failed job sat
// in no index and health stayed ok while the release stalled (found by the
// simulator, seed blocked_release_shows_in_health).
func TestFailedJobBlocksHealth(t *testing.T) {
	failed := &release.JobRecord{EventID: "evt-9", PlanID: "plan-9", JobID: "job-fr-FR", Status: release.JobFailed,
		ErrorCode: "provider.unavailable", PayloadSHA256: strings.Repeat("b", 64), ReceivedMS: base, Version: 1}
	if _, wakes, at, attention := release.Wake(failed); wakes || !attention || at != base {
		t.Fatalf("failed job: wakes %v, attention %v at %d; want attention only, at its receipt", wakes, attention, at)
	}
	r := health.Evaluate(base+1, health.Census{MonitorItemCount: -1, Release: []health.ReleaseRecord{
		{EventID: "evt-9", SortKey: "job#job-fr-FR", Job: failed},
	}})
	if r.Status != health.StatusBlocked || !slices.Equal(r.Reasons, []string{health.ReasonJobFailed}) {
		t.Fatalf("status %s, reasons %v", r.Status, r.Reasons)
	}
	if it := r.Items[0]; !it.Attention || it.State != health.StateJobFailed || it.ErrorCode != "provider.unavailable" || it.Key != "job#job-fr-FR" {
		t.Fatalf("failed job item %+v", it)
	}
}

// A claim leaves the wake key at next_poll_ms, so a leased record carries a
// wake time in the past for its whole lease: health must count it neither
// due nor overdue while the lease lives, and show when the lease ends.
func TestLeasedRecordWithPastWakeIsNotOverdueWhileItsLeaseLives(t *testing.T) {
	rec := healthtest.MonitorRecord("evt-1", healthtest.Leased, base)
	if wake, ok := rec.WakeMS(); !ok || wake >= rec.LeaseExpiresMS || wake > base {
		t.Fatalf("fixture: wake %d (%v) should be the past next_poll_ms, lease ends %d", wake, ok, rec.LeaseExpiresMS)
	}
	census := health.Census{MonitorItemCount: -1, Monitor: []monitor.Record{rec}}
	for _, now := range []int64{base + 2, base + healthtest.LeaseMS} {
		r := health.Evaluate(now, census)
		if r.Status != health.StatusOK || r.Monitor.Due != 0 || r.Monitor.ExpiredLeases != 0 || len(r.Reasons) != 0 {
			t.Fatalf("at +%d ms: status %s due %d expired %d reasons %v; want ok with nothing due or expired",
				now-base, r.Status, r.Monitor.Due, r.Monitor.ExpiredLeases, r.Reasons)
		}
		if len(r.Items) != 1 || r.Items[0].Due || r.Items[0].LeaseExpired || r.Items[0].Attention || r.Items[0].NextDueMS != rec.LeaseExpiresMS {
			t.Fatalf("at +%d ms: item %+v; want not due, not attention, next due at the lease end %d", now-base, r.Items, rec.LeaseExpiresMS)
		}
	}
	r := health.Evaluate(rec.LeaseExpiresMS, census)
	if r.Status != health.StatusBlocked || r.Monitor.ExpiredLeases != 1 || !r.Items[0].LeaseExpired || r.Items[0].NextDueMS != rec.LeaseExpiresMS {
		t.Fatalf("expired lease: status %s expired %d item %+v", r.Status, r.Monitor.ExpiredLeases, r.Items)
	}
}
