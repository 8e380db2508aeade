// Command localeflow-demo runs the whole localeflow pipeline on a local
// AWS stack and shows it working (`make demo`).
//
// It expects the stack's endpoints in the standard AWS_ENDPOINT_URL_*
// variables (dev/emulators/with-stack.sh sets them for DynamoDB Local + kumo;
// point them at LocalStack to use that instead) and host-architecture
// builds of the functions in -bin-dir/<fn>/bootstrap. It then:
//
//  1. creates every resource of the topology (package bootstrap);
//  2. starts the reference CMS and evidence provider on 127.0.0.1 (package
//     dev/reference) with fresh keys;
//  3. runs the real poller, coordinator and (when built) health bootstraps
//     under aws-lambda-rie, driven by the local runner (package
//     dev/runner): SQS event source mappings and accelerated
//     schedules;
//  4. publishes five changes as events on the bus (signed plan and job
//     events) and shows their progress live;
//  5. prints the final health, where to look, stops everything it started
//     and exits 0 when every change ended as expected.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/localeflow/localeflow/adapters/awsclient"
	"github.com/localeflow/localeflow/adapters/awsconfig"
	"github.com/localeflow/localeflow/adapters/eventbus"
	"github.com/localeflow/localeflow/adapters/monitordb"
	"github.com/localeflow/localeflow/adapters/releasedb"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/dev/bootstrap"
	"github.com/localeflow/localeflow/dev/reference"
	"github.com/localeflow/localeflow/dev/runner"
	"github.com/localeflow/localeflow/topology"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout)
	stop()
	os.Exit(code)
}

type options struct {
	prefix     string
	binDir     string
	outDir     string
	rie        string
	timeout    time.Duration
	speedup    float64
	visibility time.Duration
	cms        reference.Faults
	evidence   reference.Faults
	tty        string
	destroy    bool
	// hints: the reference CMS puts localeflow.change.hint on the bus when
	// a change's status changes.
	hints bool
	// pollInterval is the poller's interval on AWS; the demo runs it
	// scaled down by speedup.
	pollInterval time.Duration
}

func parse(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("localeflow-demo", flag.ContinueOnError)
	fs.StringVar(&o.prefix, "prefix", "localeflow", "resource name prefix")
	fs.StringVar(&o.binDir, "bin-dir", "build/local", "directory with <fn>/bootstrap built for this machine")
	fs.StringVar(&o.outDir, "out", "build/local/demo", "directory for function logs and the health page")
	fs.StringVar(&o.rie, "rie", os.Getenv("LOCALEFLOW_RIE"), "aws-lambda-rie binary (default $LOCALEFLOW_RIE)")
	fs.DurationVar(&o.timeout, "timeout", 150*time.Second, "give up waiting for the changes after this long")
	fs.Float64Var(&o.speedup, "speedup", 12, "schedules fire this many times faster than on AWS (12: the 1-minute sweep every 5 s)")
	fs.DurationVar(&o.visibility, "visibility-timeout", 10*time.Second, "visibility timeout the runner asks for on receive (0: the queue's, 720 s)")
	fs.DurationVar(&o.cms.Latency, "cms-latency", 40*time.Millisecond, "reference CMS latency")
	fs.DurationVar(&o.cms.Jitter, "cms-jitter", 40*time.Millisecond, "reference CMS random extra latency")
	fs.DurationVar(&o.evidence.Latency, "evidence-latency", 80*time.Millisecond, "reference evidence provider latency")
	fs.DurationVar(&o.evidence.Jitter, "evidence-jitter", 80*time.Millisecond, "reference evidence provider random extra latency")
	fs.Float64Var(&o.cms.FailureRate, "cms-failure-rate", 0, "share of CMS requests answered 503 at random (0..1), on top of the scripted ones")
	fs.Float64Var(&o.evidence.FailureRate, "evidence-failure-rate", 0, "share of evidence requests answered 503 at random (0..1)")
	fs.StringVar(&o.tty, "tty", "auto", "redraw the table in place: auto, always or never")
	fs.BoolVar(&o.destroy, "destroy", true, "delete the created resources at the end")
	fs.BoolVar(&o.hints, "hints", true, "the reference CMS sends localeflow.change.hint when a change's status changes")
	fs.DurationVar(&o.pollInterval, "poll-interval", 60*time.Second, "poller interval as on AWS (run scaled down by -speedup); hints make a long one affordable")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if err := topology.ValidatePrefix(o.prefix); err != nil {
		return o, err
	}
	if o.rie == "" {
		return o, errors.New("-rie (or LOCALEFLOW_RIE) is required: run make install")
	}
	if o.timeout <= 0 || o.speedup < 1 {
		return o, errors.New("-timeout must be positive and -speedup at least 1")
	}
	if scaled(o.pollInterval, o.speedup) < time.Millisecond || o.pollInterval > monitor.MaxDelay {
		return o, fmt.Errorf("-poll-interval must be at most %s and at least 1 ms once divided by -speedup", monitor.MaxDelay)
	}
	if err := o.cms.Validate(); err != nil {
		return o, err
	}
	if err := o.evidence.Validate(); err != nil {
		return o, err
	}
	switch o.tty {
	case "auto", "always", "never":
	default:
		return o, errors.New("-tty must be auto, always or never")
	}
	return o, nil
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// say prints one line of narration.
func say(out io.Writer, format string, a ...any) { fmt.Fprintf(out, format+"\n", a...) }

func run(ctx context.Context, args []string, out io.Writer) int {
	o, err := parse(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "localeflow-demo:", err)
		return 2
	}
	d := &demo{o: o, out: out}
	defer d.cleanup()
	if err := d.run(ctx); err != nil {
		say(out, "\nDEMO FAILED: %v", err)
		return 1
	}
	if !d.passed {
		return 1
	}
	return 0
}

