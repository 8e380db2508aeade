// Package config is the poller's configuration loader: it reads the
// variables of contract.PollerEnv and checks every rule a cold start
// applies. The function (package main) and the CDK construct (infra/,
// which checks the settings a deployment gives before synthesizing) share
// this one implementation, so a value refused at cold start is refused at
// synth with the same message.
package config

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/localeflow/localeflow/adapters/cms"
	"github.com/localeflow/localeflow/adapters/secretkey"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/functions/poller/handler"
	"github.com/localeflow/localeflow/internal/envvar"
	"github.com/localeflow/localeflow/signing"
	"github.com/localeflow/localeflow/topology"
)

// Environment variables read at cold start (contract.PollerEnv).
const (
	envMonitorTable = contract.EnvMonitorTable
	envPollQueueURL = contract.EnvPollQueueURL
	envQuarantine   = contract.EnvQuarantineQueueURL // optional: rejected messages
	envEventBus     = contract.EnvEventBus
	envCMSBaseURL   = contract.EnvCMSBaseURL
	envCMSKey       = contract.KeyCMS // _SECRET_ARN (deployed) or _HEX (local use)
	envCMSKeyARN    = envCMSKey + contract.SecretARNSuffix
	envCMSKeyHex    = envCMSKey + contract.HexSuffix
	envEventKey     = contract.KeyEvent // verifies the signed dispatch details
	envEventKeyHex  = envEventKey + contract.HexSuffix
	envEventMaxAge  = contract.EnvEventMaxAge
	envKeyTTL       = contract.EnvKeyTTL // key sets re-read after (default 5m)
	envCMSTimeout   = contract.EnvCMSTimeout
	envLease        = contract.EnvMonitorLease
	envPollInterval = contract.EnvPollInterval
	envBaseDelay    = contract.EnvRetryBaseDelay
	envMaxDelay     = contract.EnvRetryMaxDelay
	envMaxFailures  = contract.EnvMaxConsecutiveFailures
	envHintMinGap   = contract.EnvHintMinGap
	envConcurrency  = contract.EnvPollConcurrency
	envMargin       = contract.EnvDeadlineMargin
	envWorkerID     = contract.EnvWorkerID
	envLogLevel     = contract.EnvLogLevel
	envRetention    = contract.EnvMonitorRetention // finished records expire after (default 2160h)
	envSweepGrace   = contract.EnvSweepGrace       // due changes left to their message this long before a sweep (default 30s)
)

// Retention of finished monitor records that need no attention.
const (
	DefaultMonitorRetention = 90 * 24 * time.Hour
	minMonitorRetention     = time.Hour
)

// Config is the poller's configuration. Durations are Go duration strings
// ("30s", "10m"); zero values take the defaults of the packages they feed.
type Config struct {
	// Deployment is the metrics' Deployment dimension (LOCALEFLOW_DEPLOYMENT,
	// the resource prefix; default localeflow).
	Deployment string
	// Retention is how long finished records that need no attention stay
	// before DynamoDB TTL deletes them.
	Retention    time.Duration
	MonitorTable string
	PollQueueURL string
	// QuarantineURL is the quarantine queue; empty only logs and counts
	// rejected messages (local runs without it).
	QuarantineURL string
	EventBus      string
	CMSBaseURL    string
	CMSKey        secretkey.Source
	EventKey      secretkey.Source
	EventMaxAge   time.Duration
	RefuseV1      bool
	KeyTTL        time.Duration
	CMSTimeout    time.Duration
	Monitor       monitor.Config
	Concurrency   int
	Margin        time.Duration
	// InsecureHTTP allows an http:// CMS URL (LOCALEFLOW_ALLOW_INSECURE_HTTP=1,
	// local runs only).
	InsecureHTTP bool
	// LogLevel is nil for the default (INFO).
	LogLevel *slog.Level
}

