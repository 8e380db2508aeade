package main

import (
	"github.com/localeflow/localeflow/contract"
	fnconfig "github.com/localeflow/localeflow/functions/poller/config"
)

// config is the poller's configuration; package config loads and checks
// it (shared with infra/, which checks a deployment's settings at synth).
type config = fnconfig.Config

// loadConfig reads the environment through getenv (os.Getenv in main).
func loadConfig(getenv func(string) string) (config, error) { return fnconfig.Load(getenv) }

// DefaultMonitorRetention is how long finished monitor records that need
// no attention stay by default.
const DefaultMonitorRetention = fnconfig.DefaultMonitorRetention

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
	envEventV1      = contract.EnvEventV1
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
