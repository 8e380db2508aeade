package monitor_test

import (
	"context"
	"testing"
	"time"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
)

// TestRetryAfterIsAFloorOnTheBackoff: a 503 with Retry-After 120 s was
// retried after the 5 s backoff; the retry now waits for the longer of the
// server's Retry-After and the backoff (never shorter than the backoff).
func TestRetryAfterIsAFloorOnTheBackoff(t *testing.T) {
	for _, tt := range []struct {
		name  string
		after time.Duration
		want  time.Duration
	}{
		{"longer than the backoff", 120 * time.Second, 120 * time.Second},
		// The backoff of evt-ra's first failure: 5 s jittered (in [2.5 s, 5 s]).
		{"shorter than the backoff", time.Second, monitor.DefaultConfig().RetryDelayFor("evt-ra", 1)},
		{"none", 0, monitor.DefaultConfig().RetryDelayFor("evt-ra", 1)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := setup(t, monitor.Config{WorkerID: "w-1"})
			register(t, b, "evt-ra")
			unavailable := core.WithRetryAfter(core.Wrap("cms.http_503", true, nil), tt.after)
			out, err := b.svc.PollOnce(context.Background(), "evt-ra", reader(failWith(unavailable)))
			if err != nil {
				t.Fatal(err)
			}
			if out.State != monitor.StateRetryWait || out.NextPoll.Sub(t0) != tt.want {
				t.Fatalf("state %s, next poll after %s, want %s", out.State, out.NextPoll.Sub(t0), tt.want)
			}
		})
	}
}

// TestOutageTolerance: the longest CMS outage a change survives is the sum
// of the backoffs between its consecutive failures.
func TestOutageTolerance(t *testing.T) {
	for _, tt := range []struct {
		cfg  monitor.Config
		want time.Duration
	}{
		{monitor.Config{}, 75 * time.Second}, // 5+10+20+40
		{monitor.Config{MaxConsecutiveFailures: 10}, (5 + 10 + 20 + 40 + 80 + 160 + 300 + 300 + 300) * time.Second},
		{monitor.Config{MaxConsecutiveFailures: 20, MaxDelay: time.Hour}, (5+10+20+40+80+160+320+640+1280+2560)*time.Second + 9*time.Hour},
		{monitor.Config{MaxConsecutiveFailures: 1}, 0},
	} {
		// Every backoff is jittered over [d, d + d/2]: the guarantee is
		// the unjittered sum; the sum of the upper bounds is the most.
		if got := monitor.OutageTolerance(tt.cfg.WithDefaults()); got != tt.want {
			t.Errorf("%+v: %s, want %s", tt.cfg, got, tt.want)
		}
		if got := monitor.OutageToleranceUpTo(tt.cfg.WithDefaults()); got != tt.want+tt.want/2 {
			t.Errorf("%+v: up to %s, want %s", tt.cfg, got, tt.want+tt.want/2)
		}
	}
}
