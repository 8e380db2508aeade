package main

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
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
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/localeflow/localeflow/adapters/cmsdelivery/cmsdeliverytest"
	"github.com/localeflow/localeflow/adapters/eventbus"
	"github.com/localeflow/localeflow/adapters/evidence/evidencetest"
	"github.com/localeflow/localeflow/adapters/monitordb"
	"github.com/localeflow/localeflow/adapters/opsdb"
	"github.com/localeflow/localeflow/adapters/releasedb"
	"github.com/localeflow/localeflow/adapters/secretkey"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/health"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/dev/localtest"
	"github.com/localeflow/localeflow/dev/logcapture"
	"github.com/localeflow/localeflow/functions/coordinator/handler"
	"github.com/localeflow/localeflow/internal/lambdalog"
	"github.com/localeflow/localeflow/signing"
)

// The key rotation runbooks of docs/security.md ("Key rotation
// runbooks"), each run as an operator would on the local stack: the real
// coordinator built from its environment (build, one call per execution
// environment, i.e. per cold start), its key secrets in a Secrets Manager
// stand-in (the local stack has none), inputs put on the bus, the release
// queue played to whichever execution environments are alive (old and new
// ones in turn, as Lambda does while environments are replaced). Each
// rotates one key while releases are in flight and checks that nothing
// was refused, nothing blocked, every release delivered once and health
// ok.

// secrets is the Secrets Manager stand-in: secret ARN → SecretString.
type secrets struct {
	mu     sync.Mutex
	values map[string]string
}

func (s *secrets) put(arn string, keys ...[]byte) {
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = hex.EncodeToString(k)
	}
	s.putRaw(arn, strings.Join(parts, ","))
}

func (s *secrets) putRaw(arn, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.values[arn] = value
}

func (s *secrets) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &secretsmanager.GetSecretValueOutput{SecretString: aws.String(s.values[aws.ToString(in.SecretId)])}, nil
}

func secretARN(name string) string {
	return "arn:aws:secretsmanager:us-east-1:000000000000:secret:localeflow/" + strings.ToLower(name)
}

// keyTTL is the runbook tests' LOCALEFLOW_KEY_TTL: "wait one TTL" is a
// short sleep.
const keyTTL = time.Second

type deployment struct {
	t        *testing.T
	fx       releasetest.Fixture
	secrets  *secrets
	env      map[string]string
	ev       *evidencetest.Server
	cms      *cmsdeliverytest.Server
	resp     *releasetest.Responder
	logs     *logcapture.Buffer
	bus      *eventbus.Publisher
	store    *releasedb.Store
	sqs      *sqs.Client
	queueURL string
	checker  *health.Checker
	// envs are the live execution environments, oldest first.
	envs []*handler.Handler
	next int
}

// Initial keys; every runbook rotates one of them to a NEW key.
var (
	oldEvidenceKey = []byte("evidence-hmac-key-0123456789")
	oldCMSKey      = []byte("cms-hmac-key-0123456789")
)

func seed(label string) []byte {
	s := sha256.Sum256([]byte("rotation-" + label))
	return s[:]
}

