package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/localeflow/localeflow/adapters/awsclient"
	"github.com/localeflow/localeflow/adapters/awsconfig"
	"github.com/localeflow/localeflow/adapters/healthdb"
	"github.com/localeflow/localeflow/adapters/monitordb"
	"github.com/localeflow/localeflow/adapters/releasedb"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/health"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/topology"
)

// Exit codes (doc.go).
const (
	exitOK      = 0
	exitBad     = 1
	exitUsage   = 2
	exitRuntime = 3
)

// Codes of the CLI itself.
const (
	codeUsage   = "cli.usage"
	codeRuntime = "cli.runtime"
)

const usageText = `usage: localeflow [--monitor-table NAME] [--release-table NAME] [--prefix P] [--json] COMMAND [ARGS]

commands:
  status EVENT_ID                     one change: monitor record, evidence, delivery, requeues
  health                              the health document (exit 1 when blocked)
  list [--state S] [--kind K]         open records and records needing attention (K: monitor, evidence, delivery)
  requeue EVENT_ID                    a failed change back to due with a fresh failure budget
  audit [--segments N]                full integrity check of both tables (parallel Scan, on demand only)
  quarantine list                     rejected messages: ids, code, source queue, body hash (never the body)
  quarantine replay ID...|--all       send quarantined messages back to their source queue (by message or quarantine id)

exit codes: 0 ok, 1 blocked/invalid/refused, 2 usage, 3 runtime error
`

// usageError is a command-line mistake (exit 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// badError is a bad answer already reported on stdout (exit 1).
type badError struct{ code string }

func (e badError) Error() string { return e.code }

// cli is one invocation.
type cli struct {
	out, errOut  io.Writer
	getenv       func(string) string
	jsonOut      bool
	monitorTable string
	releaseTable string
	prefix       string
	segments     int
	state        string
	kind         string
	args         []string
	all          bool

	db *dynamodb.Client
}

