package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/localeflow/localeflow/adapters/cms"
	"github.com/localeflow/localeflow/adapters/cms/cmstest"
	"github.com/localeflow/localeflow/adapters/delayqueue"
	"github.com/localeflow/localeflow/adapters/eventbus"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/contract/schema/schematest"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/lifecycle"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/monitor/memstore"
	"github.com/localeflow/localeflow/dev/logcapture"
	"github.com/localeflow/localeflow/functions/poller/handler"
)

var testKey = []byte("localeflow-cms-test-key-00000001")

// testEventKey signs the dispatch details of testdata/sqs_*.json (v1).
var testEventKey = []byte("localeflow-event-test-key-000001")

// t0 is the time the testdata envelopes are due.
var t0 = time.UnixMilli(1764460800000).UTC()

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type fakeSQS struct {
	mu   sync.Mutex
	sent []*sqs.SendMessageInput
	err  error
	// singles and batches count SendMessage and SendMessageBatch requests;
	// refuse fails the batch entries whose body names one of its ids.
	singles, batches int
	refuse           map[string]bool
}

func (f *fakeSQS) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.batches++
	if f.err != nil {
		return nil, f.err
	}
	if len(in.Entries) == 0 || len(in.Entries) > 10 {
		return nil, fmt.Errorf("batch of %d entries", len(in.Entries))
	}
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		var env struct {
			EventID string `json:"event_id"`
		}
		_ = json.Unmarshal([]byte(aws.ToString(e.MessageBody)), &env)
		if f.refuse[env.EventID] {
			out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), SenderFault: false})
			continue
		}
		f.sent = append(f.sent, &sqs.SendMessageInput{QueueUrl: in.QueueUrl, MessageBody: e.MessageBody, DelaySeconds: e.DelaySeconds})
		out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String(fmt.Sprint(len(f.sent)))})
	}
	return out, nil
}

func (f *fakeSQS) requests() (singles, batches int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.singles, f.batches
}

func (f *fakeSQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.singles++
	if f.err != nil {
		return nil, f.err
	}
	f.sent = append(f.sent, in)
	return &sqs.SendMessageOutput{MessageId: aws.String(fmt.Sprint(len(f.sent)))}, nil
}

func (f *fakeSQS) Sent() []*sqs.SendMessageInput {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*sqs.SendMessageInput(nil), f.sent...)
}

type fakeBus struct {
	mu      sync.Mutex
	details []map[string]any
	// fail makes the next fail calls fail; refuse fails every call for
	// those event ids.
	fail   int
	refuse map[string]bool
	// observe, when set, sees each accepted detail as it is published.
	observe func(d map[string]any)
}

func (f *fakeBus) failNext(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = n
}

func (f *fakeBus) PutEvents(_ context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail > 0 {
		f.fail--
		return nil, errors.New("eventbridge unavailable")
	}
	for _, e := range in.Entries {
		if *e.DetailType != contract.DetailChangeTerminal || *e.Source != "localeflow" {
			return nil, errors.New("unexpected entry")
		}
		// Every detail the poller publishes validates against its
		// schema (contract/schema): a test double that cannot fail the
		// handler's publish panics instead.
		if err := schematest.ValidateDetail(*e.DetailType, []byte(*e.Detail)); err != nil {
			panic(err)
		}
		var d map[string]any
		if err := json.Unmarshal([]byte(*e.Detail), &d); err != nil {
			return nil, err
		}
		if id, _ := d["event_id"].(string); f.refuse[id] {
			return nil, errors.New("eventbridge refuses " + id)
		}
		if f.observe != nil {
			f.observe(d)
		}
		f.details = append(f.details, d)
	}
	return &eventbridge.PutEventsOutput{Entries: []ebtypes.PutEventsResultEntry{{EventId: aws.String("x")}}}, nil
}

func (f *fakeBus) Details() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.details...)
}

type env struct {
	t      testing.TB
	clock  *clock
	store  *memstore.Store
	svc    *monitor.Service
	cms    *cmstest.CMS
	sqs    *fakeSQS
	bus    *fakeBus
	logs   *logcapture.Buffer
	h      *handler.Handler
	lambda lambda.Handler
	cmsURL string
	cfg    handler.Config
}

