package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/cxapi"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/infra/localeflow"
)

// Context keys (`cdk synth -c key=value` or cdk.json "context").
const (
	ctxPrefix             = "prefix"
	ctxStackName          = "stackName"
	ctxAssetDir           = "assetDir"
	ctxDeletionProtection = "deletionProtection"
	ctxCMSBaseURL         = "cmsBaseUrl"
	ctxEvidenceBaseURL    = "evidenceBaseUrl"
	ctxAlarmTopicArn      = "alarmTopicArn"
	ctxAlarmEmail         = "alarmEmail"
	// ctxReceiptIssuersShared is the retired single issuer set; run refuses
	// it so a stale deploy command fails instead of deploying without it.
	ctxReceiptIssuersShared      = "receiptIssuers"
	ctxReceiptIssuersQuality     = "receiptIssuersQuality"
	ctxReceiptIssuersHumanReview = "receiptIssuersHumanReview"
	ctxReceiptIssuersIndependent = "receiptIssuersIndependentReview"
	ctxNag                       = "nag"
	ctxFunctions                 = "functions"
	// The poller's failure budget (LOCALEFLOW_MAX_CONSECUTIVE_FAILURES,
	// LOCALEFLOW_RETRY_MAX_DELAY as a Go duration).
	ctxMaxFailures   = "maxConsecutiveFailures"
	ctxRetryMaxDelay = "retryMaxDelay"
	// How long texts stay after a release is delivered or blocked (Go
	// duration, default 168h).
	ctxTextRetention = "textRetention"
	// How long finished monitor records stay (Go duration, default 2160h).
	ctxMonitorRetention = "monitorRetention"
	// How long the poller's sweep leaves a due change to its message (Go
	// duration, default 30s; LOCALEFLOW_SWEEP_GRACE).
	ctxSweepGrace = "sweepGrace"
	// ctxCustomerManagedKey: true (default) or false, see
	// localeflow.Props.CustomerManagedKey.
	ctxCustomerManagedKey = "customerManagedKey"

	// On-call (localeflow.OncallProps): the ticket topic, OK
	// notifications (true|false, default false), business outcomes as
	// pages (true|false, default false), the team's runbook URL.
	ctxTicketTopicArn         = "ticketTopicArn"
	ctxOKNotifications        = "okNotifications"
	ctxPageOnBusinessOutcomes = "pageOnBusinessOutcomes"
	ctxRunbookURL             = "runbookUrl"
)

// ToleranceFile is written next to the template: the CMS outage tolerance
// of the synthesized settings (`make synth` prints it).
const ToleranceFile = "outage-tolerance.txt"

// AlarmsFile is written next to the template: which SNS topic the alarms
// notify (`make synth` prints it).
const AlarmsFile = "alarms.txt"

// EncryptionFile (in the cdk.out directory) says whether the
// customer-managed KMS key is on; `make synth` prints it.
const EncryptionFile = "encryption.txt"

// settingKey is a context key taken as a function setting: upper case, as
// the variables are (CDK's own keys are lower case or start with @ or aws:).
var settingKey = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

// placeholderURL is used when no base URL is given, so that synth works on a
// fresh machine; the .invalid TLD never resolves, so a stack deployed with it
// fails closed. `make deploy` refuses to run without real URLs.
const placeholderURL = "https://unconfigured.invalid"

func main() {
	defer jsii.Close()
	if err := run(nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		jsii.Close()
		os.Exit(1)
	}
}