type demo struct {
	o       options
	out     io.Writer
	passed  bool
	topo    topology.Topology
	res     bootstrap.Resources
	clients bootstrap.Clients
	sqs     *sqs.Client
	eb      *eventbridge.Client
	// sts reads the operator identity the final acknowledgement is
	// recorded under.
	sts     *sts.Client
	keys    keys
	srv     *servers
	fns     map[string]*function
	cleanUp []func()
}

func (d *demo) cleanup() {
	for i := len(d.cleanUp) - 1; i >= 0; i-- {
		d.cleanUp[i]()
	}
}

func (d *demo) run(ctx context.Context) error {
	o, out := d.o, d.out
	start := time.Now()
	say(out, "localeflow demo — the whole pipeline on a local AWS stack (DynamoDB Local + kumo), no Docker.")
	say(out, "A CMS has accepted website changes for localization. localeflow watches each change through the CMS's")
	say(out, "signed lifecycle API (poller), collects signed quality evidence for every translated locale, approves")
	say(out, "and delivers a signed bundle back to the CMS (coordinator), and reports health.")
	say(out, "")
	if err := os.MkdirAll(o.outDir, 0o755); err != nil {
		return fmt.Errorf("output directory: %w", err)
	}
	if err := d.setupAWS(ctx); err != nil {
		return err
	}
	var err error
	if d.keys, err = newKeys(); err != nil {
		return err
	}
	var hinter reference.Hinter
	if o.hints {
		hinter = eventbus.New(d.eb, d.res.BusName)
	}
	if d.srv, err = startServers(d.keys, o.cms, o.evidence, hinter); err != nil {
		return err
	}
	d.cleanUp = append(d.cleanUp, d.srv.Close)
	say(out, "• reference CMS at %s (latency %s+%s), evidence provider at %s", d.srv.CMSURL, o.cms.Latency, o.cms.Jitter, d.srv.EvidenceURL)
	if o.hints {
		say(out, "• the CMS sends %s on every status change; the poller polls every %s (on AWS: %s)",
			contract.DetailChangeHint, scaled(o.pollInterval, o.speedup), o.pollInterval)
	} else {
		say(out, "• no hints: the poller polls every %s (on AWS: %s)", scaled(o.pollInterval, o.speedup), o.pollInterval)
	}

	runID := randomHex(3)
	changes := scenario(runID)
	for _, c := range changes {
		if err := d.srv.CMS.Put(c.cmsSpec()); err != nil {
			return fmt.Errorf("register %s with the CMS: %w", c.EventID, err)
		}
	}
	if err := d.startFunctions(ctx); err != nil {
		return err
	}
	if d.fns["poller"] == nil {
		return errors.New("the poller is not built: the demo cannot run without it")
	}
	stack, rlog, err := d.runnerStack()
	if err != nil {
		return err
	}
	rctx, stopRunner := context.WithCancel(ctx)
	runnerDone := make(chan struct{})
	go func() { _ = stack.Run(rctx); close(runnerDone) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			stopRunner()
			<-runnerDone
			_ = rlog.Close()
		}
	}
	d.cleanUp = append(d.cleanUp, stop)
	for _, s := range stack.Schedules {
		say(out, "• schedule %s fires every %s (on AWS: %s)", s.Name, s.Every, time.Duration(float64(s.Every)*o.speedup).Round(time.Second))
	}
	for _, m := range stack.Mappings {
		say(out, "• event source mapping: %s ← queue %s (batch ≤ %d, partial batch failures)", m.Function, lastPath(m.QueueURL), m.BatchSize)
	}
	say(out, "")
	say(out, "Publishing %d changes on the bus %s (release events HMAC-signed):", len(changes), d.res.BusName)
	for _, c := range changes {
		say(out, "  %-26s %-13s %-18s %s", shortID(c.EventID), c.SiteID, strings.Join(c.Locales(), ","), c.Story)
	}
	say(out, "")
	pubErr := make(chan error, 1)
	go func() { pubErr <- d.publish(ctx, changes) }()

	mon, rel, err := d.stores()
	if err != nil {
		return err
	}
	obs := &observer{mon: mon, rel: rel, cms: d.srv.CMS.Stats}
	f, isFile := out.(*os.File)
	tty := o.tty == "always" || (o.tty == "auto" && isFile && isTerminal(f))
	width := 0
	if isFile {
		width = termWidth(f)
	}
	disp := newDisplay(out, tty, width, start)
	views := make([]view, len(changes))
	deadline := time.Now().Add(o.timeout)
	timedOut := false
	for {
		select {
		case err := <-pubErr:
			if err != nil {
				return fmt.Errorf("publish: %w", err)
			}
		default:
		}
		all := true
		for i, c := range changes {
			views[i] = obs.look(ctx, c)
			all = all && views[i].Final
		}
		disp.show(changes, views, d.footer(stack))
		if all {
			break
		}
		if time.Now().After(deadline) {
			timedOut = true
			break
		}
		select {
		case <-ctx.Done():
			return errors.New("interrupted")
		case <-time.After(500 * time.Millisecond):
		}
	}
	stop()
	return d.finish(ctx, changes, views, timedOut, mon, rel, stack)
}

