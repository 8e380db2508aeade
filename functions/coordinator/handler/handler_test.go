package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/localeflow/localeflow/adapters/delayqueue"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/contract/schema/schematest"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/functions/coordinator/handler"
	"github.com/localeflow/localeflow/internal/lambdalog"
)

var update = flag.Bool("update", false, "rewrite testdata/*.json")

// fakeQueue records delayed envelopes.
type fakeQueue struct {
	mu   sync.Mutex
	sent []delayqueue.Envelope
}

func (q *fakeQueue) Send(_ context.Context, kind, eventID string, at, _ time.Time) error {
	e, err := delayqueue.NewEnvelope(kind, eventID, "", at)
	if err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sent = append(q.sent, e)
	return nil
}

func (q *fakeQueue) Resend(_ context.Context, e delayqueue.Envelope, _ time.Time) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sent = append(q.sent, e)
	return nil
}

// take returns the envelopes sent so far as an SQS batch and forgets them.
func (q *fakeQueue) take(t *testing.T) events.SQSEvent {
	t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	var ev events.SQSEvent
	for i, e := range q.sent {
		body, err := e.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: "d-" + string(rune('a'+i)), Body: string(body)})
	}
	q.sent = nil
	return ev
}

type published struct {
	DetailType string
	Detail     json.RawMessage
}

type fakeBus struct {
	mu  sync.Mutex
	out []published
	// fail holds, per detail type, how many publishes still fail.
	fail map[string]int
}

var errBusDown = errors.New("bus unavailable")