func newDeployment(t *testing.T) *deployment {
	t.Helper()
	localtest.Require(t)
	_, res := localtest.Stack(t)
	fx := releasetest.NewFixture()
	approval, publication := fx.Authorities()
	d := &deployment{
		t: t, fx: fx, secrets: &secrets{values: map[string]string{}}, logs: &logcapture.Buffer{},
		resp: &releasetest.Responder{Fixture: fx},
		sqs:  localtest.SQS(t), queueURL: res.ReleaseQueue.URL,
		store: releasedb.New(localtest.DynamoDB(t), res.ReleaseTable),
		bus:   eventbus.New(localtest.EventBridge(t), res.BusName),
	}
	d.ev = evidencetest.New(oldEvidenceKey, d.resp)
	t.Cleanup(d.ev.Close)
	d.cms = cmsdeliverytest.New(oldCMSKey, publication.PublicKey(), approval.PublicKey())
	t.Cleanup(d.cms.Close)
	d.env = map[string]string{
		envReleaseTable: res.ReleaseTable, envReleaseQueueURL: res.ReleaseQueue.URL, envEventBus: res.BusName,
		envEvidenceBaseURL: d.ev.URL, envCMSBaseURL: d.cms.URL, "LOCALEFLOW_ALLOW_INSECURE_HTTP": "1",
		envIssuersQuality:     issuerEnv(fx, release.KindQuality),
		envIssuersHumanReview: issuerEnv(fx, release.KindHumanReview),
		envIssuersIndependent: issuerEnv(fx, release.KindIndependentModelReview),
		envEvidenceTimeout:    "5s", envCMSTimeout: "5s", envKeyTTL: keyTTL.String(),
		"AWS_LAMBDA_FUNCTION_TIMEOUT": "120",
	}
	for name, key := range map[string][]byte{
		keyEvent: fx.EventKey, keyCMS: oldCMSKey, keyEvidence: oldEvidenceKey, keyApproval: fx.ApprovalSeed, keyPublication: fx.PublicationKey,
	} {
		d.env[keyStem(name)+"_SECRET_ARN"] = secretARN(name)
		d.secrets.put(secretARN(name), key)
	}
	prev := secretsManager
	secretsManager = func(aws.Config) secretkey.SecretsManagerAPI { return d.secrets }
	t.Cleanup(func() { secretsManager = prev })
	db := localtest.DynamoDB(t)
	monitorStore, err := monitordb.New(db, res.MonitorTable)
	if err != nil {
		t.Fatal(err)
	}
	reader, err := opsdb.NewReleaseReader(db, res.ReleaseTable)
	if err != nil {
		t.Fatal(err)
	}
	if d.checker, err = health.NewChecker(monitorStore, opsdb.TableItems{DB: db, Table: res.MonitorTable}, reader, core.SystemClock{}, nil); err != nil {
		t.Fatal(err)
	}
	d.coldStart()
	return d
}

// coldStart starts one more execution environment with the environment
// and secrets as they are now.
func (d *deployment) coldStart() {
	d.t.Helper()
	h, err := build(context.Background(), func(k string) string { return d.env[k] }, lambdalog.New(d.logs, slog.LevelDebug))
	if err != nil {
		d.t.Fatalf("cold start: %v", err)
	}
	d.envs = append(d.envs, h)
}

// retireOldest ends the oldest execution environment (Lambda replaces
// environments after a configuration update; the last in-flight
// invocation of an old one ends within the function timeout).
func (d *deployment) retireOldest() { d.envs = d.envs[1:] }

// waitTTL is the runbook's "wait one LOCALEFLOW_KEY_TTL".
func (d *deployment) waitTTL() { time.Sleep(keyTTL + 200*time.Millisecond) }

// publish puts a signed input event on the bus, signed v2 with key.
func (d *deployment) publish(key []byte, detailType string, payload []byte) {
	d.t.Helper()
	detail, err := signing.EventDetailV2(key, detailType, time.Now(), payload)
	if err != nil {
		d.t.Fatal(err)
	}
	if err := d.bus.Publish(context.Background(), detailType, json.RawMessage(detail)); err != nil {
		d.t.Fatal(err)
	}
}