// jobInterval spaces the translation results, as a translation provider
// finishing one locale after another would.
const jobInterval = 2500 * time.Millisecond

func lastPath(u string) string { return u[strings.LastIndex(u, "/")+1:] }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (d *demo) setupAWS(ctx context.Context) error {
	cfg, err := awsconfig.Load(ctx)
	if err != nil {
		return fmt.Errorf("AWS config: %w", err)
	}
	d.sqs = awsclient.SQS(cfg)
	d.eb = awsclient.EventBridge(cfg)
	d.sts = sts.NewFromConfig(cfg)
	d.clients = bootstrap.Clients{DynamoDB: awsclient.DynamoDB(cfg), SQS: d.sqs, EventBridge: d.eb}
	d.topo = topology.New(d.o.prefix)
	actx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if d.res, err = bootstrap.Apply(actx, d.clients, d.topo); err != nil {
		return fmt.Errorf("create resources (is the local stack up?): %w", err)
	}
	if d.o.destroy {
		d.cleanUp = append(d.cleanUp, func() {
			dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = bootstrap.Destroy(dctx, d.clients, d.topo)
		})
	}
	say(d.out, "• created tables %s, %s; queues %s, %s (+ DLQs); bus %s with %d rules",
		d.res.MonitorTable, d.res.ReleaseTable, d.res.PollQueue.Name, d.res.ReleaseQueue.Name, d.res.BusName, len(d.res.Rules))
	return nil
}

func (d *demo) startFunctions(ctx context.Context) error {
	names := resourceNames{MonitorTable: d.res.MonitorTable, ReleaseTable: d.res.ReleaseTable, Bus: d.res.BusName,
		PollQueueURL: d.res.PollQueue.URL, ReleaseQueueURL: d.res.ReleaseQueue.URL, QuarantineQueueURL: d.res.QuarantineQueue.URL}
	env := functionEnv(names, d.keys, d.srv, d.srv.Evidence.Issuers())
	env["poller"] = append(env["poller"], pollerTiming(d.o.pollInterval, d.o.speedup)...)
	d.fns = map[string]*function{}
	for _, fn := range d.topo.Functions {
		f, err := startFunction(ctx, d.o.rie, d.o.binDir, d.o.outDir, fn.Dir, env[fn.Dir], time.Duration(fn.TimeoutSeconds)*time.Second)
		if errors.Is(err, errNotBuilt) {
			say(d.out, "• %s: NOT WIRED YET (no %s/%s/bootstrap; its stage is skipped)", fn.Dir, d.o.binDir, fn.Dir)
			continue
		}
		if err != nil {
			return fmt.Errorf("start %s: %w", fn.Dir, err)
		}
		d.fns[fn.Dir] = f
		d.cleanUp = append(d.cleanUp, f.Stop)
		say(d.out, "• function %s: real bootstrap under aws-lambda-rie (pid %d), log %s", fn.Name, f.Proc.PID(), f.LogPath)
	}
	return nil
}

func (d *demo) runnerStack() (runner.Stack, *os.File, error) {
	logPath := filepath.Join(d.o.outDir, "runner.log")
	f, err := os.Create(logPath)
	if err != nil {
		return runner.Stack{}, nil, fmt.Errorf("runner log: %w", err)
	}
	invokers := map[string]runner.Invoker{}
	for name, fn := range d.fns {
		invokers[name] = fn.Proc
	}
	st, err := runner.FromTopology(d.topo, d.res, d.sqs, invokers, runner.Options{
		Speedup: d.o.speedup, VisibilityTimeout: d.o.visibility, Log: slog.New(slog.NewJSONHandler(f, nil)),
	})
	if err != nil {
		_ = f.Close()
		return runner.Stack{}, nil, err
	}
	return st, f, nil
}