func setup(t testing.TB, opts ...func(*handler.Config)) *env {
	t.Helper()
	return setupWith(t, monitor.Config{WorkerID: "poller-test"}, opts...)
}

// setupWith is setup with the monitor configured by mcfg.
func setupWith(t testing.TB, mcfg monitor.Config, opts ...func(*handler.Config)) *env {
	t.Helper()
	e := &env{t: t, clock: &clock{now: t0}, store: memstore.New(), sqs: &fakeSQS{}, bus: &fakeBus{}, logs: &logcapture.Buffer{}}
	log := slog.New(slog.NewJSONHandler(e.logs, nil))
	if mcfg.SweepGrace == 0 {
		// Unit tests sweep right after registering: e.sweep advances the
		// fake clock by the grace first (TestSweepLeavesChangeInsideGrace
		// checks the default grace).
		mcfg.SweepGrace = time.Millisecond
	}
	svc, err := monitor.NewService(e.store, e.clock, log, mcfg)
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	e.cms = cmstest.New(testKey)
	srv := e.cms.Start()
	t.Cleanup(srv.Close)
	e.cmsURL = srv.URL
	e.cms.Put(cmstest.Change{EventID: "evt-poller-0001", SiteID: "site-berlin", PlanID: "plan-42",
		WebsiteVersion: "v2026.11.29", SourceSequence: 7, RequiredLocales: []string{"de-DE", "fr-FR"}})
	client, err := cms.New(cms.Config{BaseURL: srv.URL, Key: testKey, Timeout: 2 * time.Second, Clock: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	cfg := handler.Config{
		Monitor: svc, Reader: client, Clock: e.clock, Log: log,
		Queue:     delayqueue.New(e.sqs, "https://sqs.local/poll"),
		Bus:       eventbus.New(e.bus, "lf-bus"),
		EventKeys: [][]byte{testEventKey},
	}
	for _, o := range opts {
		o(&cfg)
	}
	e.cfg = cfg
	e.h, err = handler.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.lambda = lambda.NewHandler(e.h.Handle)
	return e
}

func (e *env) invoke(payload []byte) ([]byte, error) {
	e.t.Helper()
	return e.lambda.Invoke(context.Background(), payload)
}

func (e *env) invokeSQS(payload []byte) events.SQSEventResponse {
	e.t.Helper()
	out, err := e.invoke(payload)
	if err != nil {
		e.t.Fatalf("invoke: %v", err)
	}
	var resp events.SQSEventResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		e.t.Fatalf("response %s: %v", out, err)
	}
	return resp
}

func testdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// batchOf wraps bodies in an SQS event.
func batchOf(t testing.TB, receiveCount int, bodies ...string) []byte {
	t.Helper()
	var ev events.SQSEvent
	for i, b := range bodies {
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: fmt.Sprintf("m-%d", i), Body: b, EventSource: "aws:sqs",
			Attributes: map[string]string{"ApproximateReceiveCount": fmt.Sprint(receiveCount)},
		})
	}
	out, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (e *env) intake() {
	e.t.Helper()
	resp := e.invokeSQS(testdata(e.t, "sqs_intake.json"))
	if len(resp.BatchItemFailures) != 0 {
		e.t.Fatalf("intake failures: %+v", resp.BatchItemFailures)
	}
}

func (e *env) status(id string) monitor.Status {
	e.t.Helper()
	st, err := e.svc.Status(context.Background(), id)
	if err != nil {
		e.t.Fatalf("status %s: %v", id, err)
	}
	return st
}

// follow delivers the newest scheduled message after advancing the clock
// by its DelaySeconds, as SQS would, and returns that delay.
func (e *env) follow() int32 {
	e.t.Helper()
	sent := e.sqs.Sent()
	if len(sent) == 0 {
		e.t.Fatal("nothing scheduled")
	}
	last := sent[len(sent)-1]
	e.clock.Advance(time.Duration(last.DelaySeconds) * time.Second)
	resp := e.invokeSQS(batchOf(e.t, 1, *last.MessageBody))
	if len(resp.BatchItemFailures) != 0 {
		e.t.Fatalf("poll failures: %+v", resp.BatchItemFailures)
	}
	return last.DelaySeconds
}

