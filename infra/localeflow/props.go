package localeflow

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/signing"
	"github.com/localeflow/localeflow/topology"
)

// Environment variables the stack sets on the functions (contract's
// names; the per-function lists are contract.FunctionEnv). Secret
// variables carry Secrets Manager ARNs, never key material: the functions
// read the values at cold start.
const (
	EnvMonitorTable       = contract.EnvMonitorTable
	EnvReleaseTable       = contract.EnvReleaseTable
	EnvPollQueueURL       = contract.EnvPollQueueURL
	EnvQuarantineQueueURL = contract.EnvQuarantineQueueURL
	EnvMaxFailures        = contract.EnvMaxConsecutiveFailures
	EnvTextRetention      = contract.EnvTextRetention
	EnvRetryMaxDelay      = contract.EnvRetryMaxDelay
	// EnvDeployment is the prefix, the Deployment dimension of every
	// custom metric the functions publish.
	EnvDeployment = contract.EnvDeployment
	// EnvMonitorRetention: finished monitor records that need no attention
	// expire (DynamoDB TTL) this long after they finished; the
	// coordinator's content-free release records this long after their
	// last write once they need nothing more.
	EnvMonitorRetention     = contract.EnvMonitorRetention
	EnvSweepGrace           = contract.EnvSweepGrace
	EnvReleaseQueueURL      = contract.EnvReleaseQueueURL
	EnvEventBus             = contract.EnvEventBus
	EnvCMSBaseURL           = contract.EnvCMSBaseURL
	EnvEvidenceBaseURL      = contract.EnvEvidenceBaseURL
	EnvCMSKeySecret         = contract.KeyCMS + contract.SecretARNSuffix
	EnvEventKeySecret       = contract.KeyEvent + contract.SecretARNSuffix
	EnvEvidenceKeySecret    = contract.KeyEvidence + contract.SecretARNSuffix
	EnvApprovalKeySecret    = contract.KeyApproval + contract.SecretARNSuffix
	EnvPublicationKeySecret = contract.KeyPublication + contract.SecretARNSuffix
	// The receipt issuers' Ed25519 public keys ("issuer=<64 hex>,..."),
	// one variable per receipt kind: the coordinator trusts each issuer for
	// its own kind only.
	EnvReceiptIssuersQuality           = contract.EnvReceiptIssuersQuality
	EnvReceiptIssuersHumanReview       = contract.EnvReceiptIssuersHumanReview
	EnvReceiptIssuersIndependentReview = contract.EnvReceiptIssuersIndependentReview
)

// The health function publishes its blocked flag as a CloudWatch Embedded
// Metric Format metric with the dimension DeploymentDimension (the
// prefix); the stack alarms on its own deployment's series.
const (
	// Every name comes from contract (metrics.go), the list the functions
	// emit.
	HealthMetricNamespace   = contract.MetricNamespace
	HealthBlockedMetricName = contract.MetricHealthBlocked
	// The consumers' rejected-message metric (adapters/quarantine), by
	// Function and by Function+Code.
	QuarantineMetricNamespace  = contract.MetricNamespace
	MessagesRejectedMetricName = contract.MetricMessagesRejected
	// KeyReloadFailuresMetricName: a function kept its previous key set
	// because its secret could not be re-read (alarm
	// <function>-key-reload-failed).
	KeyReloadFailuresMetricName = contract.MetricKeyReloadFailures
	// DeploymentDimension tells deployments in one account apart: every
	// custom metric carries it with the prefix as its value.
	DeploymentDimension = contract.MetricDeploymentDimension
)

// Lambda and SQS limits the props are checked against.
const (
	maxLambdaTimeoutSeconds = 900
	minLambdaMemoryMB       = 128
	maxLambdaMemoryMB       = 10240
	// visibilityFactor is the AWS recommendation for queues drained by an
	// event source mapping: visibility ≥ 6 × the function timeout.
	visibilityFactor = 6
)

