package handler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/localeflow/localeflow/adapters/cms"
	"github.com/localeflow/localeflow/adapters/cms/cmstest"
	"github.com/localeflow/localeflow/adapters/delayqueue"
	"github.com/localeflow/localeflow/adapters/eventbus"
	"github.com/localeflow/localeflow/adapters/monitordb"
	"github.com/localeflow/localeflow/adapters/secretkey"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/lifecycle"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/dev/localtest"
	"github.com/localeflow/localeflow/functions/poller/handler"
	"github.com/localeflow/localeflow/topology"
)

// timeWarpSQS forwards SendMessage to the real queue with DelaySeconds 0
// and remembers the delay that was asked for, so a test can walk a backoff
// schedule of minutes in seconds: when the drain loop receives the message
// it advances the injected clock by the remembered delay first, as if SQS
// had held it back. Everything else (queue, rule, receive/delete, receive
// counts) is the real local stack.
type timeWarpSQS struct {
	real   *sqs.Client
	mu     sync.Mutex
	delays map[string][]int32 // body → requested delays, oldest first
	log    []int32
}

func (w *timeWarpSQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	copied := *in
	copied.DelaySeconds = 0
	out, err := w.real.SendMessage(ctx, &copied, opts...)
	if err == nil {
		w.mu.Lock()
		w.delays[*in.MessageBody] = append(w.delays[*in.MessageBody], in.DelaySeconds)
		w.log = append(w.log, in.DelaySeconds)
		w.mu.Unlock()
	}
	return out, err
}

func (w *timeWarpSQS) takeDelay(body string) int32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := w.delays[body]
	if len(d) == 0 {
		return 0
	}
	w.delays[body] = d[1:]
	return d[0]
}

func (w *timeWarpSQS) Log() []int32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]int32(nil), w.log...)
}

// busSpy forwards to the real bus and keeps the details it published.
type busSpy struct {
	real    *eventbridge.Client
	mu      sync.Mutex
	details []map[string]any
}

func (b *busSpy) PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, opts ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	out, err := b.real.PutEvents(ctx, in, opts...)
	if err == nil && out.FailedEntryCount == 0 {
		b.mu.Lock()
		for _, e := range in.Entries {
			var d map[string]any
			if json.Unmarshal([]byte(*e.Detail), &d) == nil {
				b.details = append(b.details, d)
			}
		}
		b.mu.Unlock()
	}
	return out, err
}

func (b *busSpy) Details() []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]map[string]any(nil), b.details...)
}

type stackEnv struct {
	t        *testing.T
	res      stackResources
	clock    *clock
	ddb      *dynamodb.Client
	sqs      *sqs.Client
	eb       *eventbridge.Client
	warp     *timeWarpSQS
	bus      *busSpy
	cms      *cmstest.CMS
	svc      *monitor.Service
	invoke   lambda.Handler
	received int
	// beforeRound, when set, runs before each drain round (key rotation
	// steps).
	beforeRound func()
}

type stackResources struct {
	table, queueURL, bus string
}

func setupStack(t *testing.T, opts ...func(e *stackEnv, url string, c *handler.Config)) *stackEnv {
	t.Helper()
	return setupStackWith(t, monitor.Config{WorkerID: "poller-it"}, opts...)
}

