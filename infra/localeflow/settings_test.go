package localeflow

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"

	"github.com/localeflow/localeflow/contract"
	pollerconfig "github.com/localeflow/localeflow/functions/poller/config"
	"github.com/localeflow/localeflow/topology"
)

// validSettings sets every field of Settings to a non-default value the
// loaders accept together.
var validSettings = Settings{
	LogLevel: "DEBUG", DeadlineMargin: 3 * time.Second, CMSTimeout: 20 * time.Second, KeyTTL: 10 * time.Minute,
	EventMaxAge: 48 * time.Hour, EventV1: contract.EventV1Accept,
	MonitorLease: 15 * time.Minute, PollInterval: time.Minute, RetryBaseDelay: 10 * time.Second, HintMinGap: 2 * time.Second,
	PollConcurrency:  32,
	EvidenceRevision: "rev-2", EvidenceLease: 100 * time.Second, EvidenceMaxAttempts: 7, EvidenceTimeout: 25 * time.Second,
	ApprovalTTL: 240 * time.Hour, DeliveryMaxAttempts: 8,
	HealthMaxChangeAge: 240 * time.Hour, HealthMaxReleaseAge: 96 * time.Hour, HealthExpiryWarning: 72 * time.Hour,
}

// TestSettingsCoverEveryOperatorVariable: Settings has exactly one field
// per variable of contract.FunctionEnv left to the operator, so a new
// setting in contract/ fails here until the construct can deploy it.
func TestSettingsCoverEveryOperatorVariable(t *testing.T) {
	var tags []string
	typ := reflect.TypeFor[Settings]()
	for i := range typ.NumField() {
		tags = append(tags, typ.Field(i).Tag.Get("env"))
	}
	want := SettingVariables()
	slices.Sort(tags)
	slices.Sort(want)
	if !slices.Equal(tags, want) {
		t.Fatalf("Settings fields set\n%v\nthe variables left to the operator are\n%v", tags, want)
	}
	env := validSettings.env()
	for _, name := range want {
		if env[name] == "" {
			t.Errorf("validSettings leaves %s at its default: the deploy test would not see it", name)
		}
	}
}

// functionEnv is one function's Lambda environment in the template.
func (s synthesized) functionEnv(t testing.TB, dir string) map[string]any {
	t.Helper()
	for _, fn := range s.topo.Functions {
		if fn.Dir == dir {
			return s.props(t, "AWS::Lambda::Function", fn.Logical)["Environment"].(map[string]any)["Variables"].(map[string]any)
		}
	}
	t.Fatalf("no function %s", dir)
	return nil
}

// TestEverySettingDeployable: every setting given through the typed props
// or the raw ones lands on exactly the functions that read it, with the
// value given; a per-function setting on that function only.
func TestEverySettingDeployable(t *testing.T) {
	raw := map[string]string{}
	for name, v := range validSettings.env() {
		raw[name] = v
	}
	for _, tc := range []struct {
		name  string
		props func(*Props)
	}{
		{"typed", func(p *Props) { p.Settings = validSettings }},
		{"raw", func(p *Props) { p.SettingsEnv = raw }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testProps()
			tc.props(p)
			p.Functions = map[string]FunctionOptions{"poller": {Settings: map[string]string{contract.EnvCMSTimeout: "7s"}}}
			s := synth(t, p)
			for _, fn := range s.topo.Functions {
				vars := s.functionEnv(t, fn.Dir)
				reads := contract.Names(contract.FunctionEnv[fn.Dir], contract.Operator)
				for name, want := range validSettings.env() {
					if fn.Dir == "poller" && name == contract.EnvCMSTimeout {
						want = "7s"
					}
					got, set := vars[name]
					switch {
					case slices.Contains(reads, name) && got != want:
						t.Errorf("%s: %s = %v, want %q", fn.Dir, name, got, want)
					case !slices.Contains(reads, name) && set:
						t.Errorf("%s: %s set although the function does not read it", fn.Dir, name)
					}
				}
			}
		})
	}
}