// FunctionOptions sizes one function. Zero fields keep the topology default;
// ReservedConcurrency 0 leaves the function unreserved (reserving on a new
// account with the default quota of 10 makes the deploy fail).
//
// MaxConcurrency caps the concurrent invocations the function's SQS event
// source mapping starts (2..1000; 0 means DefaultMaxConcurrency): the
// poller never sends the CMS more parallel polls than that.
type FunctionOptions struct {
	MemoryMB            int `json:"memoryMB"`
	TimeoutSeconds      int `json:"timeoutSeconds"`
	ReservedConcurrency int `json:"reservedConcurrency"`
	MaxConcurrency      int `json:"maxConcurrency"`
	// Settings are this function's own settings left to the operator,
	// keyed by variable name (e.g. {"LOCALEFLOW_CMS_TIMEOUT": "5s"}); they
	// override Props.Settings and Props.SettingsEnv for this function.
	Settings map[string]string `json:"settings,omitempty"`
}

// DefaultMaxConcurrency is the event source mappings' default maximum
// concurrency; 2..1000 is the Lambda range.
const (
	DefaultMaxConcurrency = 10
	minMaxConcurrency     = 2
	maxMaxConcurrency     = 1000
)

// StackProps configures NewStack: the stack's own settings and the
// construct's props.
type StackProps struct {
	awscdk.StackProps
	Props
}

// Props configures New.
type Props struct {
	// Prefix names every resource (topology.New); empty means
	// topology.DefaultPrefix.
	Prefix string
	// AssetDir holds <fn>/bootstrap for every function (`make build` writes
	// build/<fn>/bootstrap). Required.
	AssetDir string
	// DeletionProtection guards the tables (and retains tables, secrets and
	// log groups when the stack is deleted). nil means true; false makes a
	// development stack fully removable.
	DeletionProtection *bool
	// CMSBaseURL and EvidenceBaseURL are the https base URLs of the CMS
	// and of the evidence provider. Required.
	CMSBaseURL      string
	EvidenceBaseURL string
	// ReceiptIssuers are the receipt issuers' Ed25519 public keys per
	// receipt kind (public, so plain env vars). Required: the coordinator
	// refuses to start without all three, so synth fails without them
	// (the coordinator's own config loader, run on its final environment);
	// all empty is accepted only with SynthOnly (the variables are then
	// left unset).
	ReceiptIssuers ReceiptIssuers
	// AlarmTopicArn, when set, is an existing SNS topic every alarm
	// notifies. When empty the stack creates the topic <prefix>-alarms.
	AlarmTopicArn string
	// AlarmEmail, when set, subscribes an e-mail address to the topic the
	// stack creates (not allowed with AlarmTopicArn: subscribe it there).
	AlarmEmail string
	// Functions overrides sizing per function, keyed by topology
	// Function.Dir ("poller", "coordinator", "health").
	Functions map[string]FunctionOptions
	// MaxConsecutiveFailures (1..20) and RetryMaxDelay set the poller's
	// LOCALEFLOW_MAX_CONSECUTIVE_FAILURES and LOCALEFLOW_RETRY_MAX_DELAY;
	// zero keeps the function's defaults (5, 300 s). They decide the
	// longest CMS outage a change survives (OutageTolerance).
	MaxConsecutiveFailures int
	RetryMaxDelay          time.Duration
	// TextRetention is how long source and result texts stay in the
	// release table after the release is delivered or blocked for good
	// (their expires_at TTL); 0 means DefaultTextRetention.
	TextRetention time.Duration
	// CustomerManagedKey creates one customer-managed KMS key (automatic
	// rotation on, retained like the tables when DeletionProtection is on)
	// and encrypts with it the release table, the release queue and its
	// DLQ, the quarantine queue and the key secrets. nil means true; false
	// keeps AWS-managed encryption everywhere. With HostProps.DataKey the
	// host's key is used instead and the construct creates none.
	CustomerManagedKey *bool
	// QueueRemovalPolicy is what happens to the queues (poll, release,
	// their DLQs, the quarantine queue, the event DLQ) when they leave the
	// stack. "" follows DeletionProtection, as the tables do: RETAIN when
	// it is on, DESTROY when off. RemovalPolicy_SNAPSHOT is refused (SQS
	// has no snapshots).
	QueueRemovalPolicy awscdk.RemovalPolicy
	// SynthOnly is for a template to read, never to deploy: props a
	// deployment could not run with (no receipt issuers, so the coordinator
	// would refuse to start) give a warning instead of failing synth. The
	// app sets it when no receipt issuers are given (`make synth` on a
	// fresh checkout); `make deploy` refuses to run without them.
	SynthOnly bool
	// MonitorRetention is how long finished monitor records that need no
	// attention stay before DynamoDB TTL deletes them (records that need
	// attention never expire), and the content-free release records after
	// their last write once they need nothing more; 0 means
	// DefaultMonitorRetention.
	MonitorRetention time.Duration
	// SweepGrace is how long past its wake time a due change is left to
	// its queued message before the poller's sweep claims it
	// (LOCALEFLOW_SWEEP_GRACE, monitor.Config.SweepGrace); 0 means
	// monitor.DefaultSweepGrace (30 s). Whole milliseconds up to 900 s,
	// else synth fails with lifecycle_monitor.delay_invalid
	// (docs/design.md "The sweep's grace period").
	SweepGrace time.Duration
	// Settings are the functions' settings left to the operator (poll
	// interval, leases, timeouts, attempt bounds, approval TTL, log
	// level, ...), set on every function that reads them; zero fields keep
	// the functions' defaults. Each value is checked at synth by the
	// functions' own config loaders.
	Settings Settings
	// SettingsEnv are the same settings as raw values keyed by variable
	// name, as the app's context passes them: the loaders parse them, so
	// a bad value fails synth with the cold start's message. A variable
	// may not be given here and in Settings with different values. A
	// stack-owned variable with a typed prop (MaxConsecutiveFailures,
	// RetryMaxDelay, SweepGrace, TextRetention, MonitorRetention) is
	// applied as that prop (a different value in the prop is refused);
	// any other variable not left to the operator is refused, naming the
	// prop that sets it or, for an unknown name, the closest variable.
	SettingsEnv map[string]string
	// HostProps are the host stack's own constructs (alarm topic, event
	// bus, VPC) and whether to add stack outputs.
	HostProps

	// On-call (oncall.go): where the two severities go and what the
	// alarm descriptions link to.
	OncallProps
}