func TestIntake(t *testing.T) {
	e := setup(t)
	e.intake()
	if st := e.status("evt-poller-0001"); st.State != monitor.StatePending || st.JobCount != 2 || st.PlanID != "plan-42" {
		t.Fatalf("evt-poller-0001: %+v", st)
	}
	if st := e.status("evt-poller-0002"); st.State != monitor.StateTerminal || st.RemoteStatus != "superseded" {
		t.Fatalf("evt-poller-0002: %+v", st)
	}
	sent := e.sqs.Sent()
	if len(sent) != 1 || sent[0].DelaySeconds != 0 || *sent[0].QueueUrl != "https://sqs.local/poll" {
		t.Fatalf("want one immediate first poll, got %d messages", len(sent))
	}
	env, err := delayqueue.Parse([]byte(*sent[0].MessageBody))
	if err != nil || env.Kind != handler.KindPoll || env.EventID != "evt-poller-0001" || !env.NotBefore().Equal(t0) {
		t.Fatalf("first poll envelope %+v, %v", env, err)
	}
	details := e.bus.Details()
	if len(details) != 1 || details[0]["event_id"] != "evt-poller-0002" || details[0]["state"] != "terminal" ||
		details[0]["remote_status"] != "superseded" || details[0]["lifecycle_sha256"] != nil {
		t.Fatalf("terminal events %v", details)
	}

	// A duplicate delivery changes nothing stored; the still-pending change
	// is enqueued again (that chain collapses at its first poll).
	e.intake()
	if st := e.status("evt-poller-0001"); st.State != monitor.StatePending || st.PollAttempts != 0 {
		t.Fatalf("duplicate intake changed the record: %+v", st)
	}
	if n := e.store.Len(); n != 2 {
		t.Fatalf("%d records, want 2", n)
	}
}

// The acceptance flow on the memory store: processing → publishing →
// published ends terminal with the snapshot stored and no text stored.
func TestPollToTerminal(t *testing.T) {
	e := setup(t)
	e.cms.Script("evt-poller-0001",
		cmstest.Step{Status: "processing", QueueCounts: map[string]int64{"pending": 2}},
		cmstest.Step{Status: "publishing", Approved: []string{"de-DE", "fr-FR"}},
		cmstest.StatusStep("published"),
	)
	e.intake()
	wantStates := []monitor.State{monitor.StateWatching, monitor.StateWatching, monitor.StateTerminal}
	wantRemote := []string{"processing", "publishing", "published"}
	wantDelays := []int32{0, 30, 30}
	for i := range wantStates {
		if d := e.follow(); d != wantDelays[i] {
			t.Fatalf("poll %d was delayed %d s, want %d", i, d, wantDelays[i])
		}
		st := e.status("evt-poller-0001")
		if st.State != wantStates[i] || st.RemoteStatus != wantRemote[i] || st.PollAttempts != i+1 {
			t.Fatalf("after poll %d: state %s remote %s attempts %d", i, st.State, st.RemoteStatus, st.PollAttempts)
		}
	}
	if n := len(e.sqs.Sent()); n != 3 {
		t.Fatalf("%d messages sent, want 3 (first poll + two next polls, none after terminal)", n)
	}
	st := e.status("evt-poller-0001")
	details := e.bus.Details()
	last := details[len(details)-1]
	if last["event_id"] != "evt-poller-0001" || last["state"] != "terminal" || last["remote_status"] != "published" ||
		last["lifecycle_sha256"] != st.LifecycleSHA256 || last["error_code"] != nil {
		t.Fatalf("terminal event %v (status sha %s)", last, st.LifecycleSHA256)
	}
	rec, err := e.store.Get(context.Background(), "evt-poller-0001")
	if err != nil {
		t.Fatal(err)
	}
	if core.SHA256Hex(rec.Lifecycle) != rec.LifecycleSHA256 || !bytes.Contains(rec.Lifecycle, []byte(`"status":"published"`)) {
		t.Fatalf("stored snapshot does not match its hash")
	}
	if bytes.Contains(rec.Lifecycle, []byte("/de/preise")) || strings.Contains(fmt.Sprintf("%+v", rec), "/de/preise") {
		t.Fatal("change content was stored")
	}
	if strings.Contains(e.logs.String(), "/de/preise") || strings.Contains(e.logs.String(), string(testKey)) {
		t.Fatal("logs carry content or the key")
	}
	// A late duplicate of the last poll message is acknowledged and does
	// nothing.
	sent := e.sqs.Sent()
	before := len(e.bus.Details())
	resp := e.invokeSQS(batchOf(t, 1, *sent[len(sent)-1].MessageBody))
	if len(resp.BatchItemFailures) != 0 || len(e.sqs.Sent()) != len(sent) || len(e.bus.Details()) != before {
		t.Fatal("stale duplicate was not a no-op")
	}
}