// setupStackWith is setupStack with the monitor configured by mcfg.
func setupStackWith(t *testing.T, mcfg monitor.Config, opts ...func(e *stackEnv, url string, c *handler.Config)) *stackEnv {
	t.Helper()
	localtest.Require(t)
	_, res := localtest.Stack(t)
	e := &stackEnv{
		t:     t,
		res:   stackResources{table: res.MonitorTable, queueURL: res.PollQueue.URL, bus: res.BusName},
		clock: &clock{now: time.Now().UTC().Truncate(time.Millisecond)},
		ddb:   localtest.DynamoDB(t), sqs: localtest.SQS(t), eb: localtest.EventBridge(t),
	}
	e.warp = &timeWarpSQS{real: e.sqs, delays: map[string][]int32{}}
	e.bus = &busSpy{real: e.eb}
	store, err := monitordb.New(e.ddb, res.MonitorTable)
	if err != nil {
		t.Fatal(err)
	}
	e.svc, err = monitor.NewService(store, e.clock, nil, mcfg)
	if err != nil {
		t.Fatal(err)
	}
	e.cms = cmstest.New(testKey)
	srv := e.cms.Start()
	t.Cleanup(srv.Close)
	e.cms.Put(cmstest.Change{EventID: "evt-poller-0001", SiteID: "site-berlin", PlanID: "plan-42",
		WebsiteVersion: "v2026.11.29", SourceSequence: 7, RequiredLocales: []string{"de-DE", "fr-FR"}})
	reader, err := cms.New(cms.Config{BaseURL: srv.URL, Key: testKey, Timeout: 2 * time.Second, Clock: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	cfg := handler.Config{
		Monitor: e.svc, Reader: reader, Clock: e.clock,
		Queue:     delayqueue.New(e.warp, res.PollQueue.URL),
		Bus:       eventbus.New(e.bus, res.BusName),
		EventKeys: [][]byte{testEventKey},
	}
	for _, o := range opts {
		o(e, srv.URL, &cfg)
	}
	h, err := handler.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.invoke = lambda.NewHandler(h.Handle)
	return e
}

// dispatch puts the testdata change's dispatched event on the bus; the
// topology's rule routes it to the poll queue.
func (e *stackEnv) dispatch() {
	e.t.Helper()
	var batch struct {
		Records []struct {
			Body string `json:"body"`
		} `json:"Records"`
	}
	mustUnmarshal(e.t, testdata(e.t, "sqs_intake.json"), &batch)
	var envelope struct {
		Detail json.RawMessage `json:"detail"`
	}
	mustUnmarshal(e.t, []byte(batch.Records[0].Body), &envelope)
	out, err := e.eb.PutEvents(context.Background(), &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{
		EventBusName: aws.String(e.res.bus), Source: aws.String(contract.EventSource),
		DetailType: aws.String(contract.DetailChangeDispatched), Detail: aws.String(string(envelope.Detail)),
	}}})
	if err != nil || out.FailedEntryCount != 0 {
		e.t.Fatalf("put dispatched event: %v %+v", err, out)
	}
}

// drain plays the event source mapping: receive a batch, advance the clock
// by the delays the messages asked for, invoke the handler with an SQS
// event, delete what it acknowledged. It returns when done reports true
// and the queue is empty, or fails after a bounded number of rounds.
func (e *stackEnv) drain(done func() bool) {
	e.t.Helper()
	ctx := context.Background()
	idle := 0
	for round := 0; round < 200; round++ {
		if e.beforeRound != nil {
			e.beforeRound()
		}
		out, err := e.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(e.res.queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			VisibilityTimeout:           30,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		})
		if err != nil {
			e.t.Fatalf("receive: %v", err)
		}
		if len(out.Messages) == 0 {
			if done() {
				return
			}
			if idle++; idle > 10 {
				e.t.Fatal("queue stayed empty before the change was done")
			}
			continue
		}
		idle = 0
		var ev events.SQSEvent
		var maxDelay int32
		for _, m := range out.Messages {
			maxDelay = max(maxDelay, e.warp.takeDelay(aws.ToString(m.Body)))
			ev.Records = append(ev.Records, events.SQSMessage{
				MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle),
				Body: aws.ToString(m.Body), Attributes: m.Attributes, EventSource: "aws:sqs",
			})
		}
		e.clock.Advance(time.Duration(maxDelay) * time.Second)
		payload, err := json.Marshal(ev)
		if err != nil {
			e.t.Fatal(err)
		}
		raw, err := e.invoke.Invoke(ctx, payload)
		if err != nil {
			e.t.Fatalf("invoke: %v", err)
		}
		var resp events.SQSEventResponse
		mustUnmarshal(e.t, raw, &resp)
		failed := map[string]bool{}
		for _, f := range resp.BatchItemFailures {
			failed[f.ItemIdentifier] = true
		}
		if len(failed) > 0 {
			e.t.Fatalf("batch item failures %v", failed)
		}
		for _, m := range ev.Records {
			e.received++
			if _, err := e.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(e.res.queueURL), ReceiptHandle: aws.String(m.ReceiptHandle)}); err != nil {
				e.t.Fatalf("delete: %v", err)
			}
		}
	}
	e.t.Fatal("drain did not finish")
}

func (e *stackEnv) final() bool {
	st, err := e.svc.Status(context.Background(), "evt-poller-0001")
	return err == nil && st.State.Final()
}