// ReceiptIssuers lists, per receipt kind, the trusted issuers as
// "issuer=<64 lowercase hex Ed25519 public key>,...". A key may be trusted
// for one kind only: the evidence provider's quality key must not be able
// to sign a human-review receipt.
type ReceiptIssuers struct {
	Quality           string
	HumanReview       string
	IndependentReview string
}

// DefaultTextRetention is the default TextRetention.
const DefaultTextRetention = 7 * 24 * time.Hour

// DefaultMonitorRetention is the default MonitorRetention (90 days).
const DefaultMonitorRetention = 90 * 24 * time.Hour

// functionConfig is one function with its resolved sizing.
type functionConfig struct {
	topology.Function
	ReservedConcurrency int
	// MaxConcurrency of the function's SQS event source mapping.
	MaxConcurrency int
}

// stackConfig is the validated form of the props.
type stackConfig struct {
	topo               topology.Topology
	assetDir           string
	deletionProtection bool
	customerManagedKey bool
	// queueRemoval is the queues' removal policy.
	queueRemoval awscdk.RemovalPolicy
	// synthOnly: Props.SynthOnly.
	synthOnly       bool
	cmsBaseURL      string
	evidenceBaseURL string
	receiptIssuers  ReceiptIssuers
	alarmTopicArn   string
	alarmEmail      string
	functions       map[string]functionConfig
	// monitor is the poller's retry policy (defaults applied).
	monitor monitor.Config
	// textRetention keeps texts after delivered/blocked.
	textRetention time.Duration
	// monitorRetention keeps finished monitor records.
	monitorRetention time.Duration
	// visibility per queue Logical: the topology value, raised to
	// visibilityFactor × the consumer's timeout when that is larger.
	visibility map[string]int
	// settings per function dir: the operator settings the stack sets
	// (validated by the function's config loader).
	settings map[string]map[string]string
	// host are the host's constructs (HostProps); outputs adds the stack
	// outputs.
	host    HostProps
	outputs bool

	// oncall is the resolved OncallProps plus the health function's age
	// limits as its config loader read them (the age alarms' thresholds).
	oncall oncallConfig

	// eventSchemas is the registry content per detail-type
	// (schema.RegistrySchema of the embedded contract/schema files).
	eventSchemas map[string]string
}

