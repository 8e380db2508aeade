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
			"LOCALEFLOW_EVENT_BUS is not a function setting left to the operator"},
		{"local variable", func(p *Props) { p.SettingsEnv = map[string]string{contract.EnvWorkerID: "w1"} },
			"LOCALEFLOW_WORKER_ID is not a function setting left to the operator"},
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
