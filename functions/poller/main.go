// Command poller is the lifecycle monitor's Lambda function: it registers
// dispatched changes, polls the CMS lifecycle API under leases, schedules
// the next poll as delayed SQS messages and sweeps for anything due on a
// schedule. See package handler for the behaviour and package config for the
// environment it reads.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/localeflow/localeflow/adapters/awsclient"
	"github.com/localeflow/localeflow/adapters/cms"
	"github.com/localeflow/localeflow/adapters/delayqueue"
	"github.com/localeflow/localeflow/adapters/eventbus"
	"github.com/localeflow/localeflow/adapters/monitordb"
	"github.com/localeflow/localeflow/adapters/quarantine"
	"github.com/localeflow/localeflow/adapters/signedhttp"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/functions/poller/handler"
	"github.com/localeflow/localeflow/internal/emf"
	"github.com/localeflow/localeflow/internal/lambdalog"
	"github.com/localeflow/localeflow/internal/remotecall"
	"github.com/localeflow/localeflow/topology"
)

func main() {
	log := lambdalog.New(os.Stdout, slog.LevelInfo)
	h, err := coldStart(context.Background(), os.Getenv, log)
	if err != nil {
		code := core.CodeOf(err)
		if code == "" {
			code = "poller.config_invalid"
		}
		log.Error("poller cold start failed", "code", code, "error", err.Error())
		os.Exit(1)
	}
	// One document per invocation with its remote calls' latencies
	// (internal/remotecall).
	lambda.Start(remotecall.Wrap(h.Handle, os.Stdout, os.Getenv(contract.EnvDeployment)))
}

// coldStart wires the handler and then checks, once, that the monitor
// table is the one the store was written for (monitordb.Verify: key schema
// and the sparse KEYS_ONLY indexes of topology, all ACTIVE). A table with
// another key schema or a missing index fails the cold start with
// lifecycle_monitor.schema_altered (lifecycle_monitor.database_integrity
// while an index is still building), rather than polls that silently miss
// due changes or owed outcomes.
func coldStart(ctx context.Context, getenv func(string) string, log *slog.Logger) (*handler.Handler, error) {
	h, w, err := wire(ctx, getenv, log)
	if err != nil {
		return nil, err
	}
	if err := monitordb.Verify(ctx, w.db, monitorTable(w.table)); err != nil {
		return nil, fmt.Errorf("monitor table %s: %w", w.table, err)
	}
	return h, nil
}

// monitorTable is the topology's monitor table under the configured name
// (keys and indexes do not depend on the prefix).
func monitorTable(name string) topology.Table {
	t := topology.New(topology.DefaultPrefix).Monitor
	t.Name = name
	return t
}

// build reads the configuration and wires the handler (no AWS call is
// made; coldStart adds the table check).
func build(ctx context.Context, getenv func(string) string, log *slog.Logger) (*handler.Handler, error) {
	h, _, err := wire(ctx, getenv, log)
	return h, err
}

// wired is what the table check needs from wiring.
type wired struct {
	db    monitordb.DynamoDBDescribeAPI
	table string
}

func wire(ctx context.Context, getenv func(string) string, log *slog.Logger) (*handler.Handler, wired, error) {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return nil, wired{}, err
	}
	if cfg.LogLevel != nil {
		log = lambdalog.New(os.Stdout, *cfg.LogLevel)
		// Metric lines carry the same level: Lambda's filter keeps them.
		emf.SetLevel(*cfg.LogLevel)
	}
	awsCfg, err := awsclient.FromEnv()
	if err != nil {
		return nil, wired{}, err
	}
	// Each call is appended to LOCALEFLOW_AWS_CALL_LOG when the tests set it
	// (the IAM sufficiency check); nothing otherwise.
	awsCfg = awsclient.Record(awsCfg, "poller")
	sm := secretsmanager.NewFromConfig(awsCfg)
	// Key sets "current,previous,…", re-read every LOCALEFLOW_KEY_TTL so a
	// rotated secret needs no cold start.
	cmsKeys, err := cfg.KeyCache(ctx, cfg.CMSKey, sm, "CMS")
	if err != nil {
		return nil, wired{}, err
	}
	eventKeys, err := cfg.KeyCache(ctx, cfg.EventKey, sm, "event")
	if err != nil {
		return nil, wired{}, err
	}
	// A failed re-read keeps the set in use and says so: ERROR log and
	// KeyReloadFailures (alarm <prefix>-poller-key-reload-failed).
	cmsKeys.Alarm(log, os.Stdout, cfg.Deployment, "poller")
	eventKeys.Alarm(log, os.Stdout, cfg.Deployment, "poller")
	reader, err := cms.New(cms.Config{BaseURL: cfg.CMSBaseURL, KeySet: cmsKeys, Timeout: cfg.CMSTimeout})
	if err != nil {
		return nil, wired{}, fmt.Errorf("cms client: %w", err)
	}
	db := awsclient.DynamoDB(awsCfg)
	base, err := monitordb.New(db, cfg.MonitorTable)
	if err != nil {
		return nil, wired{}, fmt.Errorf("monitor store: %w", err)
	}
	store := base.WithRetention(cfg.Retention)
	clock := core.SystemClock{}
	svc, err := monitor.NewService(store, clock, log, cfg.Monitor)
	if err != nil {
		return nil, wired{}, err
	}
	h, err := handler.New(handler.Config{
		Monitor:     svc,
		Reader:      reader,
		Queue:       delayqueue.New(awsclient.SQS(awsCfg), cfg.PollQueueURL),
		Bus:         eventbus.New(awsclient.EventBridge(awsCfg), cfg.EventBus).WithDeployment(cfg.Deployment),
		Clock:       clock,
		Log:         log,
		Concurrency: cfg.Concurrency,
		Margin:      cfg.Margin,
		EventKeySet: eventKeys,
		Rejecter: &quarantine.Rejecter{
			SQS: awsclient.SQS(awsCfg), QueueURL: cfg.QuarantineURL, Source: topology.New(topology.DefaultPrefix).PollQueue.Logical,
			Function: "poller", Deployment: cfg.Deployment, Metrics: os.Stdout, Clock: clock,
		},
		EventMaxAge:    cfg.EventMaxAge,
		RefuseV1Events: cfg.RefuseV1,
		LongestWait:    longestWait(cfg.Monitor),
		Metrics:        emf.NewWriter(os.Stdout, cfg.Deployment, clock.Now),
	})
	if err != nil {
		return nil, wired{}, err
	}
	return h, wired{db: db, table: cfg.MonitorTable}, nil
}

// longestWait is the furthest ahead the poller schedules a poll with m:
// the monitor's own longest wait (a jittered retry lands up to half its
// backoff past LOCALEFLOW_RETRY_MAX_DELAY) or the longest Retry-After it
// honours. The handler refuses envelopes due past it plus
// delayqueue.HorizonSlack, so a retry the poller scheduled itself is never
// one of them, whatever the configured maximum delay.
func longestWait(m monitor.Config) time.Duration {
	return max(m.LongestWait(), signedhttp.MaxRetryAfter)
}