func resolve(props *Props) (stackConfig, error) {
	if props == nil {
		return stackConfig{}, errors.New("infra: props are required")
	}
	prefix := props.Prefix
	if prefix == "" {
		prefix = topology.DefaultPrefix
	}
	if err := topology.ValidatePrefix(prefix); err != nil {
		return stackConfig{}, fmt.Errorf("infra: %w", err)
	}
	cfg := stackConfig{
		topo:               topology.New(prefix),
		deletionProtection: props.DeletionProtection == nil || *props.DeletionProtection,
		customerManagedKey: props.CustomerManagedKey == nil || *props.CustomerManagedKey,
		alarmTopicArn:      props.AlarmTopicArn,
		alarmEmail:         strings.TrimSpace(props.AlarmEmail),
		functions:          map[string]functionConfig{},
		visibility:         map[string]int{},
	}
	var err error
	if cfg.cmsBaseURL, err = baseURL("CMSBaseURL", props.CMSBaseURL); err != nil {
		return stackConfig{}, err
	}
	if cfg.evidenceBaseURL, err = baseURL("EvidenceBaseURL", props.EvidenceBaseURL); err != nil {
		return stackConfig{}, err
	}
	if cfg.receiptIssuers, err = receiptIssuers(props.ReceiptIssuers); err != nil {
		return stackConfig{}, err
	}
	cfg.host = props.HostProps
	cfg.outputs = props.Outputs
	cfg.synthOnly = props.SynthOnly
	if props.DataKey != nil && props.CustomerManagedKey != nil && !*props.CustomerManagedKey {
		return stackConfig{}, errors.New("infra: HostProps.DataKey is given: leave CustomerManagedKey unset (the host's key encrypts what the data key would)")
	}
	if cfg.queueRemoval, err = queueRemoval(props.QueueRemovalPolicy, cfg.deletionProtection); err != nil {
		return stackConfig{}, err
	}
	if props.AlarmTopic != nil && (cfg.alarmTopicArn != "" || cfg.alarmEmail != "") {
		return stackConfig{}, errors.New("infra: AlarmTopic is given: leave AlarmTopicArn and AlarmEmail empty (subscribe to that topic instead)")
	}
	if props.VpcSubnets != nil && props.Vpc == nil || len(props.SecurityGroups) > 0 && props.Vpc == nil {
		return stackConfig{}, errors.New("infra: VpcSubnets and SecurityGroups need Vpc")
	}
	// A token (an ARN from another construct of the app) is checked by
	// CloudFormation at deploy.
	if cfg.alarmTopicArn != "" && !*awscdk.Token_IsUnresolved(jsii.String(cfg.alarmTopicArn)) && !validSNSArn(cfg.alarmTopicArn) {
		return stackConfig{}, fmt.Errorf("infra: AlarmTopicArn %q is not an SNS topic ARN", cfg.alarmTopicArn)
	}
	if cfg.alarmEmail != "" && (cfg.alarmTopicArn != "" || !validEmail(cfg.alarmEmail)) {
		return stackConfig{}, fmt.Errorf("infra: AlarmEmail %q must be one e-mail address, and only without AlarmTopicArn (subscribe it to the existing topic instead)", cfg.alarmEmail)
	}
	// Raw settings that have a typed prop go through the prop (a copy:
	// the caller's props are left as given).
	applied := *props
	rest, err := applyTypedSettings(&applied)
	if err != nil {
		return stackConfig{}, err
	}
	applied.SettingsEnv = rest
	props = &applied
	cfg.monitor = monitor.Config{WorkerID: "synth", MaxConsecutiveFailures: props.MaxConsecutiveFailures, MaxDelay: props.RetryMaxDelay}.WithDefaults()
	if err := cfg.monitor.Validate(); err != nil {
		return stackConfig{}, fmt.Errorf("infra: MaxConsecutiveFailures/RetryMaxDelay: %w", err)
	}
	if props.SweepGrace != 0 {
		cfg.monitor.SweepGrace = props.SweepGrace
		if err := cfg.monitor.Validate(); err != nil {
			return stackConfig{}, fmt.Errorf("infra: SweepGrace %s must be whole milliseconds in (0, %s]: %w", props.SweepGrace, monitor.MaxSweepGrace, err)
		}
	}
	cfg.textRetention = props.TextRetention
	if cfg.textRetention == 0 {
		cfg.textRetention = DefaultTextRetention
	}
	if cfg.textRetention < time.Hour {
		return stackConfig{}, fmt.Errorf("infra: TextRetention %s must be at least 1h", cfg.textRetention)
	}
	cfg.monitorRetention = props.MonitorRetention
	if cfg.monitorRetention == 0 {
		cfg.monitorRetention = DefaultMonitorRetention
	}
	if cfg.monitorRetention < time.Hour {
		return stackConfig{}, fmt.Errorf("infra: MonitorRetention %s must be at least 1h", cfg.monitorRetention)
	}
	if cfg.monitorRetention < signing.DefaultEventMaxAge {
		// The functions refuse to start otherwise: records must outlive
		// every input that can still arrive (docs/design.md "Retention
		// and the replay window").
		return stackConfig{}, fmt.Errorf("infra: MonitorRetention %s must be at least the signed events' max age %s", cfg.monitorRetention, signing.DefaultEventMaxAge)
	}
	if err := resolveFunctions(&cfg, props.Functions); err != nil {
		return stackConfig{}, err
	}
	if err := resolveSettings(&cfg, props.Settings, props.SettingsEnv, props.Functions); err != nil {
		return stackConfig{}, err
	}
	if err := resolveOncall(&cfg, props.OncallProps); err != nil {
		return stackConfig{}, err
	}
	if cfg.assetDir, err = checkAssets(props.AssetDir, cfg.topo.Functions); err != nil {
		return stackConfig{}, err
	}
	if cfg.eventSchemas, err = eventSchemas(); err != nil {
		return stackConfig{}, err
	}
	return cfg, nil
}