// TestInvalidSettingFailsWithTheLoadersMessage: a value the function's
// config loader refuses at cold start fails the construct with the
// loader's message (one case per variable left to the operator).
func TestInvalidSettingFailsWithTheLoadersMessage(t *testing.T) {
	cases := []struct{ name, value, message string }{
		{contract.EnvLogLevel, "LOUD", `LOCALEFLOW_LOG_LEVEL`},
		{contract.EnvDeadlineMargin, "-1s", `LOCALEFLOW_DEADLINE_MARGIN (-1s) must not be negative`},
		{contract.EnvCMSTimeout, "0s", `LOCALEFLOW_CMS_TIMEOUT (0s) must be positive`},
		{contract.EnvKeyTTL, "-5m", `LOCALEFLOW_KEY_TTL (-5m0s) must not be negative`},
		{contract.EnvEventMaxAge, "soon", `LOCALEFLOW_EVENT_MAX_AGE ("soon") is not a Go duration`},
		{contract.EnvEventV1, "yes", `LOCALEFLOW_EVENT_V1 ("yes") must be accept or refuse`},
		{contract.EnvMonitorLease, "5s", `LOCALEFLOW_MONITOR_LEASE (5s) must outlast LOCALEFLOW_CMS_TIMEOUT (10s)`},
		{contract.EnvPollInterval, "25h", `LOCALEFLOW_POLL_INTERVAL (25h0m0s) must be a Go duration of whole milliseconds from 1ms to 24h0m0s`},
		{contract.EnvRetryBaseDelay, "10m", `LOCALEFLOW_RETRY_BASE_DELAY (10m0s) must not exceed LOCALEFLOW_RETRY_MAX_DELAY (5m0s)`},
		{contract.EnvHintMinGap, "1us", `LOCALEFLOW_HINT_MIN_GAP (1µs) must be a whole number of milliseconds`},
		{contract.EnvPollConcurrency, "999", `LOCALEFLOW_POLL_CONCURRENCY (999) must be 1..256`},
		{contract.EnvEvidenceRevision, "rev 2", `LOCALEFLOW_EVIDENCE_REVISION ("rev 2") must be 1..256 characters`},
		{contract.EnvEvidenceLease, "2h", `LOCALEFLOW_EVIDENCE_LEASE (2h0m0s) must be more than 0 and at most 1h0m0s`},
		{contract.EnvEvidenceMaxAttempts, "0", `LOCALEFLOW_EVIDENCE_MAX_ATTEMPTS (0) must be 1..20`},
		{contract.EnvEvidenceTimeout, "0s", `LOCALEFLOW_EVIDENCE_TIMEOUT (0s) must be positive`},
		{contract.EnvApprovalTTL, "-1h", `LOCALEFLOW_APPROVAL_TTL (-1h0m0s) must be positive`},
		{contract.EnvHealthMaxChangeAge, "0s", `health.limits_invalid: max change age 0s must be whole seconds`},
		{contract.EnvHealthMaxReleaseAge, "10000h", `health.limits_invalid: max release age 10000h0m0s must be whole seconds`},
		{contract.EnvHealthExpiryWarning, "1.5s", `health.limits_invalid: expiry warning 1.5s must be whole seconds`},
		{contract.EnvDeliveryMaxAttempts, "x", `LOCALEFLOW_DELIVERY_MAX_ATTEMPTS ("x") is not an integer`},
	}
	var covered []string
	for _, tc := range cases {
		covered = append(covered, tc.name)
		t.Run(tc.name, func(t *testing.T) {
			p := testProps()
			p.SettingsEnv = map[string]string{tc.name: tc.value}
			_, err := New(awscdk.NewStack(awscdk.NewApp(nil), nil, nil), "LF", p)
			if err == nil || !strings.Contains(err.Error(), tc.message) || !strings.Contains(err.Error(), "refused by its config loader") {
				t.Fatalf("%s=%s: err = %v, want the loader's %q", tc.name, tc.value, err, tc.message)
			}
		})
	}
	for _, name := range SettingVariables() {
		if !slices.Contains(covered, name) {
			t.Errorf("no invalid-value case for %s", name)
		}
	}
}

