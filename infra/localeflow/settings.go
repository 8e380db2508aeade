package localeflow

import (
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"maps"
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

	// Health (on-call age signals, core/health.Limits; the age alarms'
	// thresholds are the values the health function gets).
	HealthMaxChangeAge  time.Duration `env:"LOCALEFLOW_HEALTH_MAX_CHANGE_AGE"`
	HealthMaxReleaseAge time.Duration `env:"LOCALEFLOW_HEALTH_MAX_RELEASE_AGE"`
	HealthExpiryWarning time.Duration `env:"LOCALEFLOW_HEALTH_EXPIRY_WARNING"`
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

// typedSettings are the stack-owned variables the construct offers as
// typed props. Given as a raw setting (Props.SettingsEnv, the app's
// context, make SETTINGS) the value is applied through the prop, so the
// function, the outage tolerance and the alarms all see it; a different
// value in the prop as well is refused.
var typedSettings = map[string]string{
	contract.EnvMaxConsecutiveFailures: "Props.MaxConsecutiveFailures (context maxConsecutiveFailures, make MAX_CONSECUTIVE_FAILURES)",
	contract.EnvRetryMaxDelay:          "Props.RetryMaxDelay (context retryMaxDelay, make RETRY_MAX_DELAY)",
	contract.EnvSweepGrace:             "Props.SweepGrace (context sweepGrace, make SWEEP_GRACE)",
	contract.EnvTextRetention:          "Props.TextRetention (context textRetention)",
	contract.EnvMonitorRetention:       "Props.MonitorRetention (context monitorRetention)",
}

// stackOwnedProps says, for the variables the construct sets itself from
// its resources and props, which prop sets them.
var stackOwnedProps = map[string]string{
	contract.EnvMonitorTable:                    "Props.Prefix (the stack's monitor table)",
	contract.EnvReleaseTable:                    "Props.Prefix (the stack's release table)",
	contract.EnvPollQueueURL:                    "Props.Prefix (the stack's poll queue)",
	contract.EnvReleaseQueueURL:                 "Props.Prefix (the stack's release queue)",
	contract.EnvQuarantineQueueURL:              "Props.Prefix (the stack's quarantine queue)",
	contract.EnvEventBus:                        "HostProps.EventBus (default: the stack's <prefix>-bus)",
	contract.EnvDeployment:                      "Props.Prefix (context prefix, make LOCALEFLOW_PREFIX)",
	contract.EnvCMSBaseURL:                      "Props.CMSBaseURL (context cmsBaseUrl, make CMS_BASE_URL)",
	contract.EnvEvidenceBaseURL:                 "Props.EvidenceBaseURL (context evidenceBaseUrl, make EVIDENCE_BASE_URL)",
	contract.EnvReceiptIssuersQuality:           "Props.ReceiptIssuers.Quality (context receiptIssuersQuality, make RECEIPT_ISSUERS_QUALITY)",
	contract.EnvReceiptIssuersHumanReview:       "Props.ReceiptIssuers.HumanReview (context receiptIssuersHumanReview, make RECEIPT_ISSUERS_HUMAN_REVIEW)",
	contract.EnvReceiptIssuersIndependentReview: "Props.ReceiptIssuers.IndependentReview (context receiptIssuersIndependentReview, make RECEIPT_ISSUERS_INDEPENDENT_REVIEW)",
}

// knownVariables is every variable any function reads.
func knownVariables() []string {
	var out []string
	for _, fn := range []string{contract.FunctionPoller, contract.FunctionCoordinator, contract.FunctionHealth} {
		for _, name := range contract.Names(contract.FunctionEnv[fn]) {
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	return out
}

// setBy is who sets name on any function (0: no function reads it).
func setBy(name string) contract.SetBy {
	for _, vars := range contract.FunctionEnv {
		for _, v := range vars {
			if v.Name == name {
				return v.SetBy
			}
		}
	}
	return 0
}

// refuseSetting explains why name cannot be given as a raw setting, or
// returns nil for a setting left to the operator. where names the path
// ("setting", "Functions[\"poller\"].Settings").
func refuseSetting(where, name string) error {
	switch setBy(name) {
	case contract.Operator:
		return nil
	case contract.Stack:
		if p, ok := typedSettings[name]; ok {
			return fmt.Errorf("infra: %s %s is stack-owned: set it with %s", where, name, p)
		}
		if p, ok := stackOwnedProps[name]; ok {
			return fmt.Errorf("infra: %s %s is stack-owned: the stack sets it from %s", where, name, p)
		}
		if strings.HasSuffix(name, contract.SecretARNSuffix) {
			return fmt.Errorf("infra: %s %s is stack-owned: the stack sets it to its own key secret (<prefix>/...; rotate with localeflow keys)", where, name)
		}
		return fmt.Errorf("infra: %s %s is stack-owned: the stack sets it", where, name)
	case contract.Local:
		return fmt.Errorf("infra: %s %s is for local runs only: a deployed function never has it", where, name)
	case contract.Runtime:
		return fmt.Errorf("infra: %s %s is set by Lambda from the function's logging configuration (ApplicationLogLevel), not a setting: use %s", where, name, contract.EnvLogLevel)
	case contract.Retired:
		return fmt.Errorf("infra: %s %s is retired: the functions refuse to start while it is set (README.md, \"Configuration\")", where, name)
	}
	return fmt.Errorf("infra: %s %s is not a variable any function reads (did you mean %s?)", where, name, closest(name, knownVariables()))
}

// closest is the candidate nearest to name by edit distance.
func closest(name string, candidates []string) string {
	best, bestD := "", -1
	for _, c := range candidates {
		if d := editDistance(name, c); bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// applyTypedSettings moves the raw settings that have a typed prop
// (typedSettings) into that prop, parsed as the function's loader parses
// them, and returns the rest. A different value in the prop is refused.
func applyTypedSettings(props *Props) (map[string]string, error) {
	rest := map[string]string{}
	for name, value := range props.SettingsEnv {
		if _, ok := typedSettings[name]; !ok {
			rest[name] = value
			continue
		}
		var dst *time.Duration
		switch name {
		case contract.EnvMaxConsecutiveFailures:
			n, err := strconv.Atoi(value)
			if err != nil || n <= 0 {
				return nil, fmt.Errorf("infra: setting %s=%q must be a positive integer", name, value)
			}
			if props.MaxConsecutiveFailures != 0 && props.MaxConsecutiveFailures != n {
				return nil, fmt.Errorf("infra: setting %s given twice (%d in %s, %q raw)", name, props.MaxConsecutiveFailures, typedSettings[name], value)
			}
			props.MaxConsecutiveFailures = n
			continue
		case contract.EnvRetryMaxDelay:
			dst = &props.RetryMaxDelay
		case contract.EnvSweepGrace:
			dst = &props.SweepGrace
		case contract.EnvTextRetention:
			dst = &props.TextRetention
		case contract.EnvMonitorRetention:
			dst = &props.MonitorRetention
		}
		d, err := time.ParseDuration(value)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("infra: setting %s=%q must be a positive Go duration", name, value)
		}
		if *dst != 0 && *dst != d {
			return nil, fmt.Errorf("infra: setting %s given twice (%s in %s, %q raw)", name, *dst, typedSettings[name], value)
		}
		*dst = d
	}
	return rest, nil
}

// resolveSettings merges the typed settings, the raw ones and the
// per-function ones into each function's settings, and runs each
// function's config loader on the environment the stack will give it.
// Raw settings with a typed prop were applied by applyTypedSettings; any
// other variable that is not left to the operator is refused, naming the
// prop that sets it or, for a typo, the closest variable.
func resolveSettings(cfg *stackConfig, typed Settings, raw map[string]string, overrides map[string]FunctionOptions) error {
	global := typed.env()
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		value := raw[name]
		if err := refuseSetting("setting", name); err != nil {
			return err
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
		for _, name := range slices.Sorted(maps.Keys(overrides[fn.Dir].Settings)) {
			where := fmt.Sprintf("Functions[%q].Settings:", fn.Dir)
			if err := refuseSetting(where, name); err != nil {
				return err
			}
			if !slices.Contains(reads, name) {
				return fmt.Errorf("infra: %s %s is not a setting the %s reads (%s)", where, name, fn.Dir, strings.Join(reads, ", "))
			}
			mine[name] = overrides[fn.Dir].Settings[name]
		}
		loaded, err := checkSettings(*cfg, fn.Dir, mine)
		if err != nil {
			return err
		}
		// What the functions actually get decides the stack's derived
		// numbers: the poller's retry policy and poll interval (outage
		// tolerance, its output, the oldest-due alarm), the health
		// function's age limits (the age alarms).
		switch c := loaded.(type) {
		case pollerconfig.Config:
			worker := cfg.monitor.WorkerID
			cfg.monitor = c.Monitor
			cfg.monitor.WorkerID = worker
		case healthconfig.Config:
			cfg.oncall.healthLimits = c.Limits
		}
		cfg.settings[fn.Dir] = mine
	}
	return nil
}

// checkSettings runs the function's config loader (the same code the
// cold start runs) on the environment the stack gives the function: the
// stack's own values, placeholders where the value is only known at
// deploy (queue URLs, secret ARNs), and the settings.
func checkSettings(cfg stackConfig, dir string, settings map[string]string) (any, error) {
	env := baseEnv(cfg)
	for name, value := range settings {
		env[name] = value
	}
	loaded, err := loadConfig(dir, env)
	if err != nil {
		return nil, fmt.Errorf("infra: %s settings refused by its config loader: %w", dir, err)
	}
	return loaded, nil
}

// baseEnv is the stack's own environment with placeholders for the values
// known only at deploy (queue URLs, secret ARNs), and placeholder receipt
// issuers when none are given (SynthOnly, or before the final check).
func baseEnv(cfg stackConfig) map[string]string {
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
		issuers = placeholderIssuers()
	}
	env[contract.EnvReceiptIssuersQuality] = issuers.Quality
	env[contract.EnvReceiptIssuersHumanReview] = issuers.HumanReview
	env[contract.EnvReceiptIssuersIndependentReview] = issuers.IndependentReview
	for _, s := range secretSpecs {
		env[s.Env] = "arn:aws:secretsmanager:us-east-1:000000000000:secret:" + topo.Prefix + "/" + s.Stem
	}
	return env
}

// placeholderIssuers are well-formed issuer lists for the checks of a
// synth without issuers; never deployed.
func placeholderIssuers() ReceiptIssuers {
	return ReceiptIssuers{Quality: placeholderIssuer(1), HumanReview: placeholderIssuer(2), IndependentReview: placeholderIssuer(3)}
}

// loadConfig runs the function's own config loader (functions/<fn>/config,
// what its cold start runs) on env and returns the loaded configuration.
func loadConfig(dir string, env map[string]string) (any, error) {
	getenv := func(name string) string { return env[name] }
	var loaded any
	var err error
	switch dir {
	case contract.FunctionPoller:
		loaded, err = pollerconfig.Load(getenv)
	case contract.FunctionCoordinator:
		loaded, err = coordinatorconfig.Load(getenv)
	case contract.FunctionHealth:
		loaded, err = healthconfig.Load(getenv)
	default:
		err = fmt.Errorf("no config loader for %s", dir)
	}
	return loaded, err
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
