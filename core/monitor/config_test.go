package monitor_test

import (
	"testing"
	"time"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
)

func TestDefaultConfigIsTheDesignDefaults(t *testing.T) {
	c := monitor.DefaultConfig()
	if c.PollInterval != 30*time.Second || c.BaseDelay != 5*time.Second || c.MaxDelay != 300*time.Second ||
		c.Lease != 600*time.Second || c.MaxConsecutiveFailures != 5 || c.OutboxGrace != 30*time.Second ||
		c.SweepGrace != 30*time.Second {
		t.Fatalf("defaults = %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	day := 86_400 * time.Second
	tests := []struct {
		name string
		edit func(*monitor.Config)
		code string
	}{
		{"poll interval at limit", func(c *monitor.Config) { c.PollInterval = day }, ""},
		{"poll interval over limit", func(c *monitor.Config) { c.PollInterval = day + time.Millisecond }, monitor.CodeDelayInvalid},
		{"negative base", func(c *monitor.Config) { c.BaseDelay = -time.Second }, monitor.CodeDelayInvalid},
		{"sub-millisecond base", func(c *monitor.Config) { c.BaseDelay = time.Microsecond }, monitor.CodeDelayInvalid},
		{"fractional millisecond", func(c *monitor.Config) { c.BaseDelay = 1500 * time.Microsecond }, monitor.CodeDelayInvalid},
		{"max over limit", func(c *monitor.Config) { c.MaxDelay = day + time.Second }, monitor.CodeDelayInvalid},
		{"base above max", func(c *monitor.Config) { c.BaseDelay, c.MaxDelay = 10*time.Second, 5*time.Second }, monitor.CodeDelayInvalid},
		{"base equals max", func(c *monitor.Config) { c.BaseDelay, c.MaxDelay = 5*time.Second, 5*time.Second }, ""},
		{"sweep grace at limit", func(c *monitor.Config) { c.SweepGrace = monitor.MaxSweepGrace }, ""},
		{"sweep grace over limit", func(c *monitor.Config) { c.SweepGrace = monitor.MaxSweepGrace + time.Millisecond }, monitor.CodeDelayInvalid},
		{"sweep grace negative", func(c *monitor.Config) { c.SweepGrace = -time.Second }, monitor.CodeDelayInvalid},
		{"sweep grace sub-millisecond", func(c *monitor.Config) { c.SweepGrace = time.Microsecond }, monitor.CodeDelayInvalid},
		{"lease at limit", func(c *monitor.Config) { c.Lease = day }, ""},
		{"lease over limit", func(c *monitor.Config) { c.Lease = day + time.Millisecond }, monitor.CodeLeaseInvalid},
		{"lease negative", func(c *monitor.Config) { c.Lease = -1 }, monitor.CodeLeaseInvalid},
		{"failures 1", func(c *monitor.Config) { c.MaxConsecutiveFailures = 1 }, ""},
		{"failures 20", func(c *monitor.Config) { c.MaxConsecutiveFailures = 20 }, ""},
		{"failures 21", func(c *monitor.Config) { c.MaxConsecutiveFailures = 21 }, monitor.CodeMaxFailuresInvalid},
		{"failures negative", func(c *monitor.Config) { c.MaxConsecutiveFailures = -1 }, monitor.CodeMaxFailuresInvalid},
		{"outbox grace 1 s", func(c *monitor.Config) { c.OutboxGrace = time.Second }, ""},
		{"outbox grace negative", func(c *monitor.Config) { c.OutboxGrace = -time.Second }, monitor.CodeDelayInvalid},
		{"outbox grace over limit", func(c *monitor.Config) { c.OutboxGrace = day + time.Millisecond }, monitor.CodeDelayInvalid},
		{"hint gap 1 ms", func(c *monitor.Config) { c.HintMinGap = time.Millisecond }, ""},
		{"hint gap negative", func(c *monitor.Config) { c.HintMinGap = -time.Second }, monitor.CodeHintGapInvalid},
		{"hint gap fractional millisecond", func(c *monitor.Config) { c.HintMinGap = 1500 * time.Microsecond }, monitor.CodeHintGapInvalid},
		{"hint gap over limit", func(c *monitor.Config) { c.HintMinGap = day + time.Millisecond }, monitor.CodeHintGapInvalid},
		{"worker not a token", func(c *monitor.Config) { c.WorkerID = "worker 1" }, monitor.CodeWorkerInvalid},
		{"worker too long", func(c *monitor.Config) { c.WorkerID = string(make([]byte, 129)) }, monitor.CodeWorkerInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := monitor.DefaultConfig()
			tt.edit(&c)
			err := c.Validate()
			if tt.code == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !core.HasCode(err, tt.code) {
				t.Fatalf("Validate = %v, want %s", err, tt.code)
			}
			if _, err := monitor.NewService(nil, nil, nil, c); err == nil {
				t.Fatal("NewService accepted an invalid config")
			}
		})
	}
}

func TestRetryDelay(t *testing.T) {
	tests := []struct {
		failures int
		want     time.Duration
	}{
		{0, 5 * time.Second}, {1, 5 * time.Second}, {2, 10 * time.Second}, {3, 20 * time.Second},
		{4, 40 * time.Second}, {5, 80 * time.Second}, {6, 160 * time.Second}, {7, 300 * time.Second},
		{20, 300 * time.Second}, {64, 300 * time.Second}, {1 << 30, 300 * time.Second},
	}
	for _, tt := range tests {
		if got := (monitor.Config{BaseDelay: 5 * time.Second, MaxDelay: 300 * time.Second}).RetryDelay(tt.failures); got != tt.want {
			t.Errorf("RetryDelay(%d) = %v, want %v", tt.failures, got, tt.want)
		}
	}
	if got := (monitor.Config{BaseDelay: 86_400 * time.Second, MaxDelay: 86_400 * time.Second}).RetryDelay(40); got != 86_400*time.Second {
		t.Errorf("overflow not capped: %v", got)
	}
}
