package handler_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/localeflow/localeflow/adapters/cmsdelivery"
	"github.com/localeflow/localeflow/adapters/cmsdelivery/cmsdeliverytest"
	"github.com/localeflow/localeflow/adapters/delayqueue"
	"github.com/localeflow/localeflow/adapters/eventbus"
	"github.com/localeflow/localeflow/adapters/evidence"
	"github.com/localeflow/localeflow/adapters/evidence/evidencetest"
	"github.com/localeflow/localeflow/adapters/releasedb"
	"github.com/localeflow/localeflow/adapters/secretkey"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/dev/localtest"
	"github.com/localeflow/localeflow/dev/logcapture"
	"github.com/localeflow/localeflow/functions/coordinator/handler"
	"github.com/localeflow/localeflow/internal/lambdalog"
	"github.com/localeflow/localeflow/signing"
)

// fastClock runs `speed` times faster than the wall clock, so backoffs of
// minutes pass in seconds; every part of the test (handler, coordinator,
// evidence server receipts) shares it.
type fastClock struct {
	start time.Time
	speed time.Duration
}

func (c fastClock) Now() time.Time { return c.start.Add(time.Since(c.start) * c.speed) }

// instantQueue sends every envelope without SQS delay: the handler re-sends
// early ones until the fast clock reaches them (the chaining path), so no
// test waits for real DelaySeconds.
type instantQueue struct{ q *delayqueue.Queue }

func (i instantQueue) Send(ctx context.Context, kind, eventID string, at, _ time.Time) error {
	return i.q.Send(ctx, kind, eventID, at, at)
}

func (i instantQueue) Resend(ctx context.Context, e delayqueue.Envelope, _ time.Time) error {
	time.Sleep(20 * time.Millisecond) // do not spin the emulator hot
	return i.q.Resend(ctx, e, e.NotBefore())
}

// recordingBus forwards to the real bus and remembers what was published.
type recordingBus struct {
	inner *eventbus.Publisher
	mu    sync.Mutex
	types []string
}

func (b *recordingBus) Publish(ctx context.Context, detailType string, detail any) error {
	if err := b.inner.Publish(ctx, detailType, detail); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.types = append(b.types, detailType)
	return nil
}

func (b *recordingBus) count(detailType string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, t := range b.types {
		if t == detailType {
			n++
		}
	}
	return n
}

type stack struct {
	fx        releasetest.Fixture
	clock     fastClock
	db        *dynamodb.Client
	sqs       *sqs.Client
	table     string
	queueURL  string
	publisher *eventbus.Publisher
	bus       *recordingBus
	evidence  *evidencetest.Server
	cms       *cmsdeliverytest.Server
	h         *handler.Handler
	logs      *logcapture.Buffer
	log       *slog.Logger
}