// drain plays the release queue to the live environments in turn until
// done holds after a batch and the queue is quiet (done nil: only quiet).
// A batch item failure fails the test.
func (d *deployment) drain(timeout time.Duration, done func() bool) {
	d.t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	quiet := 0
	for time.Now().Before(deadline) {
		if done != nil && done() {
			return
		}
		out, err := d.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(d.queueURL), MaxNumberOfMessages: 1, VisibilityTimeout: 60})
		if err != nil {
			d.t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			if quiet++; done == nil && quiet >= 10 {
				return
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		quiet = 0
		m := out.Messages[0]
		raw, _ := json.Marshal(events.SQSEvent{Records: []events.SQSMessage{{
			MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body), EventSource: "aws:sqs",
		}}})
		h := d.envs[d.next%len(d.envs)]
		d.next++
		ictx, cancel := context.WithTimeout(ctx, 120*time.Second)
		res, err := lambda.NewHandler(h.Handle).Invoke(ictx, raw)
		cancel()
		if err != nil {
			d.t.Fatal(err)
		}
		var resp events.SQSEventResponse
		if err := json.Unmarshal(res, &resp); err != nil {
			d.t.Fatal(err)
		}
		if len(resp.BatchItemFailures) > 0 {
			d.t.Fatalf("message failed: %s\n%s", aws.ToString(m.Body), d.logs.String())
		}
		if _, err := d.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(d.queueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
			d.t.Fatal(err)
		}
	}
	if done != nil {
		d.t.Fatalf("not done after %s\n%s", timeout, d.logs.String())
	}
}

func (d *deployment) snap(eventID string) release.Snapshot {
	d.t.Helper()
	s, err := d.store.Load(context.Background(), eventID)
	if err != nil {
		d.t.Fatal(err)
	}
	return s
}

func (d *deployment) approved(eventID string, n int) func() bool {
	return func() bool { return len(d.snap(eventID).Approvals) >= n }
}

func (d *deployment) delivered(eventID string) func() bool {
	return func() bool {
		s := d.snap(eventID)
		return s.Delivery != nil && s.Delivery.Status == release.StateSucceeded
	}
}

// startRelease puts a plan of locales and the first locale's job on the
// bus, signed with key, and plays the queue until that locale is approved.
func (d *deployment) startRelease(key []byte, eventID string, locales ...string) releasetest.PlanSpec {
	d.t.Helper()
	plan := releasetest.NewPlan(eventID, locales...)
	d.publish(key, contract.DetailPlanAccepted, plan.PlanPayload())
	d.publish(key, contract.DetailJobCompleted, plan.ResultPayload(locales[0], releasetest.ResultOptions{}))
	d.drain(60*time.Second, d.approved(eventID, 1))
	return plan
}

// finish checks the runbook's outcome: every release delivered exactly
// once, nothing refused (no quarantined input, no request or bundle the
// other side refused, no final error), nothing blocked, health ok.
func (d *deployment) finish(eventIDs ...string) {
	d.t.Helper()
	d.drain(30*time.Second, nil)
	for _, id := range eventIDs {
		s := d.snap(id)
		if s.Delivery == nil || s.Delivery.Status != release.StateSucceeded || s.Blocked != nil {
			d.t.Fatalf("%s: delivery %+v, blocked %+v\n%s", id, s.Delivery, s.Blocked, d.logs.String())
		}
	}
	calls, rejected, _, bundles := d.cms.Stats()
	if rejected != 0 || len(bundles) != len(eventIDs) {
		d.t.Fatalf("CMS: %d calls, %d rejected, %d deliveries, want %d", calls, rejected, len(bundles), len(eventIDs))
	}
	if _, rejected := d.ev.Counts(); rejected != 0 {
		d.t.Fatalf("evidence provider rejected %d requests", rejected)
	}
	logs := d.logs.String()
	for _, bad := range []string{"settled with a final error", "signature_invalid", release.CodePlanSealInvalid, release.CodeApprovalInvalid,
		release.CodeDeliveryInvalid, "receipt.", `"level":"ERROR"`} {
		if strings.Contains(logs, bad) {
			d.t.Fatalf("logs carry %q:\n%s", bad, logs)
		}
	}
	report, err := d.checker.Check(context.Background())
	if err != nil {
		d.t.Fatal(err)
	}
	if report.Status != health.StatusOK {
		d.t.Fatalf("health %s: %v", report.Status, report.Reasons)
	}
}