func TestPollBatchFromTestdata(t *testing.T) {
	e := setup(t)
	e.cms.Script("evt-poller-0001", cmstest.StatusStep("processing"))
	e.intake()
	before := len(e.sqs.Sent())
	resp := e.invokeSQS(testdata(t, "sqs_poll.json"))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %+v", resp.BatchItemFailures)
	}
	if st := e.status("evt-poller-0001"); st.State != monitor.StateWatching || st.PollAttempts != 1 {
		t.Fatalf("status %+v", st)
	}
	sent := e.sqs.Sent()[before:]
	if len(sent) != 2 {
		t.Fatalf("%d messages sent, want 2 (next poll, chained early message)", len(sent))
	}
	var delays []int32
	for _, m := range sent {
		delays = append(delays, m.DelaySeconds)
		env, err := delayqueue.Parse([]byte(*m.MessageBody))
		if err != nil {
			t.Fatal(err)
		}
		if env.NotBeforeMS == t0.UnixMilli()+3600500 && m.DelaySeconds != 900 {
			t.Fatalf("early message re-sent with delay %d, want 900", m.DelaySeconds)
		}
	}
	if !(delays[0] == 30 || delays[1] == 30) {
		t.Fatalf("no next poll after 30 s: %v", delays)
	}
}

func TestMalformedMessagesAreAcknowledged(t *testing.T) {
	e := setup(t)
	resp := e.invokeSQS(testdata(t, "sqs_malformed.json"))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("malformed bodies must be acknowledged, got failures %+v", resp.BatchItemFailures)
	}
	if e.store.Len() != 0 || len(e.sqs.Sent()) != 0 || len(e.bus.Details()) != 0 {
		t.Fatal("a malformed message had an effect")
	}
	logs := e.logs.String()
	for _, id := range []string{"m-bad-json", "m-bad-shape", "m-bad-schema", "m-bad-kind", "m-bad-source", "m-bad-detail-type", "m-bad-dispatch", "m-unknown-event",
		"m-unsigned-dispatch", "m-forged-dispatch"} {
		if !strings.Contains(logs, `"message_id":"`+id+`","code":"poller.message_invalid"`) {
			t.Errorf("no poller.message_invalid log for %s", id)
		}
	}
	if !strings.Contains(logs, `"cause":"lifecycle_monitor.dispatch_invalid"`) || !strings.Contains(logs, `"cause":"delayqueue.envelope_invalid"`) {
		t.Error("causes are not logged by code")
	}
	// An unsigned or forged dispatch never registers a change.
	if !strings.Contains(logs, `"message_id":"m-unsigned-dispatch","code":"poller.message_invalid","cause":"poller.dispatch.envelope_invalid"`) ||
		!strings.Contains(logs, `"message_id":"m-forged-dispatch","code":"poller.message_invalid","cause":"poller.dispatch.signature_invalid"`) {
		t.Errorf("unsigned or forged dispatch not refused by code:\n%s", logs)
	}
}