// newStack builds the handler on the local stack; each option may change
// the coordinator's dependencies before it is built.
func newStack(t *testing.T, responder *releasetest.Responder, opts ...func(*stack, *release.Dependencies)) *stack {
	t.Helper()
	localtest.Require(t)
	_, res := localtest.Stack(t)
	fx := releasetest.NewFixture()
	clock := fastClock{start: time.Now(), speed: 40}
	responder.Fixture, responder.Clock = fx, clock
	evidenceKey := []byte("evidence-hmac-key-0123456789")
	cmsKey := []byte("cms-hmac-key-0123456789")
	approval, publication := fx.Authorities()
	s := &stack{
		fx: fx, clock: clock, db: localtest.DynamoDB(t), sqs: localtest.SQS(t), table: res.ReleaseTable, queueURL: res.ReleaseQueue.URL,
		evidence: evidencetest.New(evidenceKey, responder),
		cms:      cmsdeliverytest.New(cmsKey, publication.PublicKey(), approval.PublicKey()),
		logs:     &logcapture.Buffer{},
	}
	t.Cleanup(s.evidence.Close)
	t.Cleanup(s.cms.Close)
	s.publisher = eventbus.New(localtest.EventBridge(t), res.BusName)
	s.bus = &recordingBus{inner: s.publisher}
	ev, err := evidence.New(evidence.Config{BaseURL: s.evidence.URL, Key: evidenceKey, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cms, err := cmsdelivery.New(cmsdelivery.Config{BaseURL: s.cms.URL, Key: cmsKey, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	log := lambdalog.New(s.logs, slog.LevelDebug)
	cfg := release.DefaultConfig("rev-1", "worker-it")
	cfg.EvidenceLease, cfg.DeliveryLease = 30*time.Second, 30*time.Second
	deps := release.Dependencies{
		Store: releasedb.New(s.db, res.ReleaseTable), EventKey: fx.EventKey, Evidence: ev, CMS: cms,
		Verifiers: fx.Verifiers(), Approval: approval, Publication: publication,
	}
	for _, o := range opts {
		o(s, &deps)
	}
	s.log = log
	c, err := release.NewCoordinator(deps, clock, log, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.h, err = handler.New(handler.Config{Coordinator: c, Queue: instantQueue{delayqueue.New(s.sqs, res.ReleaseQueue.URL)}, Bus: s.bus, Due: releasedb.New(s.db, res.ReleaseTable), Clock: clock, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// publish puts a signed input on the bus; the topology's rule routes it to
// the release queue.
func (s *stack) publish(t *testing.T, detailType string, payload []byte) {
	t.Helper()
	if err := s.publisher.Publish(context.Background(), detailType, json.RawMessage(s.fx.Detail(payload))); err != nil {
		t.Fatal(err)
	}
}

// drain plays the SQS event source mapping: receive a batch, invoke the
// function, delete what it did not report as failed; until done() holds and
// the queue is quiet, or the timeout.
func (s *stack) drain(t *testing.T, timeout time.Duration, done func() bool) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	quiet := 0
	for time.Now().Before(deadline) {
		out, err := s.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(s.queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 0, VisibilityTimeout: 60,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			quiet++
			if done() && quiet >= 5 {
				return
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		quiet = 0
		batch := events.SQSEvent{}
		for _, m := range out.Messages {
			batch.Records = append(batch.Records, events.SQSMessage{
				MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
				Attributes: m.Attributes, EventSource: "aws:sqs",
			})
		}
		raw, _ := json.Marshal(batch)
		ictx, cancel := context.WithTimeout(ctx, 120*time.Second)
		resOut, err := lambda.NewHandler(s.h.Handle).Invoke(ictx, raw)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		var resp events.SQSEventResponse
		if err := json.Unmarshal(resOut, &resp); err != nil {
			t.Fatal(err)
		}
		failed := map[string]bool{}
		for _, f := range resp.BatchItemFailures {
			failed[f.ItemIdentifier] = true
		}
		for _, m := range batch.Records {
			if failed[m.MessageId] {
				t.Fatalf("message failed: %s\n%s", m.Body, s.logs.String())
			}
			if _, err := s.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(s.queueURL), ReceiptHandle: aws.String(m.ReceiptHandle)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !done() {
		t.Fatalf("not done within %s; logs:\n%s", timeout, s.logs.String())
	}
}

// items returns every stored item of the table as JSON, by sort key.
func (s *stack) items(t *testing.T) map[string]string {
	t.Helper()
	out, err := s.db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(s.table), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	items := map[string]string{}
	for _, it := range out.Items {
		var m map[string]any
		if err := attributevalue.UnmarshalMap(it, &m); err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(m)
		items[m["pk"].(string)+"|"+m["sk"].(string)] = string(raw)
	}
	return items
}

func (s *stack) snapshot(t *testing.T, eventID string) release.Snapshot {
	t.Helper()
	snap, err := releasedb.New(s.db, s.table).Load(context.Background(), eventID)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func TestIntegrationThreeLocalesOutOfOrderDeliveredOnce(t *testing.T) {
	s := newStack(t, &releasetest.Responder{})
	plan := releasetest.NewPlan("evt-int-3", "fr-FR", "de-DE", "it-IT")
	// A job before its plan, then the plan, then the rest out of order.
	s.publish(t, contract.DetailJobCompleted, plan.ResultPayload("it-IT", releasetest.ResultOptions{}))
	s.drain(t, 30*time.Second, func() bool { return true })
	s.publish(t, contract.DetailPlanAccepted, plan.PlanPayload())
	s.publish(t, contract.DetailJobCompleted, plan.ResultPayload("fr-FR", releasetest.ResultOptions{IndependentReviewRequired: true}))
	s.publish(t, contract.DetailJobCompleted, plan.ResultPayload("de-DE", releasetest.ResultOptions{HumanReviewRequired: true}))
	s.drain(t, 90*time.Second, func() bool { return s.bus.count(contract.DetailDeliveryDelivered) == 1 })

	snap := s.snapshot(t, "evt-int-3")
	if len(snap.Approvals) != 3 || snap.Delivery == nil || snap.Delivery.Status != release.StateSucceeded || snap.Delivery.Attempts != 1 {
		t.Fatalf("approvals %d, delivery %+v", len(snap.Approvals), snap.Delivery)
	}
	calls, rejected, duplicates, bundles := s.cms.Stats()
	if calls != 1 || rejected != 0 || duplicates != 0 || len(bundles) != 1 {
		t.Fatalf("cms calls=%d rejected=%d duplicates=%d bundles=%d", calls, rejected, duplicates, len(bundles))
	}
	for _, b := range bundles {
		if b.DeliveryID != snap.Delivery.DeliveryID || len(b.Locales) != 3 || b.Locales[0].TargetLocale != "de-DE" {
			t.Fatalf("bundle %+v", b)
		}
	}
	if s.bus.count(contract.DetailReleaseApproved) != 3 || s.bus.count(contract.DetailDeliveryReady) != 1 {
		t.Fatalf("events %v", s.bus.types)
	}
	// Issue 29, docs/design.md "Owed events of compact approvals": no
	// approval is left owed or marked, every evidence record ended
	// succeeded, each approval was announced once (above: 3 events for 3
	// approvals), and the tally holds every job.
	for id, a := range snap.Approvals {
		if release.ApprovalOwed(a, snap.Evidence[a.RequestID]) || a.AwaitingDelivery {
			t.Errorf("approval of %s left owed or marked", id)
		}
	}
	if snap.Tally == nil || len(snap.Tally.Approved) != 3 {
		t.Errorf("tally %+v", snap.Tally)
	}
	for id, e := range snap.Evidence {
		if e.Status != release.StateSucceeded {
			t.Errorf("evidence %s is %s", id, e.Status)
		}
	}

	// Content-free: no text outside source#/result# items, none in logs.
	before := s.items(t)
	for key, item := range before {
		textItem := strings.Contains(key, "|source#") || strings.Contains(key, "|result#")
		for _, secret := range []string{"SECRET-SOURCE", "SECRET-TARGET", "Welcome to our shop"} {
			if strings.Contains(item, secret) && !textItem {
				t.Errorf("%s holds text %q", key, secret)
			}
			if strings.Contains(s.logs.String(), secret) {
				t.Errorf("logs hold text %q", secret)
			}
		}
	}

	// Duplicate and reordered deliveries of every input change nothing.
	s.publish(t, contract.DetailJobCompleted, plan.ResultPayload("de-DE", releasetest.ResultOptions{HumanReviewRequired: true}))
	s.publish(t, contract.DetailJobCompleted, plan.ResultPayload("it-IT", releasetest.ResultOptions{}))
	s.publish(t, contract.DetailPlanAccepted, plan.PlanPayload())
	s.publish(t, contract.DetailJobCompleted, plan.ResultPayload("fr-FR", releasetest.ResultOptions{IndependentReviewRequired: true}))
	for _, kind := range []string{handler.KindDeliver, handler.KindRun, handler.KindDeliver} {
		if err := delayqueue.New(s.sqs, s.queueURL).Send(context.Background(), kind, "evt-int-3", time.Now(), time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	s.drain(t, 30*time.Second, func() bool { return true })
	after := s.items(t)
	if len(after) != len(before) {
		t.Fatalf("%d items before, %d after", len(before), len(after))
	}
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s changed:\n%s\n%s", k, v, after[k])
		}
	}
	if calls2, _, _, _ := s.cms.Stats(); calls2 != 1 || s.bus.count(contract.DetailDeliveryDelivered) != 1 || len(s.bus.types) != 5 {
		t.Fatalf("after duplicates: cms calls %d, events %v", calls2, s.bus.types)
	}
}

func TestIntegrationEvidenceFailures(t *testing.T) {
	tests := []struct {
		name      string
		responder *releasetest.Responder
		opts      releasetest.ResultOptions
		lastCode  string
		calls     int
	}{
		{"human review required, independent review returned", &releasetest.Responder{Review: releasetest.ReviewIndependent},
			releasetest.ResultOptions{HumanReviewRequired: true}, release.CodeIndependentLegalForbidden, 1},
		{"reviewer is the translating provider", &releasetest.Responder{Review: releasetest.ReviewSameProvider},
			releasetest.ResultOptions{IndependentReviewRequired: true}, release.CodeIndependentNotIndependent, 1},
		{"provider answers 503 five times", &releasetest.Responder{FailFirst: 100},
			releasetest.ResultOptions{}, "evidence.http_503", 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStack(t, tt.responder)
			plan := releasetest.NewPlan("evt-int-f", "de-DE")
			s.publish(t, contract.DetailPlanAccepted, plan.PlanPayload())
			s.publish(t, contract.DetailJobCompleted, plan.ResultPayload("de-DE", tt.opts))
			var rec *release.EvidenceRecord
			s.drain(t, 60*time.Second, func() bool {
				for _, e := range s.snapshot(t, "evt-int-f").Evidence {
					rec = e
				}
				return rec != nil && rec.Status == release.StateFailed
			})
			if rec.LastErrorCode != tt.lastCode || rec.Attempts != tt.calls || tt.responder.Calls() != tt.calls {
				t.Fatalf("record %+v, provider calls %d", rec, tt.responder.Calls())
			}
			if !strings.Contains(s.logs.String(), tt.lastCode) {
				t.Fatalf("log lacks %s", tt.lastCode)
			}
			// The next run reports exhaustion and schedules nothing more.
			if err := delayqueue.New(s.sqs, s.queueURL).Send(context.Background(), handler.KindRun, "evt-int-f", time.Now(), time.Now()); err != nil {
				t.Fatal(err)
			}
			s.drain(t, 20*time.Second, func() bool { return strings.Contains(s.logs.String(), release.CodeAttemptsExhausted) })
			if len(s.snapshot(t, "evt-int-f").Approvals) != 0 || s.bus.count(contract.DetailReleaseApproved) != 0 {
				t.Fatal("approved despite failed evidence")
			}
		})
	}
}

// rotatingSecret is the event key secret an operator rotates.
type rotatingSecret struct {
	mu    sync.Mutex
	value string
}

func (r *rotatingSecret) put(keys ...[]byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = hex.EncodeToString(k)
	}
	r.value = strings.Join(parts, ",")
}

func (r *rotatingSecret) GetSecretValue(context.Context, *secretsmanager.GetSecretValueInput, ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return &secretsmanager.GetSecretValueOutput{SecretString: aws.String(r.value)}, nil
}

// TestIntegrationEventKeyRotationWhileReleasesAreInFlight rotates the event
// key on the local AWS stack while a release is in flight, with the key set
// re-read from its secret on a TTL (no redeploy): events signed with the
// old key before the switch and with the new key after it are all
// accepted, the release is delivered once, and once the old key is
// dropped an event signed with it is refused.
func TestIntegrationEventKeyRotationWhileReleasesAreInFlight(t *testing.T) {
	secret := &rotatingSecret{}
	s := newStack(t, &releasetest.Responder{}, func(s *stack, d *release.Dependencies) {
		secret.put(s.fx.EventKey)
		keys, err := secretkey.NewCache(context.Background(), secretkey.Source{Stem: "LOCALEFLOW_EVENT_KEY", SecretARN: "arn:aws:secretsmanager:x"},
			secret, "event", secretkey.MinBytes(16), time.Minute, s.clock)
		if err != nil {
			t.Fatal(err)
		}
		d.Events.KeySet = keys
	})
	oldKey, newKey := s.fx.EventKey, []byte("the-new-event-hmac-key-0123456789")
	clock := s.clock
	publishWith := func(key []byte, detailType string, payload []byte) {
		t.Helper()
		detail, _ := json.Marshal(map[string]string{"payload": string(payload), "signature": signing.SignEvent(key, payload)})
		if err := s.publisher.Publish(context.Background(), detailType, json.RawMessage(detail)); err != nil {
			t.Fatal(err)
		}
	}
	waitTTL := func() {
		until := clock.Now().Add(time.Minute + time.Second)
		for clock.Now().Before(until) {
			time.Sleep(100 * time.Millisecond)
		}
	}
	plan := releasetest.NewPlan("evt-rot-1", "fr-FR", "de-DE", "it-IT")
	publishWith(oldKey, contract.DetailPlanAccepted, plan.PlanPayload())
	publishWith(oldKey, contract.DetailJobCompleted, plan.ResultPayload("fr-FR", releasetest.ResultOptions{}))
	s.drain(t, 30*time.Second, func() bool { return true })

	secret.put(newKey, oldKey) // step 2
	waitTTL()
	publishWith(newKey, contract.DetailJobCompleted, plan.ResultPayload("de-DE", releasetest.ResultOptions{}))
	publishWith(oldKey, contract.DetailJobCompleted, plan.ResultPayload("it-IT", releasetest.ResultOptions{})) // signed before the switch
	s.drain(t, 90*time.Second, func() bool { return s.bus.count(contract.DetailDeliveryDelivered) == 1 })
	if strings.Contains(s.logs.String(), release.CodeEventSignatureInvalid) {
		t.Fatalf("an event was refused during the rotation:\n%s", s.logs.String())
	}
	if calls, _, _, _ := s.cms.Stats(); calls != 1 {
		t.Fatalf("%d deliveries", calls)
	}

	secret.put(newKey) // step 4
	waitTTL()
	publishWith(oldKey, contract.DetailJobCompleted, plan.ResultPayload("it-IT", releasetest.ResultOptions{}))
	s.drain(t, 30*time.Second, func() bool { return true })
	if !strings.Contains(s.logs.String(), release.CodeEventSignatureInvalid) {
		t.Fatal("an event signed with the dropped key was accepted")
	}
}