// TestSettingsRefuseUnknownAndConflicting: only variables left to the
// operator are settings; a per-function setting only for a variable that
// function reads; one variable not given twice with different values.
func TestSettingsRefuseUnknownAndConflicting(t *testing.T) {
	for _, tc := range []struct {
		name    string
		props   func(*Props)
		message string
	}{
		{"stack variable", func(p *Props) { p.SettingsEnv = map[string]string{contract.EnvEventBus: "other"} },
			"setting LOCALEFLOW_EVENT_BUS is stack-owned: the stack sets it from HostProps.EventBus"},
		{"stack table", func(p *Props) { p.SettingsEnv = map[string]string{contract.EnvMonitorTable: "t"} },
			"setting LOCALEFLOW_MONITOR_TABLE is stack-owned: the stack sets it from Props.Prefix"},
		{"stack URL", func(p *Props) { p.SettingsEnv = map[string]string{contract.EnvCMSBaseURL: "https://cms.example.org"} },
			"setting LOCALEFLOW_CMS_BASE_URL is stack-owned: the stack sets it from Props.CMSBaseURL"},
		{"stack key secret", func(p *Props) {
			p.SettingsEnv = map[string]string{contract.SecretARN(contract.KeyEvent): "arn:aws:secretsmanager:us-east-1:1:secret:x"}
		}, "setting LOCALEFLOW_EVENT_KEY_SECRET_ARN is stack-owned: the stack sets it to its own key secret"},
		{"local variable", func(p *Props) { p.SettingsEnv = map[string]string{contract.EnvWorkerID: "w1"} },
			"setting LOCALEFLOW_WORKER_ID is for local runs only"},
		{"retired variable", func(p *Props) { p.SettingsEnv = map[string]string{contract.EnvEventRefuseV1Retired: "1"} },
			"setting LOCALEFLOW_EVENT_REFUSE_V1 is retired"},
		{"typo", func(p *Props) { p.SettingsEnv = map[string]string{"LOCALEFLOW_POLL_INTERVALL": "60s"} },
			"setting LOCALEFLOW_POLL_INTERVALL is not a variable any function reads (did you mean LOCALEFLOW_POLL_INTERVAL?)"},
		{"typo of the name's start", func(p *Props) { p.SettingsEnv = map[string]string{"LOCALFLOW_LOG_LEVEL": "WARN"} },
			"(did you mean LOCALEFLOW_LOG_LEVEL?)"},
		{"per-function typed setting", func(p *Props) {
			p.Functions = map[string]FunctionOptions{"poller": {Settings: map[string]string{contract.EnvSweepGrace: "10s"}}}
		}, `Functions["poller"].Settings: LOCALEFLOW_SWEEP_GRACE is stack-owned: set it with Props.SweepGrace`},
		{"per-function typo", func(p *Props) {
			p.Functions = map[string]FunctionOptions{"poller": {Settings: map[string]string{"LOCALEFLOW_CMS_TIMEOUTS": "5s"}}}
		}, "did you mean LOCALEFLOW_CMS_TIMEOUT?"},
		{"typed setting twice", func(p *Props) {
			p.SweepGrace = 20 * time.Second
			p.SettingsEnv = map[string]string{contract.EnvSweepGrace: "10s"}
		}, "setting LOCALEFLOW_SWEEP_GRACE given twice (20s in Props.SweepGrace"},
		{"typed setting not a number", func(p *Props) {
			p.SettingsEnv = map[string]string{contract.EnvMaxConsecutiveFailures: "ten"}
		}, "setting LOCALEFLOW_MAX_CONSECUTIVE_FAILURES=\"ten\" must be a positive integer"},
		{"typed setting out of range", func(p *Props) {
			p.SettingsEnv = map[string]string{contract.EnvTextRetention: "10m"}
		}, "TextRetention 10m0s must be at least 1h"},
		{"not read by the function", func(p *Props) {
			p.Functions = map[string]FunctionOptions{"health": {Settings: map[string]string{contract.EnvPollInterval: "1m"}}}
		}, `Functions["health"].Settings: LOCALEFLOW_POLL_INTERVAL is not a setting the health reads`},
		{"conflict", func(p *Props) {
			p.Settings.PollInterval = time.Minute
			p.SettingsEnv = map[string]string{contract.EnvPollInterval: "2m"}
		}, "LOCALEFLOW_POLL_INTERVAL given twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testProps()
			tc.props(p)
			_, err := New(awscdk.NewStack(awscdk.NewApp(nil), nil, nil), "LF", p)
			if err == nil || !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("err = %v, want %q", err, tc.message)
			}
		})
	}
}

