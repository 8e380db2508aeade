package localeflow

import (
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/localeflow/localeflow/contract"
	coordinatorconfig "github.com/localeflow/localeflow/functions/coordinator/config"
	healthconfig "github.com/localeflow/localeflow/functions/health/config"
	pollerconfig "github.com/localeflow/localeflow/functions/poller/config"
)

// Settings are the functions' settings left to the operator
// (contract.Operator: the function has a default and the stack sets the
// variable only when a value is given). Each field names its variable in
// its env tag; a zero field keeps the function's default. A setting is set
// on every function that reads the variable (contract.FunctionEnv); a
// value for one function only goes in FunctionOptions.Settings.
//
// Every value is checked at synth by the functions' own config loaders
// (functions/<fn>/config), so a value the function would refuse at cold
// start fails synth with the same message.
type Settings struct {
	// Every function.
	LogLevel string `env:"LOCALEFLOW_LOG_LEVEL"` // DEBUG, INFO, WARN, ERROR

	// Poller and coordinator.
	DeadlineMargin time.Duration `env:"LOCALEFLOW_DEADLINE_MARGIN"`
	CMSTimeout     time.Duration `env:"LOCALEFLOW_CMS_TIMEOUT"`
	KeyTTL         time.Duration `env:"LOCALEFLOW_KEY_TTL"`
	EventMaxAge    time.Duration `env:"LOCALEFLOW_EVENT_MAX_AGE"`
	// EventV1 says whether input events signed with v1 (no signed time)
	// are accepted: contract.EventV1Accept while a producer still signs
	// v1, or contract.EventV1Refuse; "" keeps the functions' default,
	// refuse (LOCALEFLOW_EVENT_V1).
	EventV1 contract.EventV1 `env:"LOCALEFLOW_EVENT_V1"`

	// Poller.
	MonitorLease    time.Duration `env:"LOCALEFLOW_MONITOR_LEASE"`
	PollInterval    time.Duration `env:"LOCALEFLOW_POLL_INTERVAL"`
	RetryBaseDelay  time.Duration `env:"LOCALEFLOW_RETRY_BASE_DELAY"`
	HintMinGap      time.Duration `env:"LOCALEFLOW_HINT_MIN_GAP"`
	PollConcurrency int           `env:"LOCALEFLOW_POLL_CONCURRENCY"`

	// Coordinator.
	EvidenceRevision    string        `env:"LOCALEFLOW_EVIDENCE_REVISION"`
	EvidenceLease       time.Duration `env:"LOCALEFLOW_EVIDENCE_LEASE"`
	EvidenceMaxAttempts int           `env:"LOCALEFLOW_EVIDENCE_MAX_ATTEMPTS"`
	EvidenceTimeout     time.Duration `env:"LOCALEFLOW_EVIDENCE_TIMEOUT"`
	ApprovalTTL         time.Duration `env:"LOCALEFLOW_APPROVAL_TTL"`
	DeliveryMaxAttempts int           `env:"LOCALEFLOW_DELIVERY_MAX_ATTEMPTS"`
}

