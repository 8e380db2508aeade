package health_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/core/health"
	"github.com/localeflow/localeflow/core/health/healthtest"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/release"
)

const day = int64(24 * time.Hour / time.Millisecond)

// TestOpenChangePastItsAgeBlocks: health counted open changes but not
// their age, so a change the CMS kept non-terminal for weeks paged nobody.
// A monitor record open for longer than the max change age now blocks
// health with health.monitor.open_too_long (an age reason, a ticket).
func TestOpenChangePastItsAgeBlocks(t *testing.T) {
	limit := health.DefaultMaxChangeAge.Milliseconds()
	for _, variant := range []string{healthtest.Pending, healthtest.Watching, healthtest.RetryWait, healthtest.Leased} {
		t.Run(variant, func(t *testing.T) {
			c := monitorOnly(variant)
			at := base + limit // exactly the limit: not yet
			r := health.Evaluate(at, c)
			if slices.Contains(r.Reasons, health.ReasonChangeOpenTooLong) || r.Ages.OldestOpenChangeMS != limit {
				t.Fatalf("at the limit: reasons %v, ages %+v", r.Reasons, r.Ages)
			}
			r = health.Evaluate(at+1, c)
			if !slices.Contains(r.Reasons, health.ReasonChangeOpenTooLong) || r.Status != health.StatusBlocked || r.Ages.OldestOpenChangeMS != limit+1 ||
				r.Ages.OldestOpenChange != "evt-1" {
				t.Fatalf("past the limit: %s %v, ages %+v", r.Status, r.Reasons, r.Ages)
			}
			// (A leased record this old has an expired lease too.)
			if (variant != healthtest.Leased && r.Blocked(health.SeverityOperations)) || r.Blocked(health.SeverityBusiness) || !r.Blocked(health.SeverityAge) {
				t.Fatalf("severity of %v", r.Reasons)
			}
		})
	}
	// Finished and failed records are not open changes.
	for _, variant := range []string{healthtest.Terminal, healthtest.Failed, healthtest.RemoteFailure} {
		if r := health.Evaluate(base+10*limit, monitorOnly(variant)); r.Ages.OldestOpenChangeMS != 0 || slices.Contains(r.Reasons, health.ReasonChangeOpenTooLong) {
			t.Errorf("%s: ages %+v reasons %v", variant, r.Ages, r.Reasons)
		}
	}
	// A smaller limit applies.
	r := health.EvaluateWith(base+2*day, monitorOnly(healthtest.Watching), health.Limits{MaxChangeAge: 24 * time.Hour, MaxReleaseAge: time.Hour, ExpiryWarning: time.Hour})
	if !slices.Contains(r.Reasons, health.ReasonChangeOpenTooLong) {
		t.Errorf("1-day limit after 2 days: %v", r.Reasons)
	}
}

// TestOpenReleasePastItsAgeBlocks: the oldest open release record (a
// lease not finished, a job awaiting its claim, an approval awaiting the
// delivery) older than the max release age blocks health.
func TestOpenReleasePastItsAgeBlocks(t *testing.T) {
	limit := health.DefaultMaxReleaseAge.Milliseconds()
	job := &release.JobRecord{EventID: "evt-1", JobID: "job-1", PlanID: "plan-42", Status: release.JobSucceeded,
		ReceivedMS: base, AwaitingClaim: true, Version: 1}
	for name, rec := range map[string]health.ReleaseRecord{
		"evidence pending":   {EventID: "evt-1", SortKey: release.SKEvidencePrefix + "req-1", Evidence: healthtest.Evidence("evt-1", "req-1", "retry_wait", base)},
		"delivery leased":    {EventID: "evt-1", SortKey: release.SKDelivery, Delivery: healthtest.Delivery("evt-1", "pending", base)},
		"job awaiting claim": {EventID: "evt-1", SortKey: release.SKJobPrefix + "job-1", Job: job},
	} {
		t.Run(name, func(t *testing.T) {
			c := health.Census{MonitorItemCount: -1, Release: []health.ReleaseRecord{rec}}
			if r := health.Evaluate(base+limit, c); slices.Contains(r.Reasons, health.ReasonReleaseOpenTooLong) || r.Ages.OldestOpenReleaseMS != limit {
				t.Fatalf("at the limit: %v %+v", r.Reasons, r.Ages)
			}
			r := health.Evaluate(base+limit+1, c)
			if !slices.Contains(r.Reasons, health.ReasonReleaseOpenTooLong) || health.Severity(health.ReasonReleaseOpenTooLong) != health.SeverityAge {
				t.Fatalf("past the limit: %v %+v", r.Reasons, r.Ages)
			}
		})
	}
	failed := health.Census{MonitorItemCount: -1, Release: []health.ReleaseRecord{{EventID: "evt-1", SortKey: release.SKEvidencePrefix + "req-1",
		Evidence: healthtest.Evidence("evt-1", "req-1", "failed", base)}}}
	if r := health.Evaluate(base+10*limit, failed); r.Ages.OldestOpenReleaseMS != 0 {
		t.Errorf("a failed record is not open: %+v", r.Ages)
	}
}