func (b *fakeBus) Publish(_ context.Context, detailType string, detail any) error {
	raw, err := json.Marshal(detail)
	if err != nil {
		return err
	}
	// Every detail the coordinator publishes validates against its
	// schema (contract/schema); a mismatch is a defect, not a bus failure.
	if err := schematest.ValidateDetail(detailType, raw); err != nil {
		panic(err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fail[detailType] > 0 {
		b.fail[detailType]--
		return errBusDown
	}
	b.out = append(b.out, published{detailType, raw})
	return nil
}

func (b *fakeBus) count(detailType string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, p := range b.out {
		if p.DetailType == detailType {
			n++
		}
	}
	return n
}

type bundle struct {
	h     *handler.Handler
	c     *release.Coordinator // the coordinator h drives
	clock core.Clock
	store *releasetest.MemStore
	queue *fakeQueue
	bus   *fakeBus
	cms   *releasetest.CMS
	resp  *releasetest.Responder
	logs  *bytes.Buffer
	now   *time.Time
}

// setups counts the fixtures built (the fuzz target builds one in all).
var setups atomic.Int64

func setup(t testing.TB, opts ...func(*handler.Config)) *bundle {
	t.Helper()
	return setupCoordinator(t, nil, opts...)
}

// setupCoordinator is setup with the coordinator's dependencies and
// configuration changed by change (when not nil) before it is built.
func setupCoordinator(t testing.TB, change func(b *bundle, d *release.Dependencies, cfg *release.Config), opts ...func(*handler.Config)) *bundle {
	t.Helper()
	setups.Add(1)
	fx := releasetest.NewFixture()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	b := &bundle{store: releasetest.NewMemStore(), queue: &fakeQueue{}, bus: &fakeBus{}, cms: &releasetest.CMS{}, logs: &bytes.Buffer{}, now: &now}
	clock := core.ClockFunc(func() time.Time { return *b.now })
	b.resp = &releasetest.Responder{Fixture: fx, Clock: clock}
	approval, publication := fx.Authorities()
	log := lambdalog.New(b.logs, slog.LevelDebug)
	cfg := release.DefaultConfig("rev-1", "worker-1")
	cfg.EvidenceLease, cfg.DeliveryLease = 90*time.Second, 90*time.Second
	deps := release.Dependencies{
		Store: b.store, EventKey: fx.EventKey, Evidence: releasetest.Provider{Responder: b.resp}, CMS: b.cms,
		Verifiers: fx.Verifiers(), Approval: approval, Publication: publication,
	}
	if change != nil {
		change(b, &deps, &cfg)
	}
	c, err := release.NewCoordinator(deps, clock, log, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.c, b.clock = c, clock
	hc := handler.Config{Coordinator: c, Queue: b.queue, Bus: b.bus, Due: b.store, Clock: clock, Log: log}
	for _, o := range opts {
		o(&hc)
	}
	h, err := handler.New(hc)
	if err != nil {
		t.Fatal(err)
	}
	b.h = h
	return b
}

// invoke drives the handler through the Lambda runtime's handler adapter.
func (b *bundle) invoke(t *testing.T, batch events.SQSEvent) events.SQSEventResponse {
	t.Helper()
	raw, err := json.Marshal(batch)
	if err != nil {
		t.Fatal(err)
	}
	return b.invokeRaw(t, raw)
}

func (b *bundle) invokeRaw(t *testing.T, raw []byte) events.SQSEventResponse {
	t.Helper()
	out, err := lambda.NewHandler(b.h.Handle).Invoke(context.Background(), raw)
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	var resp events.SQSEventResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatal(err)
	}
	return resp
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile("../testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// envelopeMessage wraps a signed detail in the EventBridge envelope an SQS
// target receives.
func envelopeMessage(id, detailType string, detail []byte) events.SQSMessage {
	env, _ := json.Marshal(map[string]any{
		"version": "0", "id": "eb-" + id, "detail-type": detailType, "source": contract.EventSource,
		"account": "000000000000", "time": "2026-11-29T12:00:00Z", "region": "us-east-1", "resources": []string{},
		"detail": json.RawMessage(detail),
	})
	return events.SQSMessage{MessageId: id, Body: string(env), EventSource: "aws:sqs",
		Attributes: map[string]string{"ApproximateReceiveCount": "1"}}
}

// TestTestdata keeps testdata/*.json in step with the fixture keys
// (go test -run TestTestdata -update rewrites them).
func TestTestdata(t *testing.T) {
	fx := releasetest.NewFixture()
	plan := releasetest.NewPlan("evt-h-1", "de-DE", "fr-FR")
	files := map[string]events.SQSEvent{
		"sqs_plan.json": {Records: []events.SQSMessage{envelopeMessage("m-plan", contract.DetailPlanAccepted, fx.Detail(plan.PlanPayload()))}},
		"sqs_jobs.json": {Records: []events.SQSMessage{
			envelopeMessage("m-job-fr", contract.DetailJobCompleted, fx.Detail(plan.ResultPayload("fr-FR", releasetest.ResultOptions{}))),
			envelopeMessage("m-job-de", contract.DetailJobCompleted, fx.Detail(plan.ResultPayload("de-DE", releasetest.ResultOptions{}))),
		}},
		"sqs_invalid.json": {Records: []events.SQSMessage{
			envelopeMessage("m-forged", contract.DetailPlanAccepted, []byte(`{"payload":`+string(mustJSON(string(plan.PlanPayload())))+`,"signature":"v1=`+strings.Repeat("0", 64)+`"}`)),
			{MessageId: "m-garbage", Body: "not json"},
			{MessageId: "m-kind", Body: `{"schema":"localeflow.delayed.v1","kind":"poll","event_id":"evt-h-1","not_before_ms":0}`},
			envelopeMessage("m-type", "localeflow.other", fx.Detail(plan.PlanPayload())),
		}},
	}
	for name, ev := range files {
		raw, err := json.MarshalIndent(ev, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		raw = append(raw, '\n')
		if *update {
			if err := os.WriteFile("../testdata/"+name, raw, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if !bytes.Equal(readTestdata(t, name), raw) {
			t.Errorf("testdata/%s is stale: run go test -run TestTestdata -update", name)
		}
	}
}

func mustJSON(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}

func TestOutOfOrderJobsDeliverOnce(t *testing.T) {
	b := setup(t)
	if resp := b.invokeRaw(t, readTestdata(t, "sqs_plan.json")); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("%+v", resp)
	}
	if len(b.queue.sent) != 0 {
		t.Fatalf("plan alone scheduled %v", b.queue.sent)
	}
	jobs := readTestdata(t, "sqs_jobs.json")
	if resp := b.invokeRaw(t, jobs); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("%+v", resp)
	}
	if b.bus.count(contract.DetailReleaseApproved) != 2 || b.bus.count(contract.DetailDeliveryReady) != 1 {
		t.Fatalf("published %+v", b.bus.out)
	}
	// Drain the scheduled steps until nothing is left.
	for i := 0; i < 10; i++ {
		batch := b.queue.take(t)
		if len(batch.Records) == 0 {
			break
		}
		if resp := b.invoke(t, batch); len(resp.BatchItemFailures) != 0 {
			t.Fatalf("%+v", resp)
		}
	}
	if b.bus.count(contract.DetailDeliveryDelivered) != 1 || b.cms.Sends != 1 {
		t.Fatalf("delivered %d times, %d sends", b.bus.count(contract.DetailDeliveryDelivered), b.cms.Sends)
	}
	// Duplicates and reordered redeliveries of everything change nothing.
	_, puts := b.store.Counts()
	before := len(b.bus.out)
	b.invokeRaw(t, jobs)
	b.invokeRaw(t, readTestdata(t, "sqs_plan.json"))
	for i := 0; i < 10; i++ {
		batch := b.queue.take(t)
		if len(batch.Records) == 0 {
			break
		}
		b.invoke(t, batch)
	}
	if _, again := b.store.Counts(); again != puts || len(b.bus.out) != before || b.cms.Sends != 1 {
		t.Fatalf("duplicates wrote %d records, published %d events, sent %d", again-puts, len(b.bus.out)-before, b.cms.Sends)
	}
	for _, p := range b.bus.out {
		if bytes.Contains(p.Detail, []byte("SECRET")) {
			t.Fatalf("event detail holds text: %s", p.Detail)
		}
	}
}

func TestInvalidMessagesAreDroppedNotRetried(t *testing.T) {
	b := setup(t)
	resp := b.invokeRaw(t, readTestdata(t, "sqs_invalid.json"))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("invalid messages retried: %+v", resp)
	}
	if _, puts := b.store.Counts(); puts != 0 {
		t.Fatal("invalid messages stored state")
	}
	for _, code := range []string{release.CodeEventSignatureInvalid, handler.CodeMessageInvalid, release.CodeEventDetailType} {
		if !strings.Contains(b.logs.String(), code) {
			t.Errorf("log lacks %s", code)
		}
	}
}

func TestEvidenceRetryScheduledAndExhausted(t *testing.T) {
	b := setup(t)
	b.resp.FailFirst = 100
	b.invokeRaw(t, readTestdata(t, "sqs_plan.json"))
	b.invokeRaw(t, readTestdata(t, "sqs_jobs.json"))
	for i := 0; i < 30; i++ {
		batch := b.queue.take(t)
		if len(batch.Records) == 0 {
			break
		}
		// Step the clock to the latest envelope's due time.
		for _, m := range batch.Records {
			env, err := delayqueue.Parse([]byte(m.Body))
			if err != nil {
				t.Fatal(err)
			}
			if at := env.NotBefore(); at.After(*b.now) {
				*b.now = at
			}
		}
		if resp := b.invoke(t, batch); len(resp.BatchItemFailures) != 0 {
			t.Fatalf("%+v", resp)
		}
	}
	// fr-FR completed first and had one attempt; then de-DE, first in
	// locale order, is selected: 5 attempts, then exhausted. Exhausted
	// attempts block the release for good (every later run would meet the
	// same final error, docs/design.md "Blocked releases and the release
	// sweep"), so the scheduling stops.
	if b.resp.Calls() != 6 {
		t.Fatalf("%d evidence calls", b.resp.Calls())
	}
	if !strings.Contains(b.logs.String(), release.CodeAttemptsExhausted) {
		t.Fatal("exhaustion not logged")
	}
	if len(b.queue.sent) != 0 {
		t.Fatal("still scheduling after exhaustion")
	}
}

func TestEarlyEnvelopeIsChained(t *testing.T) {
	b := setup(t)
	e, _ := delayqueue.NewEnvelope(handler.KindRun, "evt-h-1", "", b.now.Add(time.Hour))
	body, _ := e.Marshal()
	resp := b.invoke(t, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "early", Body: string(body)}}})
	if len(resp.BatchItemFailures) != 0 || len(b.queue.sent) != 1 || b.queue.sent[0] != e {
		t.Fatalf("%+v %+v", resp, b.queue.sent)
	}
}

// slowProvider makes each evidence call use up invocation time.
type slowProvider struct {
	release.EvidenceProvider
	d time.Duration
}

func (p slowProvider) Obtain(ctx context.Context, req *contract.EvidenceRequest) ([]byte, error) {
	time.Sleep(p.d)
	return p.EvidenceProvider.Obtain(ctx, req)
}

// The test runs in a synctest bubble: the 700 ms evidence call and the 1 s
// invocation deadline use virtual time, so a loaded machine cannot change
// which step fits.
func TestShortDeadlineHandsStepToNextInvocation(t *testing.T) {
	synctest.Test(t, shortDeadlineHandsStepToNextInvocation)
}

func shortDeadlineHandsStepToNextInvocation(t *testing.T) {
	b := setupCoordinator(t, func(_ *bundle, d *release.Dependencies, cfg *release.Config) {
		cfg.EvidenceLease = 400 * time.Millisecond
		d.Evidence = slowProvider{d.Evidence, 700 * time.Millisecond}
	})
	b.invokeRaw(t, readTestdata(t, "sqs_plan.json"))
	// 1 s: the first job's step fits (400 ms lease) and uses 700 ms, the second does
	// not any more and goes to a fresh invocation.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	out, err := lambda.NewHandler(b.h.Handle).Invoke(ctx, readTestdata(t, "sqs_jobs.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte(`"batchItemFailures":[]`)) {
		t.Fatalf("%s", out)
	}
	if b.resp.Calls() != 1 || len(b.queue.sent) != 2 || b.queue.sent[1].Kind != handler.KindRun {
		t.Fatalf("calls %d, sent %+v", b.resp.Calls(), b.queue.sent)
	}
	// The job input handed on created no evidence lease at ingest (the
	// run sent on would wait it out): its job record keeps awaiting_claim.
	snap, err := b.store.Load(context.Background(), b.queue.sent[1].EventID)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Evidence) != 1 {
		t.Fatalf("%d evidence records", len(snap.Evidence))
	}
	for _, e := range snap.Evidence {
		for id, j := range snap.Jobs {
			if id != e.JobID && !j.AwaitingClaim {
				t.Fatalf("job %s handed on without awaiting_claim: %+v", id, j)
			}
		}
	}
}