func (d *demo) stores() (*monitor.Service, *releasedb.Store, error) {
	ms, err := monitordb.New(d.clients.DynamoDB.(monitordb.DynamoDBAPI), d.res.MonitorTable)
	if err != nil {
		return nil, nil, err
	}
	mon, err := monitor.NewService(ms, core.SystemClock{}, nil, monitor.Config{WorkerID: "demo-observer"})
	if err != nil {
		return nil, nil, err
	}
	return mon, releasedb.New(d.clients.DynamoDB.(releasedb.DynamoDBAPI), d.res.ReleaseTable), nil
}

// publish puts the scenario's events on the bus: every dispatch, then the
// plans, then the jobs one by one (as translations finish).
func (d *demo) publish(ctx context.Context, changes []change) error {
	var entries []ebtypes.PutEventsRequestEntry
	add := func(detailType string, detail []byte) {
		entries = append(entries, ebtypes.PutEventsRequestEntry{Source: aws.String(contract.EventSource), DetailType: aws.String(detailType),
			Detail: aws.String(string(detail)), EventBusName: aws.String(d.res.BusName)})
	}
	for _, c := range changes {
		dispatch, err := c.dispatchedDetail()
		if err != nil {
			return err
		}
		detail, err := signedDetail(d.keys.Event, contract.DetailChangeDispatched, dispatch)
		if err != nil {
			return err
		}
		add(contract.DetailChangeDispatched, detail)
	}
	if err := d.put(ctx, entries); err != nil {
		return err
	}
	if d.fns["coordinator"] == nil {
		return nil
	}
	entries = nil
	for _, c := range changes {
		if c.Expect == expectSuperseded {
			continue
		}
		payload, err := c.planPayload()
		if err != nil {
			return err
		}
		detail, err := signedDetail(d.keys.Event, contract.DetailPlanAccepted, payload)
		if err != nil {
			return err
		}
		add(contract.DetailPlanAccepted, detail)
	}
	if err := d.put(ctx, entries); err != nil {
		return err
	}
	for round := 0; ; round++ {
		entries = nil
		for _, c := range changes {
			if c.Expect == expectSuperseded || round >= len(c.Jobs) {
				continue
			}
			payload, err := c.jobPayload(c.Jobs[round])
			if err != nil {
				return err
			}
			detail, err := signedDetail(d.keys.Event, contract.DetailJobCompleted, payload)
			if err != nil {
				return err
			}
			add(contract.DetailJobCompleted, detail)
		}
		if len(entries) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(jobInterval):
		}
		if err := d.put(ctx, entries); err != nil {
			return err
		}
	}
}

func (d *demo) put(ctx context.Context, entries []ebtypes.PutEventsRequestEntry) error {
	for start := 0; start < len(entries); start += 10 {
		chunk := entries[start:min(start+10, len(entries))]
		out, err := d.eb.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: chunk})
		if err != nil {
			return fmt.Errorf("put events: %w", err)
		}
		if out.FailedEntryCount > 0 {
			return fmt.Errorf("put events: %d entries failed", out.FailedEntryCount)
		}
	}
	return nil
}

func (d *demo) footer(st runner.Stack) string {
	var parts []string
	for _, m := range st.Mappings {
		s := m.Stats()
		parts = append(parts, fmt.Sprintf("%s: %d batches/%d msgs, %d redelivered", strings.TrimPrefix(m.Function, d.o.prefix+"-"),
			s.Batches.Load(), s.Messages.Load(), s.Failed.Load()))
	}
	fired := int64(0)
	for _, s := range st.Schedules {
		fired += s.Fired()
	}
	cs := d.srv.CMS.Stats()
	reads := 0
	for _, n := range cs.LifecycleRequests {
		reads += n
	}
	deliveries := 0
	for _, n := range cs.Deliveries {
		deliveries += n
	}
	es := d.srv.Evidence.Stats()
	return fmt.Sprintf("runner %s; schedules fired %d | CMS %d lifecycle reads, %d deliveries, %d hints | evidence %d receipts",
		strings.Join(parts, ", "), fired, reads, deliveries, cs.Hints, es.Answered)
}

// dlqCount is the approximate number of messages in a DLQ (-1 unknown).
func (d *demo) dlqCount(ctx context.Context, url string) int {
	outp, err := d.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages}})
	if err != nil {
		return -1
	}
	var n int
	if _, err := fmt.Sscan(outp.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)], &n); err != nil {
		return -1
	}
	return n
}
