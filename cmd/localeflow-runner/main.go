// Command localeflow-runner plays what the local emulators lack: the SQS
// event source mappings and the EventBridge schedules of the topology
// (package localstack/runner), against functions already running under
// aws-lambda-rie.
//
//	localeflow-runner -prefix localeflow \
//	  -function poller=http://127.0.0.1:9001/2015-03-31/functions/function/invocations \
//	  -function coordinator=http://127.0.0.1:9002/2015-03-31/functions/function/invocations \
//	  -function health=http://127.0.0.1:9003/2015-03-31/functions/function/invocations \
//	  -speedup 12
//
// SQS is reached through the standard SDK variables, so the same runner
// drives the Docker-free stack (AWS_ENDPOINT_URL_SQS=http://127.0.0.1:4566,
// kumo, inside localstack/exec.sh) or LocalStack (AWS_ENDPOINT_URL=
// http://localhost.localstack.cloud:4566 with test credentials). It creates
// any missing resource of the topology first (bootstrap.Apply is
// idempotent), logs one JSON line per batch, and stops on SIGINT/SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/localeflow/localeflow/adapters/awsclient"
	"github.com/localeflow/localeflow/adapters/awsconfig"
	"github.com/localeflow/localeflow/bootstrap"
	"github.com/localeflow/localeflow/localstack/runner"
	"github.com/localeflow/localeflow/topology"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "localeflow-runner:", err)
		os.Exit(2)
	}
}

// functionsFlag collects -function name=url.
type functionsFlag map[string]string

func (f functionsFlag) String() string { return fmt.Sprint(map[string]string(f)) }

func (f functionsFlag) Set(v string) error {
	name, raw, ok := strings.Cut(v, "=")
	u, err := url.Parse(raw)
	if !ok || name == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("want name=http://host:port/2015-03-31/functions/function/invocations")
	}
	f[name] = raw
	return nil
}

type config struct {
	prefix, region, account string
	speedup                 float64
	visibility              time.Duration
	functions               functionsFlag
}

func parse(args []string) (config, error) {
	c := config{functions: functionsFlag{}}
	fs := flag.NewFlagSet("localeflow-runner", flag.ContinueOnError)
	fs.StringVar(&c.prefix, "prefix", topology.DefaultPrefix, "resource name prefix")
	fs.StringVar(&c.region, "region", "us-east-1", "region in the events")
	fs.StringVar(&c.account, "account", "000000000000", "account in the events and rule ARNs")
	fs.Float64Var(&c.speedup, "speedup", 1, "divide every schedule's rate by this (12: a 1-minute schedule every 5 s)")
	fs.DurationVar(&c.visibility, "visibility-timeout", 0, "visibility timeout asked on receive (0: the queue's own, as on AWS)")
	fs.Var(c.functions, "function", "name=invoke URL of a function under aws-lambda-rie (repeat; names: poller, coordinator, health)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if err := topology.ValidatePrefix(c.prefix); err != nil {
		return c, err
	}
	if len(c.functions) == 0 {
		return c, errors.New("give at least one -function name=url")
	}
	known := map[string]bool{}
	for _, fn := range topology.New(c.prefix).Functions {
		known[fn.Dir] = true
	}
	for name := range c.functions {
		if !known[name] {
			return c, fmt.Errorf("unknown function %q (the topology has poller, coordinator, health)", name)
		}
	}
	if c.speedup < 1 {
		return c, errors.New("-speedup must be at least 1")
	}
	return c, nil
}

func run(ctx context.Context, args []string, out io.Writer) error {
	c, err := parse(args)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(out, nil))
	cfg, err := awsconfig.Load(ctx)
	if err != nil {
		return fmt.Errorf("AWS config: %w", err)
	}
	sqsClient := awsclient.SQS(cfg)
	topo := topology.New(c.prefix)
	res, err := bootstrap.Apply(ctx, bootstrap.Clients{DynamoDB: awsclient.DynamoDB(cfg), SQS: sqsClient, EventBridge: awsclient.EventBridge(cfg)}, topo)
	if err != nil {
		return fmt.Errorf("resources: %w", err)
	}
	invokers := map[string]runner.Invoker{}
	for name, u := range c.functions {
		invokers[name] = &runner.RIE{URL: u}
	}
	st, err := runner.FromTopology(topo, res, sqsClient, invokers, runner.Options{
		Region: c.region, Account: c.account, Speedup: c.speedup, VisibilityTimeout: c.visibility, Log: log,
		OnBatch: func(b runner.BatchResult) {
			errText := ""
			if b.Err != nil {
				errText = b.Err.Error()
			}
			log.Info("batch", "function", b.Function, "messages", b.Messages, "deleted", b.Deleted, "failed", b.Failed, "batch_error", errText)
		},
	})
	if err != nil {
		return err
	}
	for _, m := range st.Mappings {
		log.Info("event source mapping", "function", m.Function, "queue", m.QueueURL, "batch_size", m.BatchSize)
	}
	for _, s := range st.Schedules {
		log.Info("schedule", "name", s.Name, "every", s.Every.String())
	}
	if len(st.Missing) > 0 {
		log.Warn("functions without an invoker are not driven", "functions", strings.Join(st.Missing, ","))
	}
	return st.Run(ctx)
}