// TestIntegrationRunbookEventKey: docs/security.md "Event key". Release A
// has its plan sealed under OLD and finishes during the rotation; release
// B is open across step 4 (its plan is resealed under NEW on its first
// step after step 2). A new execution environment after step 2 reads
// NEW first (finding 1: it sealed and checked plans with that key alone).
func TestIntegrationRunbookEventKey(t *testing.T) {
	d := newDeployment(t)
	oldKey, newKey := d.fx.EventKey, seed("event")
	a := d.startRelease(oldKey, "evt-rb-ev-a", "fr-FR", "de-DE", "it-IT")
	b := d.startRelease(oldKey, "evt-rb-ev-b", "fr-FR", "de-DE", "it-IT")
	// Step 1: producers have nothing to do. Step 2: NEW,OLD; one TTL; a
	// new environment starts beside the old one.
	d.secrets.put(secretARN(keyEvent), newKey, oldKey)
	d.waitTTL()
	d.coldStart()
	d.publish(oldKey, contract.DetailJobCompleted, a.ResultPayload("de-DE", releasetest.ResultOptions{})) // signed before the switch
	// Step 3: producers sign with NEW.
	d.publish(newKey, contract.DetailJobCompleted, a.ResultPayload("it-IT", releasetest.ResultOptions{}))
	d.drain(90*time.Second, d.delivered("evt-rb-ev-a"))
	// B takes a step (its second job, signed with NEW): its plan is
	// resealed under NEW.
	d.publish(newKey, contract.DetailJobCompleted, b.ResultPayload("de-DE", releasetest.ResultOptions{}))
	d.drain(60*time.Second, d.approved("evt-rb-ev-b", 2))
	if k := d.snap("evt-rb-ev-b").Plan.SealKey; k != release.SealKeyID(newKey) {
		t.Fatalf("plan B sealed by %q, want NEW's id", k)
	}
	// Step 4: NEW alone, one TTL, the old environment gone.
	d.secrets.put(secretARN(keyEvent), newKey)
	d.waitTTL()
	d.retireOldest()
	d.coldStart()
	d.publish(newKey, contract.DetailJobCompleted, b.ResultPayload("it-IT", releasetest.ResultOptions{}))
	d.drain(90*time.Second, d.delivered("evt-rb-ev-b"))
	d.finish("evt-rb-ev-a", "evt-rb-ev-b")
}

// TestIntegrationRunbookCMSAndEvidenceKeys: docs/security.md "CMS and
// evidence keys" for both HMAC keys the coordinator signs requests with,
// rotated without a cold start (the sets are re-read every TTL).
func TestIntegrationRunbookCMSAndEvidenceKeys(t *testing.T) {
	d := newDeployment(t)
	newCMS, newEvidence := seed("cms"), seed("evidence")
	ev := d.fx.EventKey
	a := d.startRelease(ev, "evt-rb-hm-a", "fr-FR", "de-DE", "it-IT")
	// Step 1: the CMS and the provider accept NEW as well.
	d.cms.Accept([][]byte{oldCMSKey, newCMS}, nil, nil)
	d.ev.Accept(oldEvidenceKey, newEvidence)
	// Step 2: NEW,OLD and one TTL: the functions sign with NEW.
	d.secrets.put(secretARN(keyCMS), newCMS, oldCMSKey)
	d.secrets.put(secretARN(keyEvidence), newEvidence, oldEvidenceKey)
	d.waitTTL()
	d.publish(ev, contract.DetailJobCompleted, a.ResultPayload("de-DE", releasetest.ResultOptions{}))
	d.drain(60*time.Second, d.approved("evt-rb-hm-a", 2))
	// Step 3 (nothing is signed by the other side). Step 4: NEW alone,
	// one TTL, then the other side drops OLD.
	d.secrets.put(secretARN(keyCMS), newCMS)
	d.secrets.put(secretARN(keyEvidence), newEvidence)
	d.waitTTL()
	d.cms.Accept([][]byte{newCMS}, nil, nil)
	d.ev.Accept(newEvidence)
	d.publish(ev, contract.DetailJobCompleted, a.ResultPayload("it-IT", releasetest.ResultOptions{}))
	d.drain(90*time.Second, d.delivered("evt-rb-hm-a"))
	d.finish("evt-rb-hm-a")
}