// SettingVariables are the variables Settings and the raw settings
// (Props.SettingsEnv, FunctionOptions.Settings, the app's context) may
// set: every variable of contract.FunctionEnv left to the operator.
func SettingVariables() []string {
	var out []string
	for _, fn := range []string{contract.FunctionPoller, contract.FunctionCoordinator, contract.FunctionHealth} {
		for _, name := range contract.Names(contract.FunctionEnv[fn], contract.Operator) {
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	return out
}

// env renders the non-zero fields as variable values, in the form the
// loaders read (Go durations, decimal integers, the values as written).
func (s Settings) env() map[string]string {
	out := map[string]string{}
	v := reflect.ValueOf(s)
	for i := range v.NumField() {
		name := v.Type().Field(i).Tag.Get("env")
		switch f := v.Field(i).Interface().(type) {
		case string:
			if f != "" {
				out[name] = f
			}
		case contract.EventV1:
			if f != "" {
				out[name] = string(f)
			}
		case time.Duration:
			if f != 0 {
				out[name] = f.String()
			}
		case int:
			if f != 0 {
				out[name] = strconv.Itoa(f)
			}
		}
	}
	return out
}

// resolveSettings merges the typed settings, the raw ones and the
// per-function ones into each function's settings, and runs each
// function's config loader on the environment the stack will give it.
func resolveSettings(cfg *stackConfig, typed Settings, raw map[string]string, overrides map[string]FunctionOptions) error {
	allowed := SettingVariables()
	global := typed.env()
	for name, value := range raw {
		if !slices.Contains(allowed, name) {
			return fmt.Errorf("infra: setting %s is not a function setting left to the operator (%s)", name, strings.Join(allowed, ", "))
		}
		if typedValue, ok := global[name]; ok && typedValue != value {
			return fmt.Errorf("infra: setting %s given twice (%q in Settings, %q raw)", name, typedValue, value)
		}
		global[name] = value
	}
	cfg.settings = map[string]map[string]string{}
	for _, fn := range cfg.topo.Functions {
		reads := contract.Names(contract.FunctionEnv[fn.Dir], contract.Operator)
		mine := map[string]string{}
		for name, value := range global {
			if slices.Contains(reads, name) {
				mine[name] = value
			}
		}
		for name, value := range overrides[fn.Dir].Settings {
			if !slices.Contains(reads, name) {
				return fmt.Errorf("infra: Functions[%q].Settings: %s is not a setting the %s reads (%s)", fn.Dir, name, fn.Dir, strings.Join(reads, ", "))
			}
			mine[name] = value
		}
		if err := checkSettings(*cfg, fn.Dir, mine); err != nil {
			return err
		}
		cfg.settings[fn.Dir] = mine
	}
	return nil
}

// checkSettings runs the function's config loader (the same code the
// cold start runs) on the environment the stack gives the function: the
// stack's own values, placeholders where the value is only known at
// deploy (queue URLs, secret ARNs), and the settings.
func checkSettings(cfg stackConfig, dir string, settings map[string]string) error {
	topo := cfg.topo
	placeholderQueue := func(name string) string { return "https://sqs.us-east-1.amazonaws.com/000000000000/" + name }
	env := map[string]string{
		contract.EnvEventBus: topo.BusName, contract.EnvDeployment: topo.Prefix,
		contract.EnvMonitorTable: topo.Monitor.Name, contract.EnvReleaseTable: topo.Release.Name,
		contract.EnvPollQueueURL: placeholderQueue(topo.PollQueue.Name), contract.EnvReleaseQueueURL: placeholderQueue(topo.RelQueue.Name),
		contract.EnvQuarantineQueueURL: placeholderQueue(topo.Quarantine.Name),
		contract.EnvCMSBaseURL:         cfg.cmsBaseURL, contract.EnvEvidenceBaseURL: cfg.evidenceBaseURL,
		contract.EnvTextRetention: cfg.textRetention.String(),
	}
	for name, value := range cfg.pollerStack().Env() {
		env[name] = value
	}
	issuers := cfg.receiptIssuers
	if issuers.Quality == "" {
		// Synth without issuers (the app warns): check the rest with
		// placeholder keys.
		issuers = ReceiptIssuers{Quality: placeholderIssuer(1), HumanReview: placeholderIssuer(2), IndependentReview: placeholderIssuer(3)}
	}
	env[contract.EnvReceiptIssuersQuality] = issuers.Quality
	env[contract.EnvReceiptIssuersHumanReview] = issuers.HumanReview
	env[contract.EnvReceiptIssuersIndependentReview] = issuers.IndependentReview
	for _, s := range secretSpecs {
		env[s.Env] = "arn:aws:secretsmanager:us-east-1:000000000000:secret:" + topo.Prefix + "/" + s.Stem
	}
	for name, value := range settings {
		env[name] = value
	}
	getenv := func(name string) string { return env[name] }
	var err error
	switch dir {
	case contract.FunctionPoller:
		_, err = pollerconfig.Load(getenv)
	case contract.FunctionCoordinator:
		_, err = coordinatorconfig.Load(getenv)
	case contract.FunctionHealth:
		_, err = healthconfig.Load(getenv)
	default:
		err = fmt.Errorf("no config loader for %s", dir)
	}
	if err != nil {
		return fmt.Errorf("infra: %s settings refused by its config loader: %w", dir, err)
	}
	return nil
}

// placeholderIssuer is a well-formed issuer list with a key derived from n.
func placeholderIssuer(n byte) string {
	seed := make([]byte, ed25519.SeedSize)
	seed[0] = n
	pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	return fmt.Sprintf("placeholder%d=%s", n, hex.EncodeToString(pub))
}

// pollerStack is what the stack states on the poller besides its
// resources.
func (cfg stackConfig) pollerStack() pollerconfig.Stack {
	return pollerconfig.Stack{MaxConsecutiveFailures: cfg.monitor.MaxConsecutiveFailures, RetryMaxDelay: cfg.monitor.MaxDelay,
		Retention: cfg.monitorRetention, SweepGrace: cfg.monitor.SweepGrace}
}
