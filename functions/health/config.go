package main

import (
	"github.com/localeflow/localeflow/contract"
	fnconfig "github.com/localeflow/localeflow/functions/health/config"
)

// config is the health function's configuration; package config loads
// and checks it (shared with infra/'s synth check).
type config = fnconfig.Config

// loadConfig reads the environment through getenv (os.Getenv in main).
func loadConfig(getenv func(string) string) (config, error) { return fnconfig.Load(getenv) }

// Environment variables read at cold start (contract.HealthEnv).
const (
	envMonitorTable = contract.EnvMonitorTable
	envReleaseTable = contract.EnvReleaseTable
	envEventBus     = contract.EnvEventBus
	envLogLevel     = contract.EnvLogLevel
)
