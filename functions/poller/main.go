// Command poller is the lifecycle monitor's Lambda function: it registers
// dispatched changes, polls the CMS lifecycle API under leases, schedules
// the next poll as delayed SQS messages and sweeps for anything due on a
// schedule. See package handler for the behaviour and config.go for the
// environment it reads.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/localeflow/localeflow/adapters/awsclient"
	"github.com/localeflow/localeflow/adapters/cms"
	"github.com/localeflow/localeflow/adapters/delayqueue"
	"github.com/localeflow/localeflow/adapters/eventbus"
	"github.com/localeflow/localeflow/adapters/monitordb"
	"github.com/localeflow/localeflow/adapters/quarantine"
	"github.com/localeflow/localeflow/adapters/signedhttp"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/functions/poller/handler"
	"github.com/localeflow/localeflow/internal/lambdalog"
	"github.com/localeflow/localeflow/topology"
)

func main() {
	log := lambdalog.New(os.Stdout, slog.LevelInfo)
	h, err := build(context.Background(), os.Getenv, log)
	if err != nil {
		log.Error("poller cold start failed", "code", "poller.config_invalid", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(h.Handle)
}

// build reads the configuration and wires the handler once per cold start.
func build(ctx context.Context, getenv func(string) string, log *slog.Logger) (*handler.Handler, error) {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return nil, err
	}
	if cfg.LogLevel != nil {
		log = lambdalog.New(os.Stdout, *cfg.LogLevel)
	}
	awsCfg, err := awsclient.Load(ctx)
	if err != nil {
		return nil, err
	}
	sm := secretsmanager.NewFromConfig(awsCfg)
	// Key sets "current,previous,…", re-read every LOCALEFLOW_KEY_TTL so a
	// rotated secret needs no cold start.
	cmsKeys, err := cfg.keyCache(ctx, cfg.CMSKey, sm, "CMS")
	if err != nil {
		return nil, err
	}
	eventKeys, err := cfg.keyCache(ctx, cfg.EventKey, sm, "event")
	if err != nil {
		return nil, err
	}
	reader, err := cms.New(cms.Config{BaseURL: cfg.CMSBaseURL, KeySet: cmsKeys, Timeout: cfg.CMSTimeout})
	if err != nil {
		return nil, fmt.Errorf("cms client: %w", err)
	}
	store, err := monitordb.New(awsclient.DynamoDB(awsCfg), cfg.MonitorTable)
	if err != nil {
		return nil, fmt.Errorf("monitor store: %w", err)
	}
	clock := core.SystemClock{}
	svc, err := monitor.NewService(store, clock, log, cfg.Monitor)
	if err != nil {
		return nil, err
	}
	return handler.New(handler.Config{
		Monitor:     svc,
		Reader:      reader,
		Queue:       delayqueue.New(awsclient.SQS(awsCfg), cfg.PollQueueURL),
		Bus:         eventbus.New(awsclient.EventBridge(awsCfg), cfg.EventBus),
		Clock:       clock,
		Log:         log,
		Concurrency: cfg.Concurrency,
		Margin:      cfg.Margin,
		EventKeySet: eventKeys,
		Rejecter: &quarantine.Rejecter{
			SQS: awsclient.SQS(awsCfg), QueueURL: cfg.QuarantineURL, Source: topology.New(topology.DefaultPrefix).PollQueue.Logical,
			Function: "poller", Metrics: os.Stdout, Clock: clock,
		},
		EventMaxAge:    cfg.EventMaxAge,
		RefuseV1Events: cfg.RefuseV1,
		LongestWait:    max(cfg.Monitor.PollInterval, cfg.Monitor.MaxDelay, cfg.Monitor.Lease, signedhttp.MaxRetryAfter),
	})
}