// A CMS answering 503 five times drives the change to failed with the
// default backoff min(300 s, 5 s · 2^(failures − 1)): 5, 10, 20, 40 s
// (docs/design.md "Defaults"), each spread over [d, 3d/2] for this change
// (core.Jitter): the delayed message waits the jittered delay, rounded up.
func TestFiveServiceUnavailableFail(t *testing.T) {
	e := setup(t)
	e.cms.Script("evt-poller-0001", cmstest.Repeat(cmstest.HTTPStep(503), 5)...)
	e.intake()
	var delays []int32
	for range 5 {
		delays = append(delays, e.follow())
	}
	want := []int32{0}
	for k := 1; k <= 4; k++ {
		d := e.svc.Config().RetryDelayFor("evt-poller-0001", k)
		want = append(want, int32((d+time.Second-1)/time.Second))
	}
	if fmt.Sprint(delays) != fmt.Sprint(want) {
		t.Fatalf("poll delays %v, want %v", delays, want)
	}
	for k, d := range delays[1:] {
		if lower := int32(5 << k); d < lower || d > lower+lower/2+1 {
			t.Fatalf("poll delay %d s after failure %d, outside [%d, %d]", d, k+1, lower, lower+lower/2+1)
		}
	}
	st := e.status("evt-poller-0001")
	if st.State != monitor.StateFailed || st.LastErrorCode != "cms.http_503" || st.ConsecutiveFailures != 5 {
		t.Fatalf("status %s %s %d", st.State, st.LastErrorCode, st.ConsecutiveFailures)
	}
	if n := len(e.sqs.Sent()); n != 5 {
		t.Fatalf("%d messages, want 5 (nothing after failed)", n)
	}
	if n := len(e.cms.RequestsFor("evt-poller-0001")); n != 5 {
		t.Fatalf("CMS saw %d requests, want 5", n)
	}
	d := e.bus.Details()
	if last := d[len(d)-1]; last["state"] != "failed" || last["error_code"] != "cms.http_503" {
		t.Fatalf("terminal event %v", last)
	}
}

func TestContractViolationsFailWithoutRetry(t *testing.T) {
	for _, tt := range []struct {
		name  string
		fault cmstest.Fault
	}{
		{"bad signature", cmstest.FaultBadSignature},
		{"mismatched request id", cmstest.FaultMismatchedRequestID},
		{"signed for another request", cmstest.FaultForeignRequestID},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := setup(t)
			e.cms.Script("evt-poller-0001", cmstest.Step{Status: "processing", Fault: tt.fault})
			e.intake()
			e.follow()
			st := e.status("evt-poller-0001")
			if st.State != monitor.StateFailed || st.LastErrorCode != lifecycle.CodeResponseInvalid {
				t.Fatalf("status %s %s", st.State, st.LastErrorCode)
			}
			if n := len(e.sqs.Sent()); n != 1 {
				t.Fatalf("%d messages, want only the first poll", n)
			}
		})
	}
}

func TestTransientSendFailureIsRedelivered(t *testing.T) {
	e := setup(t)
	e.cms.Script("evt-poller-0001", cmstest.StatusStep("processing"))
	e.intake()
	first := *e.sqs.Sent()[0].MessageBody
	e.sqs.mu.Lock()
	e.sqs.err = errors.New("sqs throttled")
	e.sqs.mu.Unlock()
	resp := e.invokeSQS(batchOf(t, 1, first))
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "m-0" {
		t.Fatalf("failures %+v, want m-0", resp.BatchItemFailures)
	}
	if st := e.status("evt-poller-0001"); st.State != monitor.StateWatching {
		t.Fatalf("poll was not recorded: %s", st.State)
	}
	// SQS redelivers (receive count 2): the poll is not repeated, the lost
	// next poll is sent.
	e.sqs.mu.Lock()
	e.sqs.err = nil
	e.sqs.mu.Unlock()
	resp = e.invokeSQS(batchOf(t, 2, first))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %+v", resp.BatchItemFailures)
	}
	if n := len(e.cms.RequestsFor("evt-poller-0001")); n != 1 {
		t.Fatalf("CMS polled %d times, want 1", n)
	}
	sent := e.sqs.Sent()
	if len(sent) != 2 || sent[1].DelaySeconds != 30 {
		t.Fatalf("redelivery did not resend the next poll: %d messages", len(sent))
	}
}