func resolveFunctions(cfg *stackConfig, overrides map[string]FunctionOptions) error {
	known := make([]string, 0, len(cfg.topo.Functions))
	for _, fn := range cfg.topo.Functions {
		known = append(known, fn.Dir)
	}
	for dir := range overrides {
		if !slices.Contains(known, dir) {
			return fmt.Errorf("infra: Functions[%q]: unknown function (known: %s)", dir, strings.Join(known, ", "))
		}
	}
	for _, fn := range cfg.topo.Functions {
		o := overrides[fn.Dir]
		fc := functionConfig{Function: fn, ReservedConcurrency: o.ReservedConcurrency, MaxConcurrency: o.MaxConcurrency}
		if fc.MaxConcurrency == 0 {
			fc.MaxConcurrency = DefaultMaxConcurrency
		}
		if fc.MaxConcurrency < minMaxConcurrency || fc.MaxConcurrency > maxMaxConcurrency {
			return fmt.Errorf("infra: %s maxConcurrency %d outside %d..%d (the event source mapping's range)", fn.Dir, fc.MaxConcurrency, minMaxConcurrency, maxMaxConcurrency)
		}
		if o.MemoryMB != 0 {
			fc.MemoryMB = o.MemoryMB
		}
		if o.TimeoutSeconds != 0 {
			fc.TimeoutSeconds = o.TimeoutSeconds
		}
		if fc.MemoryMB < minLambdaMemoryMB || fc.MemoryMB > maxLambdaMemoryMB {
			return fmt.Errorf("infra: %s memory %d MB outside %d..%d", fn.Dir, fc.MemoryMB, minLambdaMemoryMB, maxLambdaMemoryMB)
		}
		if fc.TimeoutSeconds < 1 || fc.TimeoutSeconds > maxLambdaTimeoutSeconds {
			return fmt.Errorf("infra: %s timeout %d s outside 1..%d", fn.Dir, fc.TimeoutSeconds, maxLambdaTimeoutSeconds)
		}
		if fc.ReservedConcurrency < 0 {
			return fmt.Errorf("infra: %s reserved concurrency %d is negative", fn.Dir, fc.ReservedConcurrency)
		}
		cfg.functions[fn.Dir] = fc
		if fn.Queue == "" {
			continue
		}
		q, ok := cfg.topo.QueueByLogical(fn.Queue)
		if !ok {
			return fmt.Errorf("infra: %s consumes unknown queue %q", fn.Dir, fn.Queue)
		}
		// 6 × the 900 s Lambda maximum stays under the 12 h SQS maximum.
		cfg.visibility[q.Logical] = max(q.VisibilityTimeoutSeconds, visibilityFactor*fc.TimeoutSeconds)
	}
	for _, q := range cfg.topo.Queues() {
		if _, ok := cfg.visibility[q.Logical]; !ok {
			return fmt.Errorf("infra: queue %s has no consuming function", q.Logical)
		}
	}
	return nil
}