// TestIntegrationRunbookApprovalKey: docs/security.md "Approval and
// publication keys" for the approval seed. Approvals stored under OLD
// stay valid after the switch (finding 2: they were re-checked with the
// current key only and blocked the release as approval.invalid).
func TestIntegrationRunbookApprovalKey(t *testing.T) {
	d := newDeployment(t)
	ev, oldSeed, newSeed := d.fx.EventKey, d.fx.ApprovalSeed, seed("approval")
	oldPub, newPub := ed25519.NewKeyFromSeed(oldSeed).Public().(ed25519.PublicKey), ed25519.NewKeyFromSeed(newSeed).Public().(ed25519.PublicKey)
	a := d.startRelease(ev, "evt-rb-ap-a", "fr-FR", "de-DE", "it-IT")
	// Step 1: the CMS trusts NEW as well.
	d.cms.Accept(nil, nil, []ed25519.PublicKey{oldPub, newPub})
	// Step 2: OLD,NEW and new environments: OLD still signs, both verify.
	d.secrets.put(secretARN(keyApproval), oldSeed, newSeed)
	d.coldStart()
	d.publish(ev, contract.DetailJobCompleted, a.ResultPayload("de-DE", releasetest.ResultOptions{}))
	d.drain(60*time.Second, d.approved("evt-rb-ap-a", 2))
	// Once the function timeout has passed, no environment without NEW is
	// left. Step 3: NEW,OLD and new environments: NEW signs.
	d.retireOldest()
	d.secrets.put(secretARN(keyApproval), newSeed, oldSeed)
	d.coldStart()
	d.publish(ev, contract.DetailJobCompleted, a.ResultPayload("it-IT", releasetest.ResultOptions{}))
	d.drain(90*time.Second, d.delivered("evt-rb-ap-a"))
	snap := d.snap("evt-rb-ap-a")
	ids := map[string]int{}
	for _, apv := range snap.Approvals {
		ids[apv.KeyID]++
	}
	if ids[release.KeyID(oldPub)] != 2 || ids[release.KeyID(newPub)] != 1 {
		t.Fatalf("approval key ids %v", ids)
	}
	d.finish("evt-rb-ap-a")
}

// TestIntegrationRunbookPublicationKey: the same runbook for the
// publication seed, with a delivery prepared (bundle signed) under OLD and
// sent after the switch (finding 2: cms.delivery.invalid, final).
func TestIntegrationRunbookPublicationKey(t *testing.T) {
	d := newDeployment(t)
	ev, oldSeed, newSeed := d.fx.EventKey, d.fx.PublicationKey, seed("publication")
	oldPub, newPub := ed25519.NewKeyFromSeed(oldSeed).Public().(ed25519.PublicKey), ed25519.NewKeyFromSeed(newSeed).Public().(ed25519.PublicKey)
	a := d.startRelease(ev, "evt-rb-pub-a", "fr-FR", "de-DE")
	d.cms.Accept(nil, []ed25519.PublicKey{oldPub, newPub}, nil)
	d.secrets.put(secretARN(keyPublication), oldSeed, newSeed)
	d.coldStart()
	// The delivery is prepared under OLD, not yet sent.
	d.publish(ev, contract.DetailJobCompleted, a.ResultPayload("de-DE", releasetest.ResultOptions{}))
	d.drain(60*time.Second, func() bool { return d.snap("evt-rb-pub-a").Delivery != nil })
	if s := d.snap("evt-rb-pub-a").Delivery; s.Status == release.StateSucceeded || s.KeyID != release.KeyID(oldPub) {
		t.Fatalf("delivery before the switch: %+v", s)
	}
	d.retireOldest()
	d.secrets.put(secretARN(keyPublication), newSeed, oldSeed)
	d.coldStart()
	d.retireOldest()
	b := d.startRelease(ev, "evt-rb-pub-b", "fr-FR")
	_ = b
	d.drain(90*time.Second, func() bool { return d.delivered("evt-rb-pub-a")() && d.delivered("evt-rb-pub-b")() })
	if k := d.snap("evt-rb-pub-b").Delivery.KeyID; k != release.KeyID(newPub) {
		t.Fatalf("delivery after the switch signed by %s", k)
	}
	d.finish("evt-rb-pub-a", "evt-rb-pub-b")
}

