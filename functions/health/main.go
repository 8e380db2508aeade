// Command health is localeflow's health function: the Function URL answers
// the health document (JSON, 200/503) or a page for people, and the
// EventBridge schedule publishes CloudWatch EMF metrics and a
// localeflow.health.blocked event when blocked. See package handler for the
// behaviour, core/health for the rules and their cost, and package config for
// the environment it reads.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/localeflow/localeflow/adapters/awsclient"
	"github.com/localeflow/localeflow/adapters/eventbus"
	"github.com/localeflow/localeflow/adapters/monitordb"
	"github.com/localeflow/localeflow/adapters/opsdb"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/health"
	"github.com/localeflow/localeflow/functions/health/handler"
	"github.com/localeflow/localeflow/internal/emf"
	"github.com/localeflow/localeflow/internal/lambdalog"
)

// maxDynamoDBConns bounds the health check's connections to DynamoDB. A
// check issues 32 index Queries (16 per table), a DescribeTable and the
// item reads at once; without a bound the first invoke of a cold start
// opened a connection (on AWS a TLS handshake) for each request in flight,
// 18 or more, and the SDK's idle pool keeps only 10 per host, so every
// later check opened the rest again. With 8 the requests queue for a
// connection: at most 8 handshakes per cold start, all connections reused
// by the next checks (docs/performance.md "Cold start").
const maxDynamoDBConns = 8

// boundedConns gives the DynamoDB client the SDK's default HTTP client
// with at most maxDynamoDBConns connections to a host.
func boundedConns(o *dynamodb.Options) {
	o.HTTPClient = awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.MaxConnsPerHost = maxDynamoDBConns
	})
}

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
		// Metric lines carry the same level: Lambda's filter keeps them.
		emf.SetLevel(*cfg.LogLevel)
	}
	awsCfg, err := awsclient.FromEnv()
	if err != nil {
		return nil, fmt.Errorf("aws config: %w", err)
	}
	// Each call is appended to LOCALEFLOW_AWS_CALL_LOG when the tests set it
	// (the IAM sufficiency check); nothing otherwise.
	awsCfg = awsclient.Record(awsCfg, "health")
	db := awsclient.DynamoDB(awsCfg, boundedConns)
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
	if checker, err = checker.WithLimits(cfg.Limits); err != nil {
		return nil, err
	}
	return handler.New(handler.Config{
		Checker:    checker,
		Bus:        eventbus.New(awsclient.EventBridge(awsCfg), cfg.EventBus).WithDeployment(cfg.Deployment),
		Metrics:    stdout,
		Clock:      clock,
		Log:        log,
		Deployment: cfg.Deployment,
	})
}