func TestIntegrationDispatchedChangeEndsTerminal(t *testing.T) {
	e := setupStack(t)
	e.cms.Script("evt-poller-0001",
		cmstest.Step{Status: "processing", QueueCounts: map[string]int64{"pending": 2}},
		cmstest.Step{Status: "publishing", Approved: []string{"de-DE", "fr-FR"}},
		cmstest.StatusStep("published"),
	)
	e.dispatch()
	e.drain(e.final)

	st, err := e.svc.Status(context.Background(), "evt-poller-0001")
	if err != nil {
		t.Fatal(err)
	}
	if st.State != monitor.StateTerminal || st.RemoteStatus != "published" || st.PollAttempts != 3 ||
		!core.ValidSHA256(st.LifecycleSHA256) || len(st.ApprovedLocales) != 2 {
		t.Fatalf("status %s %s attempts %d sha %q", st.State, st.RemoteStatus, st.PollAttempts, st.LifecycleSHA256)
	}
	if got := fmt.Sprint(e.warp.Log()); got != "[0 30 30]" {
		t.Fatalf("scheduled delays %s, want [0 30 30]", got)
	}
	if n := len(e.cms.RequestsFor("evt-poller-0001")); n != 3 {
		t.Fatalf("CMS saw %d requests, want 3", n)
	}
	// The stored item: snapshot present and hashed, no change text.
	item, err := e.ddb.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(e.res.table), ConsistentRead: aws.Bool(true),
		Key: map[string]ddbtypes.AttributeValue{topology.AttrEventID: &ddbtypes.AttributeValueMemberS{Value: "evt-poller-0001"}},
	})
	if err != nil || item.Item == nil {
		t.Fatalf("get item: %v", err)
	}
	var attrs map[string]any
	if err := attributevalue.UnmarshalMap(item.Item, &attrs); err != nil {
		t.Fatal(err)
	}
	dump := flatten(attrs)
	if strings.Contains(dump, "/de/preise") {
		t.Fatal("the change's text was stored")
	}
	if !strings.Contains(dump, st.LifecycleSHA256) || !strings.Contains(dump, `published`) {
		t.Fatal("lifecycle snapshot not stored")
	}
	details := e.bus.Details()
	if len(details) != 1 || details[0]["state"] != "terminal" || details[0]["remote_status"] != "published" ||
		details[0]["lifecycle_sha256"] != st.LifecycleSHA256 {
		t.Fatalf("terminal events %v", details)
	}
}

func TestIntegrationFiveServiceUnavailableFail(t *testing.T) {
	e := setupStack(t)
	e.cms.Script("evt-poller-0001", cmstest.Repeat(cmstest.HTTPStep(503), 5)...)
	e.dispatch()
	e.drain(e.final)
	st, err := e.svc.Status(context.Background(), "evt-poller-0001")
	if err != nil {
		t.Fatal(err)
	}
	if st.State != monitor.StateFailed || st.LastErrorCode != "cms.http_503" || st.ConsecutiveFailures != 5 {
		t.Fatalf("status %s %s %d", st.State, st.LastErrorCode, st.ConsecutiveFailures)
	}
	// The default backoff 5/10/20/40 s, each jittered over [d, 3d/2] for
	// this change, as whole DelaySeconds (rounded up).
	want := []int32{0}
	for k := 1; k <= 4; k++ {
		d := e.svc.Config().RetryDelayFor("evt-poller-0001", k)
		want = append(want, int32((d+time.Second-1)/time.Second))
	}
	if got := fmt.Sprint(e.warp.Log()); got != fmt.Sprint(want) {
		t.Fatalf("scheduled delays %s, want the jittered default backoff %v", got, want)
	}
	if d := e.bus.Details(); len(d) != 1 || d[0]["state"] != "failed" || d[0]["error_code"] != "cms.http_503" {
		t.Fatalf("terminal events %v", d)
	}
}

func TestIntegrationContractViolationNotRetried(t *testing.T) {
	for _, tt := range []struct {
		name  string
		fault cmstest.Fault
	}{
		{"bad signature", cmstest.FaultBadSignature},
		{"mismatched request id", cmstest.FaultMismatchedRequestID},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := setupStack(t)
			e.cms.Script("evt-poller-0001", cmstest.Step{Status: "processing", Fault: tt.fault})
			e.dispatch()
			e.drain(e.final)
			st, err := e.svc.Status(context.Background(), "evt-poller-0001")
			if err != nil {
				t.Fatal(err)
			}
			if st.State != monitor.StateFailed || st.LastErrorCode != lifecycle.CodeResponseInvalid || st.ConsecutiveFailures != 1 {
				t.Fatalf("status %s %s %d", st.State, st.LastErrorCode, st.ConsecutiveFailures)
			}
			if n := len(e.cms.RequestsFor("evt-poller-0001")); n != 1 {
				t.Fatalf("CMS saw %d requests, want 1 (not retried)", n)
			}
			if got := fmt.Sprint(e.warp.Log()); got != "[0]" {
				t.Fatalf("scheduled %s, want only the first poll", got)
			}
		})
	}
}

// flatten renders every stored value as text (binary values as their
// bytes) so a test can search the whole item.
func flatten(v any) string {
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, item := range x {
				b.WriteString(k + "=")
				walk(item)
				b.WriteByte(' ')
			}
		case []any:
			for _, item := range x {
				walk(item)
				b.WriteByte(' ')
			}
		case []byte:
			b.Write(x)
		default:
			fmt.Fprint(&b, x)
		}
	}
	walk(v)
	return b.String()
}