// TestRawTypedSettingsApplyThroughTheirProps: a stack-owned variable the
// construct offers as a typed prop, given as a raw setting (make SETTINGS,
// the app's context, Props.SettingsEnv), is applied as that prop: the
// function's environment, the outage tolerance and the alarms see it. It
// used to be dropped: the defaults deployed.
func TestRawTypedSettingsApplyThroughTheirProps(t *testing.T) {
	p := testProps()
	p.SettingsEnv = map[string]string{
		contract.EnvSweepGrace: "10s", contract.EnvMaxConsecutiveFailures: "10", contract.EnvRetryMaxDelay: "10m",
		contract.EnvTextRetention: "24h", contract.EnvMonitorRetention: "1000h", contract.EnvPollInterval: "60s",
	}
	cfg, err := resolve(p)
	if err != nil {
		t.Fatal(err)
	}
	env := cfg.pollerStack().Env()
	for name, want := range map[string]string{contract.EnvSweepGrace: "10s", contract.EnvMaxConsecutiveFailures: "10",
		contract.EnvRetryMaxDelay: "10m0s", contract.EnvMonitorRetention: "1000h0m0s"} {
		if env[name] != want {
			t.Errorf("poller %s = %q, want %q", name, env[name], want)
		}
	}
	if cfg.textRetention != 24*time.Hour {
		t.Errorf("text retention %s, want 24h", cfg.textRetention)
	}
	if cfg.settings["poller"][contract.EnvPollInterval] != "60s" {
		t.Errorf("poller settings %v", cfg.settings["poller"])
	}
	for _, fn := range []string{"poller", "coordinator", "health"} {
		for name := range cfg.settings[fn] {
			if _, typed := typedSettings[name]; typed {
				t.Errorf("%s: typed variable %s left among the raw settings", fn, name)
			}
		}
	}
	// The tolerance follows (10 failures, 10 min cap: as the context test).
	if got := cfg.OutageToleranceLine(); !strings.HasPrefix(got, "CMS outage tolerance: 30m35s guaranteed") {
		t.Errorf("tolerance %q", got)
	}
	// The caller's props are left as given.
	if p.SweepGrace != 0 || len(p.SettingsEnv) != 6 {
		t.Errorf("props changed: %+v", p)
	}
	// The same value twice is one value.
	p.SweepGrace = 10 * time.Second
	if _, err := resolve(p); err != nil {
		t.Errorf("same value in the prop and raw: %v", err)
	}
}

// TestEveryStackVariableIsAppliedOrRefusedByName: no variable a function
// reads can be given as a raw setting and silently ignored.
func TestEveryStackVariableIsAppliedOrRefusedByName(t *testing.T) {
	for _, name := range knownVariables() {
		err := refuseSetting("setting", name)
		switch setBy(name) {
		case contract.Operator:
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
		case contract.Stack:
			_, typed := typedSettings[name]
			_, owned := stackOwnedProps[name]
			if !typed && !owned && !strings.HasSuffix(name, contract.SecretARNSuffix) {
				t.Errorf("%s: stack-owned with no prop named", name)
			}
			if err == nil || !strings.Contains(err.Error(), "stack-owned") {
				t.Errorf("%s: %v", name, err)
			}
		default:
			if err == nil {
				t.Errorf("%s accepted", name)
			}
		}
	}
}

// TestSecretsAreTheTopologys: the secrets the construct creates are the
// ones `localeflow keys` reads (topology.Secrets): same names, same keys.
func TestSecretsAreTheTopologys(t *testing.T) {
	if len(secretSpecs) != len(topology.Secrets) {
		t.Fatalf("%d secrets, topology lists %d", len(secretSpecs), len(topology.Secrets))
	}
	for i, s := range secretSpecs {
		want := topology.Secrets[i]
		if s.Logical != want.Logical || s.Stem != want.Stem || s.Env != contract.SecretARN(want.Key) {
			t.Errorf("secret %+v, topology %+v", s, want)
		}
	}
}

// TestEventV1SettingSaysAcceptAndRefuse: the typed v1 setting can state
// both values (the retired bool could only state the default) and leaves
// the variable unset for the default; the deploy test above carries accept
// to the functions.
func TestEventV1SettingSaysAcceptAndRefuse(t *testing.T) {
	for v, want := range map[contract.EventV1]string{contract.EventV1Accept: "accept", contract.EventV1Refuse: "refuse", "": ""} {
		got, set := Settings{EventV1: v}.env()[contract.EnvEventV1]
		if got != want || set != (want != "") {
			t.Errorf("EventV1 %q: %s = %q (set %v), want %q", v, contract.EnvEventV1, got, set, want)
		}
		p := testProps()
		p.Settings = Settings{EventV1: v}
		if _, err := resolve(p); err != nil {
			t.Errorf("EventV1 %q refused: %v", v, err)
		}
	}
}

// TestPollerStackDefaultsArePollerconfigs: a stack that sets none of the
// poller's stack settings gives the poller exactly
// pollerconfig.DefaultStack, the environment the simulation and the cost
// benchmarks compare their poller configuration with
// (dev/proof/harness TestPollerConfigIsTheStacks).
func TestPollerStackDefaultsArePollerconfigs(t *testing.T) {
	cfg, err := resolve(testProps())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.pollerStack(), pollerconfig.DefaultStack(); got != want {
		t.Fatalf("the stack's poller settings %+v, pollerconfig.DefaultStack %+v", got, want)
	}
	vars := synth(t, testProps()).functionEnv(t, "poller")
	for name, want := range pollerconfig.DefaultStack().Env() {
		if vars[name] != want {
			t.Errorf("poller %s = %v, want %q", name, vars[name], want)
		}
	}
}