// Load reads the environment through getenv (os.Getenv in main).
func Load(getenv func(string) string) (Config, error) {
	env := envvar.NewReader(getenv)
	c := Config{
		MonitorTable:  env.String(envMonitorTable),
		PollQueueURL:  env.String(envPollQueueURL),
		QuarantineURL: env.String(envQuarantine),
		EventBus:      env.String(envEventBus),
		CMSBaseURL:    env.String(envCMSBaseURL),
		CMSKey:        secretkey.FromEnv(getenv, envCMSKey),
		EventKey:      secretkey.FromEnv(getenv, envEventKey),
		Monitor:       monitor.Config{WorkerID: env.String(envWorkerID)},
		Deployment:    env.Deployment(topology.DefaultPrefix),
		LogLevel:      env.LogLevel(),
		InsecureHTTP:  env.InsecureHTTPAllowed(),
	}
	env.Duration(envCMSTimeout, &c.CMSTimeout)
	env.Duration(envLease, &c.Monitor.Lease)
	env.Duration(envPollInterval, &c.Monitor.PollInterval)
	env.Duration(envBaseDelay, &c.Monitor.BaseDelay)
	env.Duration(envMaxDelay, &c.Monitor.MaxDelay)
	env.Duration(envMargin, &c.Margin)
	env.Duration(envHintMinGap, &c.Monitor.HintMinGap)
	env.Int(envMaxFailures, &c.Monitor.MaxConsecutiveFailures)
	env.Duration(envSweepGrace, &c.Monitor.SweepGrace)
	env.Int(envConcurrency, &c.Concurrency)
	env.Duration(envEventMaxAge, &c.EventMaxAge)
	env.Duration(envKeyTTL, &c.KeyTTL)
	c.Retention = DefaultMonitorRetention
	env.Duration(envRetention, &c.Retention)
	// v1 signatures carry no time: a replayed v1 input is accepted at any
	// age, so registration would stop being idempotent once its record
	// expired. They are refused unless LOCALEFLOW_EVENT_V1=accept (a
	// producer still signs v1; docs/design.md "Retention and the replay
	// window").
	c.RefuseV1 = env.RefuseV1()
	errs := []error{env.Err()}
	if env.String(envSweepGrace) != "" && c.Monitor.SweepGrace == 0 {
		// Zero would silently take the default: a value that is set must
		// be a grace (monitor.Config.SweepGrace: (0, MaxSweepGrace]).
		errs = append(errs, fmt.Errorf("%s (%s) must be a Go duration of whole milliseconds from 1ms to %s: %w",
			envSweepGrace, env.String(envSweepGrace), monitor.MaxSweepGrace, core.Fail(monitor.CodeDelayInvalid)))
	}
	if c.CMSTimeout == 0 {
		c.CMSTimeout = cms.DefaultTimeout
	}
	if c.Monitor.WorkerID == "" {
		id, err := randomWorkerID()
		if err != nil {
			errs = append(errs, err)
		}
		c.Monitor.WorkerID = id
	}
	c.Monitor = c.Monitor.WithDefaults()
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	return c, c.validate()
}

// validate checks everything that can be checked without AWS.
func (c Config) validate() error {
	var errs []error
	for _, req := range []struct{ name, value string }{
		{envMonitorTable, c.MonitorTable}, {envPollQueueURL, c.PollQueueURL},
		{envEventBus, c.EventBus}, {envCMSBaseURL, c.CMSBaseURL},
	} {
		if req.value == "" {
			errs = append(errs, fmt.Errorf("%s is required", req.name))
		}
	}
	if c.Retention < minMonitorRetention {
		errs = append(errs, fmt.Errorf("%s (%s) must be at least %s (a Go duration such as 2160h)", envRetention, c.Retention, minMonitorRetention))
	}
	if !strings.HasPrefix(c.PollQueueURL, "https://") && !strings.HasPrefix(c.PollQueueURL, "http://") {
		errs = append(errs, fmt.Errorf("%s must be a queue URL", envPollQueueURL))
	}
	if c.QuarantineURL != "" && !strings.HasPrefix(c.QuarantineURL, "https://") && !strings.HasPrefix(c.QuarantineURL, "http://") {
		errs = append(errs, fmt.Errorf("%s must be a queue URL", envQuarantine))
	}
	if err := envvar.CheckServiceURL(envCMSBaseURL, c.CMSBaseURL, c.InsecureHTTP); err != nil {
		errs = append(errs, err)
	}
	if err := c.CMSKey.Validate(secretkey.MinBytes(cms.MinKeyBytes)); err != nil {
		errs = append(errs, err)
	}
	if err := c.EventKey.Validate(secretkey.MinBytes(cms.MinKeyBytes)); err != nil {
		errs = append(errs, err)
	}
	if c.KeyTTL < 0 {
		errs = append(errs, fmt.Errorf("%s (%s) must not be negative", envKeyTTL, c.KeyTTL))
	}
	if c.EventMaxAge < 0 {
		errs = append(errs, fmt.Errorf("%s (%s) must not be negative", envEventMaxAge, c.EventMaxAge))
	}
	if maxAge := signing.EffectiveEventMaxAge(c.EventMaxAge); c.Retention >= time.Hour && c.Retention < maxAge {
		// A record deleted while an input can still arrive would let a
		// redelivered or replayed input register a finished change (or
		// release) again.
		errs = append(errs, fmt.Errorf("%s (%s) must be at least %s (%s): records must outlive every input that can still arrive",
			envRetention, c.Retention, envEventMaxAge, maxAge))
	}
	if c.CMSTimeout <= 0 || c.CMSTimeout > cms.MaxTimeout {
		errs = append(errs, fmt.Errorf("%s (%s) must be more than 0 and at most %s", envCMSTimeout, c.CMSTimeout, cms.MaxTimeout))
	}
	if err := (monitor.Config{HintMinGap: c.Monitor.HintMinGap}).WithDefaults().Validate(); core.HasCode(err, monitor.CodeHintGapInvalid) {
		errs = append(errs, fmt.Errorf("%s (%s) must be a whole number of milliseconds in (0, %s]: %w",
			envHintMinGap, c.Monitor.HintMinGap, monitor.MaxDelay, err))
	} else if err := c.Monitor.Validate(); err != nil {
		errs = append(errs, monitorSettingError(c.Monitor, err))
	} else if c.Monitor.Lease <= c.CMSTimeout {
		errs = append(errs, fmt.Errorf("%s (%s) must outlast %s (%s): %w", envLease, c.Monitor.Lease, envCMSTimeout, c.CMSTimeout,
			core.Fail(monitor.CodeLeaseTooShort)))
	}
	if c.Concurrency < 0 || c.Concurrency > handler.MaxConcurrency {
		errs = append(errs, fmt.Errorf("%s (%d) must be 1..%d", envConcurrency, c.Concurrency, handler.MaxConcurrency))
	}
	if c.Margin < 0 {
		errs = append(errs, fmt.Errorf("%s (%s) must not be negative", envMargin, c.Margin))
	}
	return errors.Join(errs...)
}

