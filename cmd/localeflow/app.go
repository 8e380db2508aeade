package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/localeflow/localeflow/adapters/awsclient"
	"github.com/localeflow/localeflow/adapters/awsconfig"
	"github.com/localeflow/localeflow/adapters/monitordb"
	"github.com/localeflow/localeflow/adapters/opsdb"
	"github.com/localeflow/localeflow/adapters/releasedb"
	"github.com/localeflow/localeflow/contract"
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
	// codeIdentity: the caller's AWS identity could not be read.
	codeIdentity = "cli.identity_unavailable"
	// codeCredentials: no AWS credentials were found (no profile, no
	// keys, no SSO session): nothing was called.
	codeCredentials = "cli.credentials_missing"
)

const usageText = `usage: localeflow [--prefix P] [--monitor-table NAME] [--release-table NAME] [--region R] [--profile NAME] [--json] COMMAND [ARGS]

commands:
  status EVENT_ID                     one change: monitor record, evidence, delivery, requeues
  health                              the health document (exit 1 when blocked)
  health --serve [--listen ADDR] [--url URL] | --html FILE [--url URL]
                                      the health page for a browser, fetched from the Function URL signed with
                                      your AWS credentials: served on 127.0.0.1, or written to FILE
  list [--state S] [--kind K] [--attention]
                                      open records and records needing attention (K: monitor, evidence, delivery;
                                      --attention: only unacknowledged records that block health)
  requeue EVENT_ID                    a failed change back to due with a fresh failure budget
  ack EVENT_ID --reason TEXT          acknowledge a change needing attention (failed, remote failure): health stops counting it
  ack EVENT_ID --release [--key KEY] --reason TEXT
                                      acknowledge the release's failed evidence/delivery/job records or its blocked record
  ack EVENT_ID --invalid --reason TEXT
                                      acknowledge a monitor record that fails its integrity check (state_invalid)
  audit [--segments N]                full integrity check of both tables (parallel Scan, on demand only)
  quarantine list                     rejected messages: ids, code, source queue, body hash (never the body)
  quarantine replay ID...|--all       send quarantined messages back to their source queue (by message or quarantine id)
  keys                                what to hand to the CMS, the event producer and the evidence provider
                                      (HMAC keys by secret reference, Ed25519 public keys in hex)
  dlq list QUEUE                      dead-letter queue messages (QUEUE: poll, release, event): ids, rule, error code, body hash
  dlq redrive QUEUE                   send them back to their queue (event: to the target EventBridge could not reach)
  replay --from T --to T [--detail-type D]
                                      replay the bus archive's input events of a window (RFC 3339) to their rules
  conformance event [--detail-type DT] [--key-hex HEX] FILE...
                                      check a producer's signed events offline as the functions would
  conformance cms --base-url URL --key-hex HEX --site S --change EVENT_ID [--deliver]
                                      check a CMS's lifecycle (and, with --deliver, delivery) API
                                      from outside; --deliver POSTs deliveries (use a test change)
  conformance evidence --base-url URL --key-hex HEX [--issuers-… I=HEX]
                                      check an evidence provider's API from outside

exit codes: 0 ok, 1 blocked/invalid/refused, 2 usage, 3 runtime error
(conformance cms/evidence: 3 the server could not be reached, 4 only SHOULD checks failed)
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
	// monitorTableFlag and releaseTableFlag are the table flags as given
	// (monitorTable and releaseTable are the names resolved from them,
	// --prefix and the variables).
	monitorTableFlag, releaseTableFlag string
	prefix                             string
	segments                           int
	state                              string
	kind                               string
	args                               []string
	all                                bool
	reason                             string
	ackRelease                         bool
	ackKey                             string
	// ackInvalid: ack --invalid, a record that fails its integrity check.
	ackInvalid bool
	attention  bool
	// replay's window and detail-type.
	replayFrom, replayTo, replayDetailType string
	// busName is replay's --bus.
	busName string
	// conformance event's key set, time and v1 policy (detail-type:
	// replayDetailType's flag).
	keyHex, nowUnix, maxAge, detailType string
	acceptV1                            bool
	// conformance cms and evidence (conformance_servers.go).
	baseURL, siteID, changeID, busyChange            string
	planID, websiteVersion, sourceSequence, jobCount string
	approvalSeedHex, publicationSeedHex              string
	issuersQuality, issuersHuman, issuersIndependent string
	deliver                                          bool
	// conformance cms's --locales and conformance event's --plan.
	locales, planFile string
	// setFlags are the flags given on the line.
	setFlags []string
	// identity returns the caller's AWS identity (an ARN); nil means STS
	// GetCallerIdentity.
	identity func(ctx context.Context) (string, error)

	region    string
	profile   string
	serve     bool
	htmlFile  string
	healthURL string
	listen    string
	// awsCfg, when set, replaces the default AWS configuration (tests).
	awsCfg *aws.Config

	db *dynamodb.Client
	// sm reads the key secrets (`keys`); nil means Secrets Manager from
	// the default configuration.
	sm SecretsManagerAPI
}

func run(ctx context.Context, args []string, getenv func(string) string, out, errOut io.Writer) int {
	c := &cli{out: out, errOut: errOut, getenv: getenv}
	if len(args) == 0 || slices.Contains([]string{"-h", "--help", "help", "-help"}, args[0]) {
		if len(args) > 1 && args[0] == "help" {
			if h, ok := commandHelp[args[1]]; ok {
				fmt.Fprint(out, h)
				return exitOK
			}
		}
		fmt.Fprint(out, usageText)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	if slices.Contains([]string{"--version", "-version", "version"}, args[0]) {
		fmt.Fprintf(out, "localeflow %s\n", version())
		return exitOK
	}
	err := c.parse(args)
	if errors.Is(err, errHelp) {
		if c.command() == "" {
			fmt.Fprint(out, usageText)
			return exitOK
		}
		h, ok := commandHelp[c.command()]
		if !ok {
			return c.report(usagef("unknown command %q", c.command()))
		}
		fmt.Fprint(out, h)
		return exitOK
	}
	if err == nil {
		err = c.dispatch(context.WithValue(ctx, cliKey{}, c))
	}
	return c.report(err)
}

// errHelp: --help or -h was given (exit 0 after the help).
var errHelp = errors.New("help requested")

// buildVersion is set by the Makefile (-ldflags -X main.buildVersion=…,
// `git describe --tags --always --dirty`) when the build info carries no
// module version (a build from a checkout).
var buildVersion string

// version is the module version the binary was built from (a tagged
// release, the Makefile's git describe, or "(devel)"), with the VCS
// revision and "+dirty" for uncommitted changes when the build recorded
// them.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return firstNonEmpty(buildVersion, "unknown")
	}
	return versionOf(info, buildVersion)
}

// versionOf renders a build info (split out for tests).
func versionOf(info *debug.BuildInfo, fallback string) string {
	v := info.Main.Version
	if v == "" || v == "(devel)" {
		v = firstNonEmpty(fallback, "(devel)")
	}
	var revision string
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if len(revision) >= 12 && !strings.Contains(v, revision[:12]) {
		v += " " + revision[:12]
		if dirty {
			v += "+dirty"
		}
	}
	return v
}

func (c *cli) command() string {
	if len(c.args) == 0 {
		return ""
	}
	return c.args[0]
}

// commandFlags are the flags each command accepts besides the global ones
// (--json, --prefix, --monitor-table, --release-table).
var commandFlags = map[string][]string{
	"status": {}, "health": {"serve", "html", "url", "listen"}, "requeue": {},
	"ack":        {"reason", "release", "key", "invalid"},
	"list":       {"state", "kind", "attention"},
	"audit":      {"segments"},
	"quarantine": {"all"},
	"keys":       {},
	"dlq":        {},
	"replay":     {"from", "to", "detail-type", "bus"},
}

var globalFlags = []string{"json", "prefix", "monitor-table", "release-table", "region", "profile"}

// commandHelp is each command's help (`localeflow COMMAND --help`).
var commandHelp = map[string]string{
	"status": `usage: localeflow [global flags] status EVENT_ID