// run builds and synthesizes the app. The cdk CLI passes context and the
// output directory through the environment (appProps nil); tests pass them
// in appProps.
func run(appProps *awscdk.AppProps) error {
	app := awscdk.NewApp(appProps)
	ctx := func(key, def string) string {
		v := app.Node().TryGetContext(jsii.String(key))
		if v == nil {
			return def
		}
		return fmt.Sprint(v)
	}
	protect, err := strconv.ParseBool(ctx(ctxDeletionProtection, "true"))
	if err != nil {
		return fmt.Errorf("infra: context %s: %w", ctxDeletionProtection, err)
	}
	cmk, err := strconv.ParseBool(ctx(ctxCustomerManagedKey, "true"))
	if err != nil {
		return fmt.Errorf("infra: context %s: %w", ctxCustomerManagedKey, err)
	}
	nag, err := strconv.ParseBool(ctx(ctxNag, "true"))
	if err != nil {
		return fmt.Errorf("infra: context %s: %w", ctxNag, err)
	}
	fns, err := parseFunctionOptions(app.Node().TryGetContext(jsii.String(ctxFunctions)))
	if err != nil {
		return err
	}
	if ctx(ctxReceiptIssuersShared, "") != "" {
		return fmt.Errorf("infra: context %s is retired (one issuer set let the quality issuer sign human-review receipts): set %s, %s and %s",
			ctxReceiptIssuersShared, ctxReceiptIssuersQuality, ctxReceiptIssuersHumanReview, ctxReceiptIssuersIndependent)
	}
	maxFailures, err := strconv.Atoi(ctx(ctxMaxFailures, "0"))
	if err != nil {
		return fmt.Errorf("infra: context %s: %w", ctxMaxFailures, err)
	}
	retryMaxDelay, err := time.ParseDuration(ctx(ctxRetryMaxDelay, "0s"))
	if err != nil {
		return fmt.Errorf("infra: context %s: %w", ctxRetryMaxDelay, err)
	}
	textRetention, err := time.ParseDuration(ctx(ctxTextRetention, "0s"))
	if err != nil {
		return fmt.Errorf("infra: context %s: %w", ctxTextRetention, err)
	}
	monitorRetention, err := time.ParseDuration(ctx(ctxMonitorRetention, "0s"))
	if err != nil {
		return fmt.Errorf("infra: context %s: %w", ctxMonitorRetention, err)
	}
	sweepGrace, err := time.ParseDuration(ctx(ctxSweepGrace, "0s"))
	if err != nil {
		return fmt.Errorf("infra: context %s: %w", ctxSweepGrace, err)
	}
	if ctx(ctxSweepGrace, "") != "" && sweepGrace == 0 {
		// 0 would silently take the default, as it does for the variable.
		return fmt.Errorf("infra: context %s (%s) must be more than 0 (whole milliseconds up to %s)", ctxSweepGrace, ctx(ctxSweepGrace, ""), monitor.MaxSweepGrace)
	}
	// The functions' settings: one context key per variable, named as the
	// variable (-c LOCALEFLOW_POLL_INTERVAL=60s, make SETTINGS). Every
	// upper-case key is taken as one, so a typo or a stack-owned variable
	// reaches the construct, which applies it or refuses it by name
	// (localeflow.Props.SettingsEnv); the functions' config loaders check
	// the values at synth.
	settings := map[string]string{}
	if all, ok := app.Node().GetAllContext(nil).(map[string]any); ok {
		for name, v := range all {
			if settingKey.MatchString(name) {
				settings[name] = fmt.Sprint(v)
			}
		}
	}
	oncall := localeflow.OncallProps{TicketTopicArn: ctx(ctxTicketTopicArn, ""), RunbookURL: ctx(ctxRunbookURL, "")}
	for key, dst := range map[string]*bool{ctxOKNotifications: &oncall.OKNotifications, ctxPageOnBusinessOutcomes: &oncall.PageOnBusinessOutcomes} {
		if *dst, err = strconv.ParseBool(ctx(key, "false")); err != nil {
			return fmt.Errorf("infra: context %s: %w", key, err)
		}
	}
	prefix := ctx(ctxPrefix, "")
	stackName, err := appStackName(prefix, ctx(ctxStackName, ""))
	if err != nil {
		return err
	}
	// Env is left unset on purpose: an environment-agnostic stack
	// synthesizes offline, with no context lookups.
	props := localeflow.Props{
		Prefix:             prefix,
		AssetDir:           ctx(ctxAssetDir, "../build"),
		DeletionProtection: jsii.Bool(protect),
		CustomerManagedKey: jsii.Bool(cmk),
		CMSBaseURL:         ctx(ctxCMSBaseURL, placeholderURL),
		EvidenceBaseURL:    ctx(ctxEvidenceBaseURL, placeholderURL),
		AlarmTopicArn:      ctx(ctxAlarmTopicArn, ""),
		AlarmEmail:         ctx(ctxAlarmEmail, ""),
		ReceiptIssuers: localeflow.ReceiptIssuers{
			Quality:           ctx(ctxReceiptIssuersQuality, ""),
			HumanReview:       ctx(ctxReceiptIssuersHumanReview, ""),
			IndependentReview: ctx(ctxReceiptIssuersIndependent, ""),
		},
		Functions:              fns,
		MaxConsecutiveFailures: maxFailures,
		RetryMaxDelay:          retryMaxDelay,
		TextRetention:          textRetention,
		MonitorRetention:       monitorRetention,
		SweepGrace:             sweepGrace,
		SettingsEnv:            settings,
		OncallProps:            oncall,
	}
	// No receipt issuers (`make synth` on a fresh checkout): a template to
	// read; the construct warns. `make deploy` refuses to run without them.
	props.SynthOnly = props.ReceiptIssuers == (localeflow.ReceiptIssuers{})
	lf, err := localeflow.NewStack(app, stackName, &localeflow.StackProps{Props: props})
	if err != nil {
		return err
	}
	stack := lf.Stack()
	if props.CMSBaseURL == placeholderURL || props.EvidenceBaseURL == placeholderURL {
		awscdk.Annotations_Of(stack).AddWarningV2(jsii.String("localeflow:placeholder-url"),
			jsii.String("cmsBaseUrl/evidenceBaseUrl not set: the functions point at "+placeholderURL+" (fine for synth, not for a deployment)"), nil)
	}
	if nag {
		awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	}
	assembly, err := synthesize(app)
	if err != nil {
		return err
	}
	if err := synthErrors(assembly); err != nil {
		return err
	}
	line := lf.OutageToleranceLine() + "\n"
	fmt.Fprint(os.Stderr, line)
	if err := os.WriteFile(filepath.Join(*app.Outdir(), ToleranceFile), []byte(line), 0o644); err != nil {
		return err
	}
	encryption := lf.EncryptionLine() + "\n"
	fmt.Fprint(os.Stderr, encryption)
	if err := os.WriteFile(filepath.Join(*app.Outdir(), EncryptionFile), []byte(encryption), 0o644); err != nil {
		return err
	}
	alarms := lf.AlarmsLine() + "\n"
	fmt.Fprint(os.Stderr, alarms)
	return os.WriteFile(filepath.Join(*app.Outdir(), AlarmsFile), []byte(alarms), 0o644)
}

