// Command localeflow-runner plays what the local emulators lack: the SQS
// event source mappings and the EventBridge schedules of the topology
// (package dev/runner), against functions already running under
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
// kumo, inside dev/emulators/exec.sh) or LocalStack (AWS_ENDPOINT_URL=
// http://localhost.localstack.cloud:4566 with test credentials). It refuses
// a prefix whose tables or queues do not exist (a typo would otherwise
// drive an empty deployment) unless -create is given, which creates every
// missing resource of the topology first (bootstrap.Apply is idempotent).
// It logs one JSON line per batch and stops on SIGINT/SIGTERM.
//
// A function may run as several instances, each under its own
// aws-lambda-rie (-function poller=URL1,URL2): its queue then gets one
// event source mapping loop per instance, so batches are handled in
// parallel as Lambda's concurrency would; its schedules invoke the
// instances in turn.
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
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/localeflow/localeflow/adapters/awsclient"
	"github.com/localeflow/localeflow/adapters/awsconfig"
	"github.com/localeflow/localeflow/dev/bootstrap"
	"github.com/localeflow/localeflow/dev/runner"
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

// functionsFlag collects -function name=url[,url...] (one URL per
// instance; repeating a name adds instances).
type functionsFlag map[string][]string

func (f functionsFlag) String() string { return fmt.Sprint(map[string][]string(f)) }

func (f functionsFlag) Set(v string) error {
	name, raws, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return errors.New("want name=http://host:port/2015-03-31/functions/function/invocations[,URL2...]")
	}
	for _, raw := range strings.Split(raws, ",") {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%q is not an invoke URL: want name=http://host:port/2015-03-31/functions/function/invocations[,URL2...]", raw)
		}
		f[name] = append(f[name], raw)
	}
	return nil
}

// roundRobin invokes its instances in turn (the schedules of a function
// that runs as several instances).
type roundRobin struct {
	mu        sync.Mutex
	next      int
	instances []runner.Invoker
}

func (r *roundRobin) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	r.mu.Lock()
	inv := r.instances[r.next%len(r.instances)]
	r.next++
	r.mu.Unlock()
	return inv.Invoke(ctx, payload)
}

type config struct {
	prefix, region, account string
	speedup                 float64
	visibility              time.Duration
	functions               functionsFlag
	create                  bool
}

func parse(args []string) (config, error) {
	c := config{functions: functionsFlag{}}
	fs := flag.NewFlagSet("localeflow-runner", flag.ContinueOnError)
	fs.StringVar(&c.prefix, "prefix", topology.DefaultPrefix, "resource name prefix")
	fs.StringVar(&c.region, "region", "us-east-1", "region in the events")
	fs.StringVar(&c.account, "account", "000000000000", "account in the events and rule ARNs")
	fs.Float64Var(&c.speedup, "speedup", 1, "divide every schedule's rate by this (12: a 1-minute schedule every 5 s)")
	fs.DurationVar(&c.visibility, "visibility-timeout", 0, "visibility timeout asked on receive (0: the queue's own, as on AWS)")
	fs.Var(c.functions, "function", "name=invoke URL[,URL...] of a function under aws-lambda-rie, one URL per instance (repeat; names: poller, coordinator, health)")
	fs.BoolVar(&c.create, "create", false, "create the prefix's missing tables, queues and bus first (default: refuse a prefix whose resources do not exist)")
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

// missingResources lists the tables and queues of topo that do not exist.
func missingResources(ctx context.Context, db bootstrap.DynamoDBAPI, q bootstrap.SQSAPI, topo topology.Topology) []string {
	var missing []string
	for _, t := range topo.Tables() {
		if _, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(t.Name)}); err != nil {
			missing = append(missing, "table "+t.Name)
		}
	}
	for _, spec := range topo.Queues() {
		for _, name := range []string{spec.Name, spec.DLQName} {
			if _, err := q.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)}); err != nil {
				missing = append(missing, "queue "+name)
			}
		}
	}
	return missing
}

// perInstance gives every instance of a function its own event source
// mapping loop on the function's queue (one batch in flight per instance,
// as Lambda runs one per execution environment).
func perInstance(mappings []*runner.Mapping, topo topology.Topology, instances map[string][]runner.Invoker) []*runner.Mapping {
	dirOf := map[string]string{}
	for _, fn := range topo.Functions {
		dirOf[fn.Name] = fn.Dir
	}
	var out []*runner.Mapping
	for _, m := range mappings {
		invs := instances[dirOf[m.Function]]
		if len(invs) == 0 {
			out = append(out, m)
			continue
		}
		for _, inv := range invs {
			out = append(out, &runner.Mapping{
				Function: m.Function, SQS: m.SQS, QueueURL: m.QueueURL, QueueARN: m.QueueARN, Region: m.Region,
				BatchSize: m.BatchSize, Timeout: m.Timeout, VisibilityTimeout: m.VisibilityTimeout,
				Idle: m.Idle, Invoker: inv, Log: m.Log, OnBatch: m.OnBatch,
			})
		}
	}
	return out
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
	db := awsclient.DynamoDB(cfg)
	topo := topology.New(c.prefix)
	if !c.create {
		if missing := missingResources(ctx, db, sqsClient, topo); len(missing) > 0 {
			return fmt.Errorf("prefix %q: %s do not exist; create them with `localeflow-bootstrap -prefix %s` or run with -create",
				c.prefix, strings.Join(missing, ", "), c.prefix)
		}
	}
	res, err := bootstrap.Apply(ctx, bootstrap.Clients{DynamoDB: db, SQS: sqsClient, EventBridge: awsclient.EventBridge(cfg)}, topo)
	if err != nil {
		return fmt.Errorf("resources: %w", err)
	}
	invokers := map[string]runner.Invoker{}
	instances := map[string][]runner.Invoker{}
	for name, urls := range c.functions {
		for _, u := range urls {
			instances[name] = append(instances[name], &runner.RIE{URL: u})
		}
		invokers[name] = &roundRobin{instances: instances[name]}
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
	st.Mappings = perInstance(st.Mappings, topo, instances)
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