One change: its monitor record (state, attempts, failures, last error, remote
status), its requeues and acknowledgement, its evidence and delivery records.
Exit 1 when the record is missing or invalid.
` + globalHelp,
	"health": `usage: localeflow [global flags] health
       localeflow [global flags] health --serve [--listen ADDR] [--url URL]
       localeflow [global flags] health --html FILE [--url URL]

The health document (same rules as the health function); with --json the
document plus "reasons" (why it is blocked) and "attention" (the records that
block it). Exit 1 when blocked.
--serve and --html show the page for people from the health Function URL
(AWS_IAM auth, which a browser cannot sign): each request is signed with your
AWS credentials (lambda:InvokeFunctionUrl, GrantHealthRead).
  --serve        serve the page on --listen (default 127.0.0.1:8765, loopback
                 only) until Ctrl-C; /?format=json is the JSON document
  --html FILE    write the page to FILE once (exit 1 when blocked)
  --url URL      the Function URL (stack output HealthUrl); default
                 $LOCALEFLOW_HEALTH_URL
` + globalHelp,
	"list": `usage: localeflow [global flags] list [--state S] [--kind K] [--attention]

Open records and records needing attention, from the sparse indexes.
  --state S     only records in state S (monitor: pending, leased, watching,
                retry_wait, terminal, failed; evidence/delivery: pending, leased,
                retry_wait, failed)
  --kind K      monitor, evidence or delivery
  --attention   only the unacknowledged records that block health
