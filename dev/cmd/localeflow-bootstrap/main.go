// Command localeflow-bootstrap creates every localeflow resource (tables,
// queues with DLQs, the bus, its rules and targets) on a local AWS stack —
// DynamoDB Local + kumo, or LocalStack — from the shared topology, and
// prints what it created as JSON. With -destroy it deletes them instead.
//
// Endpoints, region and credentials come from the standard AWS variables
// (AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_SQS,
// AWS_ENDPOINT_URL_EVENTBRIDGE, AWS_REGION, …). It is not meant for AWS
// itself: there `cdk deploy` creates the same resources.
//
//	localeflow-bootstrap -prefix localeflow
//	localeflow-bootstrap -prefix localeflow -env   # LOCALEFLOW_* lines
//	localeflow-bootstrap -prefix localeflow -destroy
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/localeflow/localeflow/adapters/awsclient"
	"github.com/localeflow/localeflow/adapters/awsconfig"
	"github.com/localeflow/localeflow/dev/bootstrap"
	"github.com/localeflow/localeflow/topology"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// errUsage marks a command-line mistake (exit status 2).
var errUsage = errors.New("usage")

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := execute(ctx, args, stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		_, _ = fmt.Fprintln(stderr, "localeflow-bootstrap:", err)
		return 2
	default:
		_, _ = fmt.Fprintln(stderr, "localeflow-bootstrap:", err)
		return 1
	}
}

func execute(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("localeflow-bootstrap", flag.ContinueOnError)
	fs.SetOutput(stderr)
	prefix := fs.String("prefix", topology.DefaultPrefix, "resource name prefix (^[a-z][a-z0-9-]{0,39}$)")
	destroy := fs.Bool("destroy", false, "delete the resources instead of creating them")
	asEnv := fs.Bool("env", false, "print the functions' LOCALEFLOW_* resource variables as KEY=VALUE lines instead of JSON")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	if err := topology.ValidatePrefix(*prefix); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if *timeout <= 0 {
		return fmt.Errorf("%w: -timeout must be positive", errUsage)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	cfg, err := awsconfig.Load(ctx)
	if err != nil {
		return err
	}
	clients := bootstrap.Clients{
		DynamoDB:    awsclient.DynamoDB(cfg),
		SQS:         awsclient.SQS(cfg),
		EventBridge: awsclient.EventBridge(cfg),
	}
	topo := topology.New(*prefix)
	if *destroy {
		if err := bootstrap.Destroy(ctx, clients, topo); err != nil {
			return fmt.Errorf("destroy %s: %w", *prefix, err)
		}
		_, err := fmt.Fprintf(stdout, "{\"prefix\":%q,\"destroyed\":true}\n", *prefix)
		return err
	}
	res, err := bootstrap.Apply(ctx, clients, topo)
	if err != nil {
		return fmt.Errorf("apply %s: %w", *prefix, err)
	}
	if *asEnv {
		return printEnv(stdout, res.Env())
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		return fmt.Errorf("print resources: %w", err)
	}
	return nil
}

func printEnv(w io.Writer, env map[string]string) error {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, err := fmt.Fprintf(w, "%s=%s\n", k, env[k]); err != nil {
			return fmt.Errorf("print resources: %w", err)
		}
	}
	return nil
}