// queueRemoval is the queues' removal policy: p, or, when p is "", the
// tables' (RETAIN with deletion protection, else DESTROY).
func queueRemoval(p awscdk.RemovalPolicy, deletionProtection bool) (awscdk.RemovalPolicy, error) {
	switch p {
	case "":
		if deletionProtection {
			return awscdk.RemovalPolicy_RETAIN, nil
		}
		return awscdk.RemovalPolicy_DESTROY, nil
	case awscdk.RemovalPolicy_RETAIN, awscdk.RemovalPolicy_DESTROY, awscdk.RemovalPolicy_RETAIN_ON_UPDATE_OR_DELETE:
		return p, nil
	}
	return "", fmt.Errorf("infra: QueueRemovalPolicy %q: SQS queues take RETAIN, DESTROY or RETAIN_ON_UPDATE_OR_DELETE", p)
}

// baseURL accepts an absolute http(s) URL without query, fragment or user
// info, and returns it without a trailing slash (the functions append
// /v1/...).
func baseURL(field, raw string) (string, error) {
	if raw == "" {
		return "", fmt.Errorf("infra: %s is required", field)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("infra: %s: %w", field, err)
	}
	// A deployed function never talks plain http: it is refused here and by
	// the functions themselves (which allow it only for local runs).
	if u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("infra: %s %q must be an https base URL without credentials, query or fragment", field, raw)
	}
	return strings.TrimRight(raw, "/"), nil
}

// receiptIssuers checks the three per-kind issuer lists: all empty (synth
// only) or all set, each well formed, no key under two kinds.
func receiptIssuers(r ReceiptIssuers) (ReceiptIssuers, error) {
	fields := []struct {
		name string
		raw  *string
	}{{"Quality", &r.Quality}, {"HumanReview", &r.HumanReview}, {"IndependentReview", &r.IndependentReview}}
	set := 0
	for _, f := range fields {
		if strings.TrimSpace(*f.raw) != "" {
			set++
		}
	}
	if set == 0 {
		return ReceiptIssuers{}, nil
	}
	owner := map[string]string{}
	for _, f := range fields {
		if strings.TrimSpace(*f.raw) == "" {
			return ReceiptIssuers{}, fmt.Errorf("infra: ReceiptIssuers.%s is required when any receipt issuers are set (one set per receipt kind)", f.name)
		}
		clean, keys, err := issuers("ReceiptIssuers."+f.name, *f.raw)
		if err != nil {
			return ReceiptIssuers{}, err
		}
		for _, key := range keys {
			if other, ok := owner[key]; ok && other != f.name {
				return ReceiptIssuers{}, fmt.Errorf("infra: ReceiptIssuers.%s and ReceiptIssuers.%s share a key: a key may be trusted for one receipt kind only", other, f.name)
			}
			owner[key] = f.name
		}
		*f.raw = clean
	}
	return r, nil
}

// issuers checks "issuer=<64 hex>,..." and returns it without spaces, with
// its keys.
func issuers(field, raw string) (string, []string, error) {
	seen := map[string]bool{}
	var out, keys []string
	for _, part := range strings.Split(strings.TrimSpace(raw), ",") {
		name, key, ok := strings.Cut(strings.TrimSpace(part), "=")
		b, err := hex.DecodeString(key)
		if !ok || !core.ValidToken(name) || err != nil || len(b) != ed25519.PublicKeySize || key != strings.ToLower(key) {
			return "", nil, fmt.Errorf("infra: %s entry %q is not issuer=<64 lowercase hex digits>", field, name)
		}
		if seen[name] {
			return "", nil, fmt.Errorf("infra: %s repeats issuer %q", field, name)
		}
		seen[name] = true
		out = append(out, name+"="+key)
		keys = append(keys, key)
	}
	return strings.Join(out, ","), keys, nil
}

