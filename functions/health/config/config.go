// Package config is the health function's configuration loader: it reads
// the variables of contract.HealthEnv and checks every rule a cold start
// applies (shared with infra/'s synth check).
package config

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/health"
	"github.com/localeflow/localeflow/internal/envvar"
	"github.com/localeflow/localeflow/topology"
)

// Environment variables read at cold start (contract.HealthEnv).
const (
	envMonitorTable = contract.EnvMonitorTable
	envReleaseTable = contract.EnvReleaseTable
	envEventBus     = contract.EnvEventBus
	envLogLevel     = contract.EnvLogLevel
)

// Config is the health function's configuration.
type Config struct {
	// Deployment is the metrics' Deployment dimension (LOCALEFLOW_DEPLOYMENT,
	// the resource prefix; default localeflow).
	Deployment   string
	MonitorTable string
	ReleaseTable string
	EventBus     string
	// LogLevel is nil for the default (INFO).
	LogLevel *slog.Level
	// Limits are the age thresholds (health.DefaultLimits unless set).
	Limits health.Limits
}

// Load reads the environment through getenv (os.Getenv in main).
func Load(getenv func(string) string) (Config, error) {
	env := envvar.NewReader(getenv)
	c := Config{
		MonitorTable: env.String(envMonitorTable),
		ReleaseTable: env.String(envReleaseTable),
		EventBus:     env.String(envEventBus),
		Deployment:   env.Deployment(topology.DefaultPrefix),
		LogLevel:     env.LogLevel(),
		Limits:       health.DefaultLimits(),
	}
	env.Duration(contract.EnvHealthMaxChangeAge, &c.Limits.MaxChangeAge)
	env.Duration(contract.EnvHealthMaxReleaseAge, &c.Limits.MaxReleaseAge)
	env.Duration(contract.EnvHealthExpiryWarning, &c.Limits.ExpiryWarning)
	if err := errors.Join(env.Err(), c.validate()); err != nil {
		return Config{}, err
	}
	return c, nil
}

// validate checks everything that can be checked without AWS.
func (c Config) validate() error {
	var errs []error
	for _, req := range []struct{ name, value string }{
		{envMonitorTable, c.MonitorTable}, {envReleaseTable, c.ReleaseTable}, {envEventBus, c.EventBus},
	} {
		if req.value == "" {
			errs = append(errs, fmt.Errorf("%s is required", req.name))
		}
	}
	if err := c.Limits.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%s, %s, %s: %w", contract.EnvHealthMaxChangeAge, contract.EnvHealthMaxReleaseAge, contract.EnvHealthExpiryWarning, err))
	}
	if c.MonitorTable != "" && c.MonitorTable == c.ReleaseTable {
		errs = append(errs, fmt.Errorf("%s and %s must name different tables", envMonitorTable, envReleaseTable))
	}
	return errors.Join(errs...)
}