// TestIntegrationSweep: the scheduled sweep finds due changes through the
// sparse wake index of the real table and polls each once.
func TestIntegrationSweep(t *testing.T) {
	e := setupStack(t)
	const n = 24
	for i := range n {
		id := fmt.Sprintf("evt-sweep-%03d", i)
		registerDirect(t, e.svc, id, "site-berlin", 1)
		e.cms.Put(cmstest.Change{EventID: id, SiteID: "site-berlin", PlanID: "plan-" + id, WebsiteVersion: "v1",
			SourceSequence: 1, RequiredLocales: []string{"de-DE"}})
	}
	e.cms.SetLatency(50 * time.Millisecond)
	// The sweep lists a change once it has been due for the sweep grace
	// (30 s by default): it runs that much later.
	e.clock.Advance(e.svc.Config().SweepGrace)
	raw, err := e.invoke.Invoke(context.Background(), testdata(t, "scheduled.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res handler.SweepResult
	mustUnmarshal(t, raw, &res)
	if res.Polled != n || res.Errors != 0 || res.Stopped != handler.StopDrained {
		t.Fatalf("sweep %+v", res)
	}
	for i := range n {
		st, err := e.svc.Status(context.Background(), fmt.Sprintf("evt-sweep-%03d", i))
		if err != nil || st.State != monitor.StateWatching || st.PollAttempts != 1 {
			t.Fatalf("item %d: %+v %v", i, st, err)
		}
	}
	if got := len(e.warp.Log()); got != n {
		t.Fatalf("%d next polls scheduled, want %d", got, n)
	}
	raw, err = e.invoke.Invoke(context.Background(), testdata(t, "scheduled.json"))
	if err != nil {
		t.Fatal(err)
	}
	mustUnmarshal(t, raw, &res)
	if res.Polled != 0 {
		t.Fatalf("second sweep polled %d", res.Polled)
	}
}

// TestIntegrationCMSKeyRotationWhileChangesArePolled runs the rotation
// procedure on the local AWS stack (DynamoDB monitor table, SQS poll queue,
// EventBridge) while a change is polled, with the poller's CMS key set
// re-read from its secret every minute (no redeploy): the CMS accepts the
// new key, the secret becomes "new,old", the CMS signs with the new key,
// the secret becomes "new", the CMS forgets the old key. Nothing fails.
func TestIntegrationCMSKeyRotationWhileChangesArePolled(t *testing.T) {
	secret := &fakeSecret{}
	secret.put(testKey)
	e := setupStack(t, func(e *stackEnv, url string, c *handler.Config) {
		keys, err := secretkey.NewCache(context.Background(), secretkey.Source{Stem: "LOCALEFLOW_CMS_KEY", SecretARN: "arn:aws:secretsmanager:x"},
			secret, "CMS", secretkey.MinBytes(16), time.Minute, e.clock)
		if err != nil {
			t.Fatal(err)
		}
		if c.Reader, err = cms.New(cms.Config{BaseURL: url, KeySet: keys, Timeout: 2 * time.Second, Clock: e.clock}); err != nil {
			t.Fatal(err)
		}
	})
	steps := make([]cmstest.Step, 0, 14)
	for range 13 {
		steps = append(steps, cmstest.StatusStep("processing"))
	}
	e.cms.Script("evt-poller-0001", append(steps, cmstest.StatusStep("published"))...)
	done := map[int]bool{}
	e.beforeRound = func() {
		n := len(e.cms.RequestsFor("evt-poller-0001"))
		step := func(at int, f func()) {
			if n >= at && !done[at] {
				done[at] = true
				f()
			}
		}
		step(1, func() { e.cms.Accept(newCMSKey); secret.put(newCMSKey, testKey) })
		step(5, func() { e.cms.Rotate(newCMSKey) })
		step(7, func() { secret.put(newCMSKey) })
		step(11, func() { e.cms.Forget() })
	}
	e.dispatch()
	e.drain(e.final)
	st, err := e.svc.Status(context.Background(), "evt-poller-0001")
	if err != nil {
		t.Fatal(err)
	}
	if st.State != monitor.StateTerminal || st.RemoteStatus != "published" || st.LastErrorCode != "" || len(done) != 4 {
		t.Fatalf("after the rotation: %+v (steps %v)", st, done)
	}
	for _, r := range e.cms.RequestsFor("evt-poller-0001") {
		if !r.SignatureValid {
			t.Fatalf("a request was refused during the rotation: %+v", r)
		}
	}
}
