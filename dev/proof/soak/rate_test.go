package soak

import (
	"testing"
	"time"
)

// TestPollRateOfAnUnfinishedSoakIsOverTheRun: a soak whose changes never
// all became final (8 min budget, monitor_done 0) reported 14,258 polls
// as 14,258,000 polls/s (divided by 1 ms); the rate is then over the run.
func TestPollRateOfAnUnfinishedSoakIsOverTheRun(t *testing.T) {
	if got := pollRate(14_258, 0, 480*time.Second); got < 29.70 || got > 29.71 {
		t.Fatalf("unfinished soak: %.2f polls/s, want 29.70", got)
	}
	if got := pollRate(31_000, 125*time.Second, 130*time.Second); got != 248 {
		t.Fatalf("finished soak: %.2f polls/s, want 248", got)
	}
}