func TestInvocationShorterThanLeaseFailsBatch(t *testing.T) {
	b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // < 90 s lease
	defer cancel()
	out, err := lambda.NewHandler(b.h.Handle).Invoke(ctx, readTestdata(t, "sqs_jobs.json"))
	if err != nil {
		t.Fatal(err)
	}
	var resp events.SQSEventResponse
	if err := json.Unmarshal(out, &resp); err != nil || len(resp.BatchItemFailures) != 2 || len(b.queue.sent) != 0 {
		t.Fatalf("%s %v, sent %v", out, err, b.queue.sent)
	}
	if !strings.Contains(b.logs.String(), handler.CodeDeadlineShort) {
		t.Fatal("not logged")
	}
}

// failingStore fails every Load: store outages are retried by SQS.
type failingStore struct{ release.Store }

func (failingStore) Load(context.Context, string) (release.Snapshot, error) {
	return release.Snapshot{}, core.Retry("release.store.unavailable")
}

func TestStoreOutageIsABatchFailure(t *testing.T) {
	b := setup(t)
	fx := releasetest.NewFixture()
	approval, publication := fx.Authorities()
	c, err := release.NewCoordinator(release.Dependencies{
		Store: failingStore{b.store}, EventKey: fx.EventKey, Evidence: releasetest.Provider{Responder: b.resp}, CMS: b.cms,
		Verifiers: fx.Verifiers(), Approval: approval, Publication: publication,
	}, core.SystemClock{}, nil, release.DefaultConfig("rev-1", "w"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := handler.New(handler.Config{Coordinator: c, Queue: b.queue, Bus: b.bus, Due: b.store, Clock: core.SystemClock{}, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	b.h = h
	resp := b.invokeRaw(t, readTestdata(t, "sqs_plan.json"))
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "m-plan" {
		t.Fatalf("%+v", resp)
	}
}

func TestSweepReschedulesDueWork(t *testing.T) {
	b := setup(t)
	b.resp.FailFirst = 1
	b.invokeRaw(t, readTestdata(t, "sqs_plan.json"))
	b.invokeRaw(t, readTestdata(t, "sqs_jobs.json"))
	// The step messages are lost.
	b.queue.take(t)
	*b.now = b.now.Add(time.Hour)
	out, err := lambda.NewHandler(b.h.Handle).Invoke(context.Background(), readTestdata(t, "scheduled.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res handler.SweepResult
	if err := json.Unmarshal(out, &res); err != nil || res.Scheduled != 1 || res.Due < 1 {
		t.Fatalf("%s %v", out, err)
	}
	for i := 0; i < 10; i++ {
		batch := b.queue.take(t)
		if len(batch.Records) == 0 {
			break
		}
		b.invoke(t, batch)
	}
	if b.bus.count(contract.DetailDeliveryDelivered) != 1 {
		t.Fatalf("sweep did not recover the release: %v", b.bus.out)
	}
	// Nothing is due any more.
	out, _ = lambda.NewHandler(b.h.Handle).Invoke(context.Background(), readTestdata(t, "scheduled.json"))
	if string(out) != `{"due":0,"scheduled":0}` {
		t.Fatalf("%s", out)
	}
	if _, err := lambda.NewHandler(b.h.Handle).Invoke(context.Background(), []byte(`{"foo":1}`)); err == nil {
		t.Fatal("unknown invocation accepted")
	}
}

func readTestdataF(f *testing.F, name string) []byte {
	f.Helper()
	raw, err := os.ReadFile("../testdata/" + name)
	if err != nil {
		f.Fatal(err)
	}
	return raw
}

func jsonUnmarshal(raw []byte, v any) error { return json.Unmarshal(raw, v) }

func (b *bundle) ctxT() context.Context { return context.Background() }

// Issue 29: the job inputs of a tallied release approve their own locales
// (named steps): an approval that leaves the tally incomplete schedules no
// run (before, every approval queued a run that read the whole release),
// and the one that completes it prepares the delivery: the only step
// queued is the delivery's.
func TestTalliedJobInputsQueueOnlyTheDelivery(t *testing.T) {
	b := setup(t)
	if resp := b.invokeRaw(t, readTestdata(t, "sqs_plan.json")); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("%+v", resp)
	}
	if resp := b.invokeRaw(t, readTestdata(t, "sqs_jobs.json")); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("%+v", resp)
	}
	if len(b.queue.sent) != 1 || b.queue.sent[0].Kind != handler.KindDeliver {
		t.Fatalf("queued %+v", b.queue.sent)
	}
	if b.bus.count(contract.DetailReleaseApproved) != 2 || b.bus.count(contract.DetailDeliveryReady) != 1 {
		t.Fatalf("published %+v", b.bus.out)
	}
	snap, err := b.store.Load(context.Background(), "evt-h-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range snap.Approvals {
		if release.ApprovalOwed(a, snap.Evidence[a.RequestID]) || a.AwaitingDelivery {
			t.Fatalf("approval left owed or marked: %+v", a)
		}
	}
	if snap.Tally == nil || len(snap.Tally.Approved) != 2 {
		t.Fatalf("tally %+v", snap.Tally)
	}
}