// validEmail is a plain address check: one @, no spaces, a dot in the
// domain.
func validEmail(s string) bool {
	local, domain, ok := strings.Cut(s, "@")
	return ok && local != "" && strings.Contains(domain, ".") && !strings.ContainsAny(s, " ,;<>") && !strings.Contains(domain, "@")
}

// EncryptionLine is what `make synth` prints about the encryption keys.
func (c stackConfig) EncryptionLine() string {
	if c.host.DataKey != nil {
		return "customer-managed KMS key: the host's (HostProps.DataKey): release table, release queue and DLQ, " +
			"quarantine queue, key secrets; monitor table and poll queue: AWS-managed"
	}
	if c.customerManagedKey {
		return "customer-managed KMS key: on (alias/" + c.topo.Prefix + "-data, rotation on): release table, release queue and DLQ, " +
			"quarantine queue, key secrets; monitor table and poll queue: AWS-managed"
	}
	return "customer-managed KMS key: off (CUSTOMER_MANAGED_KEY=false): AWS-managed encryption everywhere"
}

// AlarmsLine is what `make synth` prints about where the alarms go.
func (c stackConfig) AlarmsLine() string {
	var line string
	switch {
	case c.host.AlarmTopic != nil:
		line = "page alarms notify the SNS topic given as AlarmTopic"
	case c.alarmTopicArn != "":
		line = "page alarms notify the existing SNS topic " + c.alarmTopicArn
	case c.alarmEmail != "":
		line = "page alarms notify the new SNS topic " + c.topo.Prefix + "-alarms, e-mail subscription " + c.alarmEmail + " (confirm the e-mail AWS sends)"
	default:
		line = "page alarms notify the new SNS topic " + c.topo.Prefix + "-alarms (no subscriber yet: set ALARM_EMAIL or subscribe to it)"
	}
	switch {
	case c.host.TicketTopic != nil:
		line += "; ticket alarms the SNS topic given as TicketTopic"
	case c.oncall.ticketTopicArn != "":
		line += "; ticket alarms the existing SNS topic " + c.oncall.ticketTopicArn
	case c.host.AlarmTopic != nil || c.alarmTopicArn != "":
		line += "; ticket alarms the same topic (descriptions start with [ticket])"
	default:
		line += "; ticket alarms the new SNS topic " + c.topo.Prefix + "-tickets"
	}
	if !c.oncall.okNotifications {
		line += "; no OK notifications (OKNotifications)"
	}
	return line
}

func validSNSArn(arn string) bool {
	parts := strings.Split(arn, ":")
	return len(parts) == 6 && parts[0] == "arn" && parts[2] == "sns" && parts[5] != ""
}

// checkAssets makes sure every function's bootstrap exists, so a missing
// `make build` fails with a clear message instead of deep inside CDK.
func checkAssets(dir string, fns []topology.Function) (string, error) {
	if dir == "" {
		return "", errors.New("infra: AssetDir is required (the build/ directory written by `make build`)")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("infra: AssetDir: %w", err)
	}
	for _, fn := range fns {
		path := filepath.Join(abs, fn.Dir, "bootstrap")
		info, err := os.Stat(path)
		if err != nil {
			return "", fmt.Errorf("infra: %s: run `make build` first: %w", fn.Dir, err)
		}
		if !info.Mode().IsRegular() {
			return "", fmt.Errorf("infra: %s is not a regular file", path)
		}
	}
	return abs, nil
}

// OutageTolerance is the longest CMS outage a change survives with the
// poller settings of props (core/monitor.OutageTolerance).
func (c stackConfig) OutageTolerance() time.Duration { return monitor.OutageTolerance(c.monitor) }

// OutageToleranceLine is what `make synth` prints.
func (c stackConfig) OutageToleranceLine() string {
	return fmt.Sprintf("CMS outage tolerance: %s guaranteed (up to %s) (a change fails after %d consecutive failed polls, backoff %s doubling up to %s, "+
		"each jittered over [d, 3d/2]; a longer Retry-After from the CMS extends it)", c.OutageTolerance(), monitor.OutageToleranceUpTo(c.monitor),
		c.monitor.MaxConsecutiveFailures, c.monitor.BaseDelay, c.monitor.MaxDelay)
}