// TestRecordAboutToExpireUnfinishedBlocks: a record still in an index
// (here a terminal change whose outcome is still owed) with a TTL expiry
// within the warning blocks health: DynamoDB would delete it unfinished.
func TestRecordAboutToExpireUnfinishedBlocks(t *testing.T) {
	rec := healthtest.MonitorRecord("evt-1", healthtest.Terminal, base)
	rec.OutboxMS = rec.UpdatedMS
	rec.ExpiresAt = (rec.UpdatedMS + 90*day) / 1000
	if _, err := monitor.Validate(rec); err != nil {
		t.Fatalf("fixture: %v", err)
	}
	c := health.Census{MonitorItemCount: -1, Monitor: []monitor.Record{rec}}
	warn := health.DefaultExpiryWarning.Milliseconds()
	if r := health.Evaluate(rec.ExpiresAt*1000-warn-1, c); r.Ages.ExpiringUnfinished != 0 || slices.Contains(r.Reasons, health.ReasonExpiringUnfinished) {
		t.Fatalf("before the warning: %v %+v", r.Reasons, r.Ages)
	}
	r := health.Evaluate(rec.ExpiresAt*1000-warn, c)
	if r.Ages.ExpiringUnfinished != 1 || !slices.Contains(r.Reasons, health.ReasonExpiringUnfinished) {
		t.Fatalf("within the warning: %v %+v", r.Reasons, r.Ages)
	}
}

// TestReasonSeverity: the CMS failing a change on purpose and a job failed
// upstream are business outcomes (tickets); the age reasons are tickets;
// everything else pages.
func TestReasonSeverity(t *testing.T) {
	for reason, want := range map[string]string{
		health.ReasonMonitorRemoteFailures: health.SeverityBusiness, health.ReasonJobFailed: health.SeverityBusiness,
		health.ReasonChangeOpenTooLong: health.SeverityAge, health.ReasonReleaseOpenTooLong: health.SeverityAge,
		health.ReasonExpiringUnfinished: health.SeverityAge,
		health.ReasonMonitorFailed:      health.SeverityOperations, health.ReasonMonitorExpiredLeases: health.SeverityOperations,
		health.ReasonReleaseBlocked: health.SeverityOperations, monitor.CodeStateInvalid: health.SeverityOperations,
	} {
		if got := health.Severity(reason); got != want {
			t.Errorf("Severity(%s) = %s, want %s", reason, got, want)
		}
	}
}

func TestLimitsValidate(t *testing.T) {
	if err := health.DefaultLimits().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, l := range []health.Limits{
		{MaxChangeAge: 0, MaxReleaseAge: time.Hour, ExpiryWarning: time.Hour},
		{MaxChangeAge: time.Hour, MaxReleaseAge: -time.Hour, ExpiryWarning: time.Hour},
		{MaxChangeAge: time.Hour, MaxReleaseAge: time.Hour, ExpiryWarning: 1500 * time.Millisecond},
		{MaxChangeAge: health.MaxAgeLimit + time.Second, MaxReleaseAge: time.Hour, ExpiryWarning: time.Hour},
	} {
		if err := l.Validate(); err == nil || !strings.Contains(err.Error(), health.CodeLimitsInvalid) {
			t.Errorf("%+v: %v", l, err)
		}
	}
}