func run(ctx context.Context, args []string, getenv func(string) string, out, errOut io.Writer) int {
	c := &cli{out: out, errOut: errOut, getenv: getenv}
	if len(args) == 0 || slices.Contains([]string{"-h", "--help", "help", "-help"}, args[0]) {
		fmt.Fprint(out, usageText)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	err := c.parse(args)
	if err == nil {
		err = c.dispatch(ctx)
	}
	return c.report(err)
}

// parse reads the flags anywhere on the line and the positional arguments.
func (c *cli) parse(args []string) error {
	fs := flag.NewFlagSet("localeflow", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(&c.jsonOut, "json", false, "")
	fs.StringVar(&c.monitorTable, "monitor-table", "", "")
	fs.StringVar(&c.releaseTable, "release-table", "", "")
	fs.StringVar(&c.prefix, "prefix", "", "")
	fs.IntVar(&c.segments, "segments", 4, "")
	fs.StringVar(&c.state, "state", "", "")
	fs.StringVar(&c.kind, "kind", "", "")
	fs.BoolVar(&c.all, "all", false, "")
	for {
		if err := fs.Parse(args); err != nil {
			return usagef("%v", err)
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		c.args = append(c.args, args[0])
		args = args[1:]
	}
	if len(c.args) == 0 {
		return usagef("no command")
	}
	if c.prefix != "" {
		if err := topology.ValidatePrefix(c.prefix); err != nil {
			return usagef("--prefix: %v", err)
		}
		topo := topology.New(c.prefix)
		c.monitorTable = firstNonEmpty(c.monitorTable, topo.Monitor.Name)
		c.releaseTable = firstNonEmpty(c.releaseTable, topo.Release.Name)
	}
	c.monitorTable = firstNonEmpty(c.monitorTable, strings.TrimSpace(c.getenv("LOCALEFLOW_MONITOR_TABLE")))
	c.releaseTable = firstNonEmpty(c.releaseTable, strings.TrimSpace(c.getenv("LOCALEFLOW_RELEASE_TABLE")))
	return nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (c *cli) dispatch(ctx context.Context) error {
	cmd, rest := c.args[0], c.args[1:]
	need := func(n int, what string) error {
		if len(rest) != n {
			return usagef("%s: %s", cmd, what)
		}
		return nil
	}
	if cmd == "quarantine" {
		return c.quarantine(ctx, rest)
	}
	var err error
	switch cmd {
	case "status", "requeue":
		err = need(1, "needs exactly one EVENT_ID")
		if err == nil && !core.ValidToken(rest[0]) {
			err = usagef("%s: EVENT_ID must match [A-Za-z0-9_.:-]{1,256}", cmd)
		}
	case "health", "audit":
		err = need(0, "takes no arguments")
	case "list":
		err = need(0, "takes no arguments (use --state and --kind)")
		if err == nil {
			err = c.checkListFlags()
		}
	default:
		return usagef("unknown command %q", cmd)
	}
	if err != nil {
		return err
	}
	if cmd == "audit" && (c.segments < 1 || c.segments > 64) {
		return usagef("audit: --segments must be 1..64")
	}
	if c.monitorTable == "" || c.releaseTable == "" {
		return usagef("set the tables: --prefix, --monitor-table/--release-table or LOCALEFLOW_MONITOR_TABLE/LOCALEFLOW_RELEASE_TABLE")
	}
	if err := c.connect(ctx); err != nil {
		return err
	}
	switch cmd {
	case "status":
		return c.status(ctx, rest[0])
	case "requeue":
		return c.requeue(ctx, rest[0])
	case "health":
		return c.health(ctx)
	case "list":
		return c.list(ctx)
	default:
		return c.audit(ctx)
	}
}

// quarantine runs `quarantine list` and `quarantine replay`; they need the
// queues (--prefix or the LOCALEFLOW_*_QUEUE_URL variables), not the tables.
func (c *cli) quarantine(ctx context.Context, rest []string) error {
	if len(rest) == 0 {
		return usagef("quarantine: list or replay")
	}
	switch sub, ids := rest[0], rest[1:]; {
	case sub == "list" && len(ids) == 0:
		return c.quarantineList(ctx)
	case sub == "replay" && (len(ids) > 0) != c.all:
		for _, id := range ids {
			if !core.ValidToken(id) {
				return usagef("quarantine replay: %q is not a message id", id)
			}
		}
		return c.quarantineReplay(ctx, ids)
	case sub == "replay":
		return usagef("quarantine replay: give message ids or --all (not both)")
	}
	return usagef("quarantine: list takes no arguments; replay takes ids or --all")
}

func (c *cli) connect(ctx context.Context) error {
	cfg, err := awsconfig.Load(ctx)
	if err != nil {
		return core.Wrap(codeRuntime, true, fmt.Errorf("aws config: %w", err))
	}
	c.db = awsclient.DynamoDB(cfg)
	return nil
}

func (c *cli) monitorStore() *monitordb.Store {
	s, _ := monitordb.New(c.db, c.monitorTable) // both set: cannot fail
	return s
}

func (c *cli) releaseStore() *releasedb.Store { return releasedb.New(c.db, c.releaseTable) }

func (c *cli) checker() (*health.Checker, error) {
	reader, err := healthdb.NewReleaseReader(c.db, c.releaseTable)
	if err != nil {
		return nil, err
	}
	return health.NewChecker(c.monitorStore(), healthdb.TableItems{DB: c.db, Table: c.monitorTable}, reader, core.SystemClock{}, nil)
}

// report prints err and maps it to an exit code.
func (c *cli) report(err error) int {
	if err == nil {
		return exitOK
	}
	var bad badError
	if errors.As(err, &bad) {
		return exitBad
	}
	var usage usageError
	code, exit := core.CodeOf(err), exitRuntime
	switch {
	case errors.As(err, &usage):
		code, exit = codeUsage, exitUsage
	case code == "":
		code = codeRuntime
	case !core.IsRetryable(err):
		// A domain refusal (invalid record, missing event, not failed):
		// the answer is bad, nothing is broken.
		exit = exitBad
	}
	if c.jsonOut {
		_ = json.NewEncoder(c.out).Encode(struct {
			Code  string `json:"code"`
			Error string `json:"error"`
		}{code, err.Error()})
	}
	fmt.Fprintf(c.errOut, "localeflow: %s: %v\n", code, err)
	if exit == exitUsage {
		fmt.Fprint(c.errOut, usageText)
	}
	return exit
}

func (c *cli) printJSON(v any) error {
	enc := json.NewEncoder(c.out)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return core.Wrap(codeRuntime, false, err)
	}
	return nil
}

var monitorStates = func() []string {
	var out []string
	for _, s := range monitor.States() {
		out = append(out, string(s))
	}
	return out
}()

func (c *cli) checkListFlags() error {
	switch c.kind {
	case "", health.KindMonitor, health.KindEvidence, health.KindDelivery:
	default:
		return usagef("list: --kind must be monitor, evidence or delivery")
	}
	if c.state == "" {
		return nil
	}
	valid := monitorStates
	if c.kind == health.KindEvidence || c.kind == health.KindDelivery {
		valid = []string{"pending", "leased", "retry_wait", "failed"}
	}
	if !slices.Contains(valid, c.state) {
		return usagef("list: --state must be one of %s", strings.Join(valid, ", "))
	}
	return nil
}