func TestLeasedElsewhereIsNoOp(t *testing.T) {
	e := setup(t)
	e.intake()
	if _, ok, err := e.svc.Claim(context.Background(), "evt-poller-0001"); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	before := len(e.sqs.Sent())
	resp := e.invokeSQS(batchOf(t, 1, *e.sqs.Sent()[0].MessageBody))
	if len(resp.BatchItemFailures) != 0 || len(e.sqs.Sent()) != before || len(e.cms.Requests()) != 0 {
		t.Fatal("a message for a leased change was not a no-op")
	}
}

func TestSweep(t *testing.T) {
	e := setup(t)
	e.intake()
	for i := range 40 {
		id := fmt.Sprintf("evt-sweep-%03d", i)
		registerDirect(t, e.svc, id, "site-berlin", 1)
		e.cms.Put(cmstest.Change{EventID: id, SiteID: "site-berlin", PlanID: "plan-" + id, WebsiteVersion: "v1",
			SourceSequence: 1, RequiredLocales: []string{"de-DE"}})
		if i%2 == 0 {
			e.cms.Script(id, cmstest.StatusStep("published"))
		}
	}
	e.clock.Advance(e.svc.Config().SweepGrace)
	out, err := e.invoke(testdata(t, "scheduled.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res handler.SweepResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	if res.Polled != 41 || res.Terminal != 20 || res.Errors != 0 || res.Stopped != handler.StopDrained {
		t.Fatalf("sweep %+v", res)
	}
	// 21 watching changes got their next poll (plus the intake message).
	if n := len(e.sqs.Sent()); n != 1+21 {
		t.Fatalf("%d messages sent, want 22", n)
	}
	if n := len(e.bus.Details()); n != 1+20 {
		t.Fatalf("%d terminal events, want 21", n)
	}
	// Nothing is due right after.
	out, err = e.invoke(testdata(t, "scheduled.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &res); err != nil || res.Polled != 0 || res.Listed != 0 {
		t.Fatalf("second sweep %+v %v", res, err)
	}
}

func TestSweepStopsBeforeDeadline(t *testing.T) {
	e := setup(t)
	e.intake()
	// The client timeout is 2 s and the margin 5 s: 6 s left is not enough.
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
	defer cancel()
	res, err := e.h.Sweep(ctx)
	if err != nil || res.Polled != 0 || res.Stopped != handler.StopDeadline {
		t.Fatalf("sweep %+v %v", res, err)
	}
	if len(e.cms.Requests()) != 0 {
		t.Fatal("a poll started without time for it")
	}
	// An SQS poll in the same situation is redelivered, not started.
	resp := e.h.HandleSQS(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-late", Body: *e.sqs.Sent()[0].MessageBody}}})
	if len(resp.BatchItemFailures) != 1 || len(e.cms.Requests()) != 0 {
		t.Fatalf("late poll: %+v", resp)
	}
}

func TestInvalidInvocation(t *testing.T) {
	e := setup(t)
	for _, payload := range []string{`{"hello":1}`, `[1]`, `{"Records":{}}`, `{"detail-type":"Scheduled Event","source":"someone"}`} {
		_, err := e.invoke([]byte(payload))
		if err == nil || !strings.Contains(err.Error(), handler.CodeEventInvalid) {
			t.Errorf("%s: err %v", payload, err)
		}
	}
}

// registerDirect registers a change through the service, bypassing SQS.
func registerDirect(t testing.TB, svc *monitor.Service, eventID, siteID string, jobs int) {
	t.Helper()
	change := fmt.Sprintf(`{"event_id":%q,"site_id":%q,"website_version":"v1","source_sequence":1}`, eventID, siteID)
	canonical, err := core.CanonicalizeJSON([]byte(change))
	if err != nil {
		t.Fatal(err)
	}
	detail := fmt.Sprintf(`{"change":%s,"dispatch":{"event_id":%q,"payload_sha256":%q,"status":"succeeded","remote_plan_id":%q,"remote_job_count":%d,"remote_status":"enqueued","response_sha256":%q}}`,
		change, eventID, core.SHA256Hex(canonical), "plan-"+eventID, jobs, core.SHA256Hex([]byte("r")))
	d, err := monitor.ParseDispatched([]byte(detail))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Register(context.Background(), d); err != nil {
		t.Fatal(err)
	}
}

func mustUnmarshal(t testing.TB, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}