// appStackName is the stack's name: stackName when given, else
// localeflow.DefaultStackName(prefix) (Localeflow for the default prefix,
// so existing deployments keep their stack; Localeflow-<prefix> otherwise).
// A name of that form for another prefix is refused: deploying prefix
// staging as the stack Localeflow would replace the default deployment
// (its tables renamed, so replaced, and new keys no peer holds).
func appStackName(prefix, stackName string) (string, error) {
	want := localeflow.DefaultStackName(prefix)
	if stackName == "" {
		return want, nil
	}
	if stackName != want && localeflow.IsDefaultStackName(stackName) {
		return "", fmt.Errorf("infra: context %s %q is the stack name of another prefix: prefix %q deploys as %q (leave %s/STACK_NAME unset, or choose a name not of the form Localeflow[-<prefix>])",
			ctxStackName, stackName, localeflow.PrefixOrDefault(prefix), want, ctxStackName)
	}
	return stackName, nil
}

// synthesize runs app.Synth; a failed validation (the construct checks
// each function's final environment with its config loader) throws in
// CDK, which jsii turns into a panic: it becomes the error run returns.
func synthesize(app awscdk.App) (assembly cxapi.CloudAssembly, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("infra: synth failed: %v", r)
		}
	}()
	return app.Synth(nil), nil
}

// synthErrors fails on error annotations (cdk-nag findings among them), so
// that `go run .` fails like `cdk synth` does.
func synthErrors(assembly cxapi.CloudAssembly) error {
	var errs []error
	for _, stack := range *assembly.Stacks() {
		for _, m := range *stack.Messages() {
			if m.Level == cxapi.SynthesisMessageLevel_ERROR {
				errs = append(errs, fmt.Errorf("%s: %v", *m.Id, firstLine(m.Entry.Data)))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("infra: synth found %d errors: %w", len(errs), errors.Join(errs...))
	}
	return nil
}

// firstLine is the first line of an annotation's data (nag messages carry
// a long explanation after it).
func firstLine(v any) string {
	s, _ := v.(string)
	if p, ok := v.(*string); ok && p != nil {
		s = *p
	}
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// parseFunctionOptions reads the functions context value: a JSON object
// keyed by function dir, e.g.
// {"poller":{"memoryMB":512,"timeoutSeconds":60,"reservedConcurrency":5}}.
// From cdk.json it arrives as an object, from `-c` as a string.
func parseFunctionOptions(v any) (map[string]localeflow.FunctionOptions, error) {
	out := map[string]localeflow.FunctionOptions{}
	var raw []byte
	switch t := v.(type) {
	case nil:
		return out, nil
	case string:
		if t == "" {
			return out, nil
		}
		raw = []byte(t)
	default:
		b, err := json.Marshal(t)
		if err != nil {
			return nil, fmt.Errorf("infra: context %s: %w", ctxFunctions, err)
		}
		raw = b
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("infra: context %s: %w", ctxFunctions, err)
	}
	return out, nil
}