// TestIntegrationRunbookReceiptIssuer: docs/security.md "Receipt issuer
// keys": the quality issuer rotates its key under the same issuer name
// (finding 8: an issuer name could not appear twice, so there was no way
// to trust both keys).
func TestIntegrationRunbookReceiptIssuer(t *testing.T) {
	d := newDeployment(t)
	ev := d.fx.EventKey
	name, oldKey := d.fx.IssuerFor(release.KindQuality)
	newKey := ed25519.NewKeyFromSeed(seed("issuer"))
	a := d.startRelease(ev, "evt-rb-iss-a", "fr-FR", "de-DE", "it-IT")
	// Step 1: trust both keys (a configuration change: new environments).
	d.env[envIssuersQuality] = name + "=" + hex.EncodeToString(oldKey.Public().(ed25519.PublicKey)) + "," +
		name + "=" + hex.EncodeToString(newKey.Public().(ed25519.PublicKey))
	d.coldStart()
	d.retireOldest() // after the function timeout
	d.publish(ev, contract.DetailJobCompleted, a.ResultPayload("de-DE", releasetest.ResultOptions{}))
	d.drain(60*time.Second, d.approved("evt-rb-iss-a", 2))
	// Step 2: the issuer signs with NEW.
	d.resp.Fixture.IssuerKey = newKey
	d.publish(ev, contract.DetailJobCompleted, a.ResultPayload("it-IT", releasetest.ResultOptions{}))
	d.drain(90*time.Second, d.delivered("evt-rb-iss-a"))
	// Step 3: trust NEW alone.
	d.env[envIssuersQuality] = name + "=" + hex.EncodeToString(newKey.Public().(ed25519.PublicKey))
	d.coldStart()
	d.retireOldest()
	d.startRelease(ev, "evt-rb-iss-b", "fr-FR")
	d.drain(90*time.Second, d.delivered("evt-rb-iss-b"))
	d.finish("evt-rb-iss-a", "evt-rb-iss-b")
}

// TestIntegrationMalformedKeySecretIsLoud: finding 7. A secret changed to
// a malformed set ("NEW,OLD,": a trailing comma) keeps the set in use
// (nothing refused) and says so: one ERROR line naming the key and its
// secret, never a key.
func TestIntegrationMalformedKeySecretIsLoud(t *testing.T) {
	d := newDeployment(t)
	ev, newKey := d.fx.EventKey, seed("event")
	d.secrets.putRaw(secretARN(keyEvent), hex.EncodeToString(newKey)+","+hex.EncodeToString(ev)+",")
	d.waitTTL()
	a := d.startRelease(ev, "evt-rb-bad-a", "fr-FR")
	d.drain(60*time.Second, d.delivered("evt-rb-bad-a"))
	logs := d.logs.String()
	var line string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, secretkey.CodeReloadFailed) {
			line = l
			break
		}
	}
	if line == "" || !strings.Contains(line, `"level":"ERROR"`) || !strings.Contains(line, secretARN(keyEvent)) {
		t.Fatalf("no ERROR line naming the secret:\n%s", logs)
	}
	for _, k := range [][]byte{ev, newKey} {
		if strings.Contains(logs, hex.EncodeToString(k)) {
			t.Fatal("a key is in the logs")
		}
	}
	_ = a
}