` + globalHelp,
	"requeue": `usage: localeflow [global flags] requeue EVENT_ID

Puts a failed change back to due with a fresh failure budget (journaled).
Exit 1 when the change is not failed or changed meanwhile.
` + globalHelp,
	"ack": `usage: localeflow [global flags] ack EVENT_ID --reason TEXT
       localeflow [global flags] ack EVENT_ID --release [--key KEY] --reason TEXT
       localeflow [global flags] ack EVENT_ID --invalid --reason TEXT

Acknowledges a change that needs attention (failed, or a remote failure such
as publication_blocked): who (your AWS identity, from STS GetCallerIdentity),
when and why go to a journal item, the record leaves the attention index and
health stops counting it; status and audit still show it.
With --release, acknowledges the release records of EVENT_ID that need
attention instead (a failed evidence, delivery or job record, the blocked
record): every one, or the one KEY names — the KEY column of health and
list: an evidence request id, delivery, blocked or job#JOB_ID.
  --reason TEXT  why (one line, 1..200 printable characters; no texts or secrets)
  --release      the release records, not the monitor record
  --key KEY      only this release record (needs --release)
  --invalid      a monitor record that fails its integrity check
                 (lifecycle_monitor.state_invalid: altered by hand or
                 corrupted), which plain ack and requeue refuse: it is marked
                 failed state_invalid (as any reader marks it) and
                 acknowledged, nothing of its content repaired; the journal
                 records who, when, why and the code. Health counts it until
                 its outcome is announced (the poller's next sweep); audit
                 still lists it
A second ack is a no-op (exit 0). Exit 1: unknown id or key, or nothing to
acknowledge.
` + globalHelp,
	"audit": `usage: localeflow [global flags] audit [--segments N]

Full integrity check of both tables (parallel Scan; it reads every item, run
on demand only). Exit 1 when any record is invalid.
  --segments N   parallel Scan segments per table, 1..64 (default 4)
` + globalHelp,
	"replay": `usage: localeflow [global flags] replay --from T --to T [--detail-type D] [--bus B]

Starts an EventBridge replay of the deployment's archive <prefix>-archive
(input events, kept 7 days) for the window [--from, --to) (RFC 3339) to the
bus the archive keeps the events of (DescribeArchive: <prefix>-bus, or the
host bus the deployment was deployed on), limited to the deployment's rules
there that route D (every input rule without it). Prints the replay's name;
aws events describe-replay follows it. Consumers are idempotent, so
replaying processed events is a no-op.
  --bus B   the bus you expect (name or ARN; without --prefix default
            $LOCALEFLOW_EVENT_BUS): another one is refused
Exit 1: the window is empty, in the future or older than the archive
(cli.replay.window_invalid); --bus names another bus than the archive's
(cli.deployment_ambiguous).
Calls events:DescribeArchive, events:DescribeRule, events:StartReplay.
` + globalHelp,
	"dlq": `usage: localeflow [global flags] dlq list QUEUE
       localeflow [global flags] dlq redrive QUEUE

QUEUE: poll or release (the work queues' DLQs: messages their consumer
failed 5 times), or event (the event DLQ: events EventBridge could not
deliver to a rule's target).
list: ids, send time, receive count, detail-type, event id, rule, target,
EventBridge error code, body hash (never the body).
redrive: send each message back (poll/release: to its queue; event: to the
queue it was meant for, unchanged) and delete it after the send; a schedule
tick (target: a function) is deleted without a send (the next tick redoes
it); a message whose target is unknown is kept (cli.dlq.target_unknown).
Both receive until the queue reports no visible message (SQS may answer a
receive with nothing while messages are queued) and say how many they saw;
a scan that cannot reach them all (10 empty receives in a row while the
queue reports messages, or 500 receives) handles what it saw and exits 3
(cli.queue.scan_incomplete): run it again. --json: one document (the scan,
the messages or what was done with each, the errors).
docs/runbook.md has the procedure.
` + globalHelp,
	"quarantine": `usage: localeflow [global flags] quarantine list
       localeflow [global flags] quarantine replay ID...|--all

list: rejected messages (ids, code, source queue, body hash; never the body).
replay: send them back to their source queue and delete them from quarantine.
  --all   replay every quarantined message
Both scan the whole queue as dlq does (cli.queue.scan_incomplete, exit 3,
when they could not); an id is "not found" (cli.quarantine.not_found) only
after a complete scan. --json: one document.
` + globalHelp,
}

func init() {
	commandHelp["keys"] = `usage: localeflow [global flags] keys

What to hand to the parties of the deployment (--prefix, or the variables
of one deployment): for the CMS the HMAC key by reference (secret name and
ARN) and the approval and publication public keys (Ed25519, hex: every key
of the set, the signing key first, each with its key id; during a rotation
the CMS trusts them all); for the event producer and the evidence provider
their HMAC key by reference. Key material is never printed, and no seed is
read: the public keys come from <prefix>/approval-ed25519-public-key and
<prefix>/publication-ed25519-public-key, which the coordinator writes at
cold start (cli.keys.unpublished until then). Needs
secretsmanager:DescribeSecret on the three HMAC secrets and
secretsmanager:GetSecretValue on the two public-key secrets.
` + globalHelp
}

const globalHelp = `
global flags (before or after the command):
  --prefix P             deployment P (its tables, queues, archive, secrets);
                         without it, the deployment the variables name
                         (LOCALEFLOW_DEPLOYMENT, the tables, the queue URLs),
                         refused when they name two (cli.deployment_ambiguous)
  --monitor-table NAME   default $LOCALEFLOW_MONITOR_TABLE
  --release-table NAME   default $LOCALEFLOW_RELEASE_TABLE
  --region R             AWS region (default: the SDK's, e.g. $AWS_REGION)
  --profile NAME         shared config profile (default: the SDK's, e.g. $AWS_PROFILE)
  --json                 JSON for scripts
exit codes: 0 ok, 1 blocked/invalid/refused, 2 usage, 3 runtime error
`

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
	fs.StringVar(&c.reason, "reason", "", "")
	fs.BoolVar(&c.ackRelease, "release", false, "")
	fs.StringVar(&c.ackKey, "key", "", "")
	fs.BoolVar(&c.ackInvalid, "invalid", false, "")
	fs.BoolVar(&c.attention, "attention", false, "")
	fs.StringVar(&c.replayFrom, "from", "", "")
	fs.StringVar(&c.replayTo, "to", "", "")
	fs.StringVar(&c.replayDetailType, "detail-type", "", "")
	fs.StringVar(&c.busName, "bus", "", "")
	fs.StringVar(&c.keyHex, "key-hex", "", "")
	fs.StringVar(&c.nowUnix, "now", "", "")
	fs.StringVar(&c.maxAge, "max-age", "", "")
	fs.BoolVar(&c.acceptV1, "accept-v1", false, "")
	for name, v := range map[string]*string{
		"base-url": &c.baseURL, "site": &c.siteID, "change": &c.changeID, "busy-change": &c.busyChange,
		"plan-id": &c.planID, "website-version": &c.websiteVersion, "source-sequence": &c.sourceSequence, "job-count": &c.jobCount,
		"approval-seed-hex": &c.approvalSeedHex, "publication-seed-hex": &c.publicationSeedHex,
		"issuers-quality": &c.issuersQuality, "issuers-human-review": &c.issuersHuman, "issuers-independent-review": &c.issuersIndependent,
		"locales": &c.locales, "plan": &c.planFile,
	} {
		fs.StringVar(v, name, "", "")
	}
	fs.BoolVar(&c.deliver, "deliver", false, "")
	fs.StringVar(&c.region, "region", "", "")
	fs.StringVar(&c.profile, "profile", "", "")
	fs.BoolVar(&c.serve, "serve", false, "")
	fs.StringVar(&c.htmlFile, "html", "", "")
	fs.StringVar(&c.healthURL, "url", "", "")
	fs.StringVar(&c.listen, "listen", "", "")
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return errHelp
			}
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
	fs.Visit(func(f *flag.Flag) { c.setFlags = append(c.setFlags, f.Name) })
	c.monitorTableFlag, c.releaseTableFlag = c.monitorTable, c.releaseTable
	if allowed, ok := commandFlags[c.args[0]]; ok {
		var wrong []string
		fs.Visit(func(f *flag.Flag) {
			if !slices.Contains(allowed, f.Name) && !slices.Contains(globalFlags, f.Name) {
				wrong = append(wrong, "--"+f.Name)
			}
		})
		if len(wrong) > 0 {
			return usagef("%s: %s is not a flag of %s (see localeflow %s --help)", c.args[0], strings.Join(wrong, ", "), c.args[0], c.args[0])
		}
	}
	if c.prefix != "" {
		if err := topology.ValidatePrefix(c.prefix); err != nil {
			return usagef("--prefix: %v", err)
		}
		topo := topology.New(c.prefix)
		c.monitorTable = firstNonEmpty(c.monitorTable, topo.Monitor.Name)
		c.releaseTable = firstNonEmpty(c.releaseTable, topo.Release.Name)
	}
	c.monitorTable = firstNonEmpty(c.monitorTable, strings.TrimSpace(c.getenv(contract.EnvMonitorTable)))
	c.releaseTable = firstNonEmpty(c.releaseTable, strings.TrimSpace(c.getenv(contract.EnvReleaseTable)))
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
	if cmd == "keys" {
		if len(rest) != 0 {
			return usagef("keys: takes no arguments")
		}
		prefix, err := c.deploymentPrefix(true)
		if err != nil {
			return err
		}
		return c.keys(ctx, prefix)
	}
	if cmd == "dlq" {
		return c.dlqCommand(ctx, rest)
	}
	if cmd == "conformance" {
		c.detailType = c.replayDetailType
		if len(rest) > 0 && (rest[0] == "cms" || rest[0] == "evidence") {
			return c.conformanceServer(ctx, rest[0], rest[1:])
		}
		return c.conformance(rest)
	}
	if cmd == "replay" {
		if len(rest) != 0 || c.replayFrom == "" || c.replayTo == "" {
			return usagef("replay: --from T --to T [--detail-type D], no arguments")
		}
		return c.replay(ctx, time.Now())
	}
	var err error
	switch cmd {
	case "status", "requeue", "ack":
		err = need(1, "needs exactly one EVENT_ID")
		if err == nil && !core.ValidToken(rest[0]) {
			err = usagef("%s: EVENT_ID must match [A-Za-z0-9_.:-]{1,256}", cmd)
		}
	case "health", "audit":
		err = need(0, "takes no arguments")
		if err == nil && cmd == "health" && (c.serve || c.htmlFile != "") {
			return c.healthPage(ctx)
		}
		if err == nil && cmd == "health" && (c.listen != "" || c.healthURL != "") {
			err = usagef("health: --listen and --url go with --serve or --html")
		}
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
	if cmd == "ack" && !opsdb.ValidAckReason(c.reason) {
		return usagef("ack: --reason TEXT is required: one line, 1..%d printable characters (why it is acknowledged; no texts or secrets)", opsdb.MaxAckReason)
	}
	if cmd == "ack" && c.ackKey != "" && !c.ackRelease {
		return usagef("ack: --key names a release record: add --release")
	}
	if cmd == "ack" && c.ackInvalid && c.ackRelease {
		return usagef("ack: --invalid is for a monitor record; release records are acknowledged with --release")
	}
	if cmd == "audit" && (c.segments < 1 || c.segments > 64) {
		return usagef("audit: --segments must be 1..64")
	}
	// The tables and the other variables must not name two deployments.
	if _, err := c.deploymentPrefix(false); err != nil {
		return err
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
	case "ack":
		if c.ackRelease {
			return c.ackReleaseRecords(ctx, rest[0])
		}
		return c.ack(ctx, rest[0])
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
	// Like every command: no silent default deployment, checked before
	// any call.
	if _, err := c.deploymentPrefix(true); err != nil {
		return err
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

// configOptions are --region and --profile for the SDK's configuration.
func (c *cli) configOptions() []func(*config.LoadOptions) error {
	var opts []func(*config.LoadOptions) error
	if c.region != "" {
		opts = append(opts, config.WithRegion(c.region))
	}
	if c.profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(c.profile))
	}
	return opts
}

// loadAWS is the caller's AWS configuration, with credentials checked
// first so a missing login is reported as such (cli.credentials_missing)
// rather than as a failure of the first call.
func (c *cli) loadAWS(ctx context.Context) (aws.Config, error) {
	if c.awsCfg != nil {
		return awsclient.Record(*c.awsCfg, c.callPrincipal()), nil
	}
	cfg, err := awsconfig.Load(ctx, c.configOptions()...)
	if err != nil {
		return aws.Config{}, core.Wrap(codeRuntime, true, fmt.Errorf("aws config: %s", firstLineOf(err)))
	}
	if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
		return aws.Config{}, core.Wrap(codeCredentials, true, fmt.Errorf("no AWS credentials found: log in (aws sso login), set AWS_PROFILE or --profile, or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (%s)", firstLineOf(err)))
	}
	// Each call is appended to LOCALEFLOW_AWS_CALL_LOG when the tests set it
	// (the IAM sufficiency check: every call is allowed by GrantOperator);
	// nothing otherwise.
	return awsclient.Record(cfg, c.callPrincipal()), nil
}

// callPrincipal names the command in the call log: "localeflow status",
// "localeflow dlq redrive" (the commands with subcommands take both words).
func (c *cli) callPrincipal() string {
	name := "localeflow " + c.command()
	if len(c.args) > 1 && slices.Contains(subcommandGroups, c.command()) {
		name += " " + c.args[1]
	}
	return name
}

// subcommandGroups are the commands whose second word is a subcommand.
var subcommandGroups = []string{"dlq", "quarantine"}

// cliKey carries the invocation in the context, for the client
// constructors tests replace (newSQSAPI): they load the same configuration
// (--region, --profile, the credentials check) as connect.
type cliKey struct{}

// loadAWSFromContext is loadAWS of the invocation in ctx (the default
// configuration when there is none).
func loadAWSFromContext(ctx context.Context) (aws.Config, error) {
	c, ok := ctx.Value(cliKey{}).(*cli)
	if !ok {
		c = &cli{}
	}
	return c.loadAWS(ctx)
}

func (c *cli) connect(ctx context.Context) error {
	cfg, err := c.loadAWS(ctx)
	if err != nil {
		return err
	}
	c.db = awsclient.DynamoDB(cfg)
	if c.identity == nil {
		client := sts.NewFromConfig(cfg)
		c.identity = func(ctx context.Context) (string, error) {
			out, err := client.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
			if err != nil {
				return "", core.Wrap(codeIdentity, true, fmt.Errorf("sts GetCallerIdentity: %w", err))
			}
			return aws.ToString(out.Arn), nil
		}
	}
	return nil
}

func (c *cli) monitorStore() *monitordb.Store {
	s, _ := monitordb.New(c.db, c.monitorTable) // both set: cannot fail
	return s
}

// releaseStore is the release table; records the CLI writes (an
// acknowledgement) expire after LOCALEFLOW_MONITOR_RETENTION when it is set
// (a Go duration of at least 1h), else the default 90 days.
func (c *cli) releaseStore() *releasedb.Store {
	s := releasedb.New(c.db, c.releaseTable)
	if d, err := time.ParseDuration(strings.TrimSpace(c.getenv(contract.EnvMonitorRetention))); err == nil && d >= time.Hour {
		s = s.WithRetention(d)
	}
	return s
}

func (c *cli) checker() (*health.Checker, error) {
	reader, err := opsdb.NewReleaseReader(c.db, c.releaseTable)
	if err != nil {
		return nil, err
	}
	return health.NewChecker(c.monitorStore(), opsdb.TableItems{DB: c.db, Table: c.monitorTable}, reader, core.SystemClock{}, nil)
}

// jsonReportedError is a failure whose command already printed its JSON
// document (which lists it): report prints it on stderr only, so stdout
// holds one JSON document.
type jsonReportedError struct{ err error }

func (e jsonReportedError) Error() string { return e.err.Error() }
func (e jsonReportedError) Unwrap() error { return e.err }

// jsonReported marks err (nil stays nil) as listed in the JSON printed.
func jsonReported(err error) error {
	if err == nil {
		return nil
	}
	return jsonReportedError{err}
}

// report prints err and maps it to an exit code.
func (c *cli) report(err error) int {
	if err == nil {
		return exitOK
	}
	var printed jsonReportedError
	listed := errors.As(err, &printed)
	var bad badError
	if errors.As(err, &bad) {
		return exitBad
	}
	var exitCode exitCodeError
	if errors.As(err, &exitCode) {
		return exitCode.exit
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
	if c.jsonOut && !listed {
		_ = json.NewEncoder(c.out).Encode(struct {
			Code  string `json:"code"`
			Error string `json:"error"`
		}{code, err.Error()})
	}
	// The code once: most errors already name it in their message.
	if msg := err.Error(); strings.Contains(msg, code) {
		fmt.Fprintf(c.errOut, "localeflow: %s\n", msg)
	} else {
		fmt.Fprintf(c.errOut, "localeflow: %s: %s\n", code, msg)
	}
	if exit == exitUsage {
		hint := "localeflow --help"
		if _, ok := commandHelp[c.command()]; ok {
			hint = "localeflow " + c.command() + " --help"
		}
		fmt.Fprintf(c.errOut, "see %s\n", hint)
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