// monitorSettingError says which variable breaks which rule of
// monitor.Config.Validate (err), with the value given; the monitor's code
// stays the cause.
func monitorSettingError(m monitor.Config, err error) error {
	bounded := func(name string, d, maximum time.Duration) error {
		if d < time.Millisecond || d > maximum || d%time.Millisecond != 0 {
			return fmt.Errorf("%s (%s) must be a Go duration of whole milliseconds from 1ms to %s: %w", name, d, maximum, err)
		}
		return nil
	}
	for _, check := range []error{
		bounded(envPollInterval, m.PollInterval, monitor.MaxDelay),
		bounded(envBaseDelay, m.BaseDelay, monitor.MaxDelay),
		bounded(envMaxDelay, m.MaxDelay, monitor.MaxDelay),
	} {
		if check != nil {
			return check
		}
	}
	if m.BaseDelay > m.MaxDelay {
		return fmt.Errorf("%s (%s) must not exceed %s (%s): %w", envBaseDelay, m.BaseDelay, envMaxDelay, m.MaxDelay, err)
	}
	if e := bounded(envLease, m.Lease, monitor.MaxLease); e != nil {
		return e
	}
	if e := bounded(envSweepGrace, m.SweepGrace, monitor.MaxSweepGrace); e != nil {
		return e
	}
	if m.MaxConsecutiveFailures < 1 || m.MaxConsecutiveFailures > monitor.MaxFailures {
		return fmt.Errorf("%s (%d) must be 1..%d: %w", envMaxFailures, m.MaxConsecutiveFailures, monitor.MaxFailures, err)
	}
	if !core.ValidTokenN(m.WorkerID, core.MaxWorkerIDLength) {
		return fmt.Errorf("%s (%q) must be 1..%d characters of [A-Za-z0-9_.:-]: %w", envWorkerID, m.WorkerID, core.MaxWorkerIDLength, err)
	}
	return fmt.Errorf("monitor settings: %w", err)
}

func randomWorkerID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("worker id: %w", err)
	}
	return "poller-" + hex.EncodeToString(b[:]), nil
}

// LoadCMSKey returns the CMS HMAC key: from LOCALEFLOW_CMS_KEY_HEX, or from the
// secret (SecretString = the key in hex, or SecretBinary = the raw key).
func (c Config) LoadCMSKey(ctx context.Context, sm secretkey.SecretsManagerAPI) ([]byte, error) {
	return c.CMSKey.Load(ctx, sm, "CMS", secretkey.MinBytes(cms.MinKeyBytes))
}

// KeyCache loads a key set and re-reads it every KeyTTL.
func (c Config) KeyCache(ctx context.Context, src secretkey.Source, sm secretkey.SecretsManagerAPI, label string) (*secretkey.Cache, error) {
	return secretkey.NewCache(ctx, src, sm, label, secretkey.MinBytes(cms.MinKeyBytes), c.KeyTTL, nil)
}
