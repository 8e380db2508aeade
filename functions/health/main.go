// Command health is localeflow's health function: the Function URL answers
// the health document (JSON, 200/503) or a page for people, and the
// EventBridge schedule publishes CloudWatch EMF metrics and a
// localeflow.health.blocked event when blocked. See package handler for the
// behaviour, core/health for the rules and their cost, and config.go for
// the environment it reads.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/localeflow/localeflow/adapters/awsclient"
	"github.com/localeflow/localeflow/adapters/eventbus"
	"github.com/localeflow/localeflow/adapters/monitordb"
	"github.com/localeflow/localeflow/adapters/opsdb"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/health"
	"github.com/localeflow/localeflow/functions/health/handler"
	"github.com/localeflow/localeflow/internal/lambdalog"
)

func main() {
	log := lambdalog.New(os.Stdout, slog.LevelInfo)
	h, err := build(context.Background(), os.Getenv, os.Stdout, log)
	if err != nil {
		log.Error("health cold start failed", "code", "health.config_invalid", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(h.Handle)
}

// build reads the configuration and wires the handler once per cold start.
func build(ctx context.Context, getenv func(string) string, stdout io.Writer, log *slog.Logger) (*handler.Handler, error) {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return nil, err
	}
	if cfg.LogLevel != nil {
		log = lambdalog.New(stdout, *cfg.LogLevel)
	}
	awsCfg, err := awsclient.FromEnv()
	if err != nil {
		return nil, fmt.Errorf("aws config: %w", err)
	}
	db := awsclient.DynamoDB(awsCfg)
	monitorStore, err := monitordb.New(db, cfg.MonitorTable)
	if err != nil {
		return nil, fmt.Errorf("monitor store: %w", err)
	}
	releaseReader, err := opsdb.NewReleaseReader(db, cfg.ReleaseTable)
	if err != nil {
		return nil, fmt.Errorf("release reader: %w", err)
	}
	clock := core.SystemClock{}
	checker, err := health.NewChecker(monitorStore, opsdb.TableItems{DB: db, Table: cfg.MonitorTable}, releaseReader, clock, log)
	if err != nil {
		return nil, err
	}
	return handler.New(handler.Config{
		Checker:    checker,
		Bus:        eventbus.New(awsclient.EventBridge(awsCfg), cfg.EventBus),
		Metrics:    stdout,
		Clock:      clock,
		Log:        log,
		Deployment: cfg.Deployment,
	})
}
