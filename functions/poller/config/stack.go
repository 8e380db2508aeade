package config

import (
	"strconv"
	"time"

	"github.com/localeflow/localeflow/adapters/secretkey"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/monitor"
)

// Stack is what the stack decides for the poller besides its resources:
// the settings every template states (contract.Stack variables). The
// CDK construct (infra/localeflow) renders the function's variables with
// Env, so the simulation, the soak, the fault suite and the cost
// benchmarks can compare what they run with what a deployment runs
// (RunScale) without importing infra/.
type Stack struct {
	MaxConsecutiveFailures int
	RetryMaxDelay          time.Duration
	Retention              time.Duration
	SweepGrace             time.Duration
}

// DefaultStack is Stack for a deployment that sets none of them.
func DefaultStack() Stack {
	m := monitor.Config{}.WithDefaults()
	return Stack{MaxConsecutiveFailures: m.MaxConsecutiveFailures, RetryMaxDelay: m.MaxDelay,
		Retention: DefaultMonitorRetention, SweepGrace: m.SweepGrace}
}

// Env is s as the poller's variables.
func (s Stack) Env() map[string]string {
	return map[string]string{
		contract.EnvMaxConsecutiveFailures: strconv.Itoa(s.MaxConsecutiveFailures),
		contract.EnvRetryMaxDelay:          s.RetryMaxDelay.String(),
		contract.EnvMonitorRetention:       s.Retention.String(),
		contract.EnvSweepGrace:             s.SweepGrace.String(),
	}
}

// RunScale is c without what a run may choose for itself: where things
// are (tables, queues, bus, the CMS, its keys, the deployment's name),
// the time scale (the monitor's delays, leases, graces and the CMS
// timeout; a simulation compresses days into seconds), the load knobs
// (concurrency, the failure budget, the deadline margin), the worker id,
// plain http for local servers and the log level. What is left decides
// what is stored and what is accepted (the retention that gives finished
// records their expires_at, v1 signatures, the event window, key
// re-reads): a simulation or a benchmark must run it exactly as a
// deployment does.
func (c Config) RunScale() Config {
	c.Deployment, c.MonitorTable, c.PollQueueURL, c.QuarantineURL, c.EventBus, c.CMSBaseURL = "", "", "", "", "", ""
	c.CMSKey, c.EventKey = secretkey.Source{}, secretkey.Source{}
	c.CMSTimeout, c.Concurrency, c.Margin, c.InsecureHTTP, c.LogLevel = 0, 0, 0, false, nil
	c.Monitor = monitor.Config{}
	return c
}
