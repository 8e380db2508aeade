package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/localeflow/localeflow/adapters/cmsdelivery/cmsdeliverytest"
	"github.com/localeflow/localeflow/adapters/evidence/evidencetest"
	"github.com/localeflow/localeflow/adapters/releasedb"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/dev/localtest"
	"github.com/localeflow/localeflow/dev/rietest"
)

// TestIntegrationBootstrapUnderRIE runs the real Lambda binary under
// aws-lambda-rie against the local stack, the signed evidence server and
// the verifying CMS delivery server: the testdata plan and jobs, then the
// step messages the function queued, until the release is delivered.
func TestIntegrationBootstrapUnderRIE(t *testing.T) {
	localtest.Require(t)
	bin := rietest.Build(t)
	_, res := localtest.Stack(t)

	fx := releasetest.NewFixture()
	approval, publication := fx.Authorities()
	evidenceKey, cmsKey := []byte("evidence-hmac-key-0123456789"), []byte("cms-hmac-key-0123456789")
	ev := evidencetest.New(evidenceKey, &releasetest.Responder{Fixture: fx})
	defer ev.Close()
	cms := cmsdeliverytest.New(cmsKey, publication.PublicKey(), approval.PublicKey())
	defer cms.Close()

	fn := bin.Start(t, rieEnv(fx, res.ReleaseTable, res.ReleaseQueue.URL, res.BusName, ev.URL, cms.URL, evidenceKey, cmsKey)...)
	for _, f := range []string{"testdata/sqs_plan.json", "testdata/sqs_jobs.json"} {
		expectNoFailures(t, fn.Invoke(t, rietest.ReadFile(t, f)))
	}
	// Play the event source mapping for the steps the function queued.
	q := localtest.SQS(t)
	store := releasedb.New(localtest.DynamoDB(t), res.ReleaseTable)
	deadline := time.Now().Add(60 * time.Second)
	for {
		snap, err := store.Load(context.Background(), "evt-h-1")
		if err != nil {
			t.Fatal(err)
		}
		if snap.Delivery != nil && snap.Delivery.Status == release.StateSucceeded {
			if len(snap.Approvals) != 2 {
				t.Fatalf("%d approvals", len(snap.Approvals))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not delivered: %+v", snap.Delivery)
		}
		out, err := q.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(res.ReleaseQueue.URL), MaxNumberOfMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		var batch events.SQSEvent
		for _, m := range out.Messages {
			batch.Records = append(batch.Records, events.SQSMessage{MessageId: aws.ToString(m.MessageId), Body: aws.ToString(m.Body)})
		}
		raw, _ := json.Marshal(batch)
		expectNoFailures(t, fn.Invoke(t, raw))
		for _, m := range out.Messages {
			if _, err := q.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(res.ReleaseQueue.URL), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, rejected, _, bundles := cms.Stats(); rejected != 0 || len(bundles) != 1 {
		t.Fatalf("cms rejected %d, bundles %d", rejected, len(bundles))
	}
	for _, secret := range []string{"SECRET-SOURCE", "SECRET-TARGET", hex.EncodeToString(fx.EventKey)} {
		if bytes.Contains(fn.Logs(t), []byte(secret)) {
			t.Fatalf("function logs carry %q", secret)
		}
	}
}

func expectNoFailures(t *testing.T, out []byte) {
	t.Helper()
	var resp struct {
		BatchItemFailures []any `json:"batchItemFailures"`
	}
	if err := json.Unmarshal(out, &resp); err != nil || resp.BatchItemFailures == nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("response %s (%v)", out, err)
	}
}

// rieEnv is the function's environment for the local stack and the test
// evidence and CMS servers.
func rieEnv(fx releasetest.Fixture, table, queueURL, bus, evidenceURL, cmsURL string, evidenceKey, cmsKey []byte) []string {
	return []string{
		envReleaseTable + "=" + table, envReleaseQueueURL + "=" + queueURL, envEventBus + "=" + bus,
		envEvidenceBaseURL + "=" + evidenceURL, envCMSBaseURL + "=" + cmsURL, "LOCALEFLOW_ALLOW_INSECURE_HTTP=1",
		envIssuersQuality + "=" + issuerEnv(fx, release.KindQuality),
		envIssuersHumanReview + "=" + issuerEnv(fx, release.KindHumanReview),
		envIssuersIndependent + "=" + issuerEnv(fx, release.KindIndependentModelReview),
		"LOCALEFLOW_EVENT_KEY_HEX=" + hex.EncodeToString(fx.EventKey),
		// The fixture signs v1; v1 is refused unless accepted.
		envEventV1 + "=accept",
		"LOCALEFLOW_EVIDENCE_KEY_HEX=" + hex.EncodeToString(evidenceKey),
		"LOCALEFLOW_CMS_KEY_HEX=" + hex.EncodeToString(cmsKey),
		"LOCALEFLOW_APPROVAL_KEY_HEX=" + hex.EncodeToString(fx.ApprovalSeed),
		"LOCALEFLOW_PUBLICATION_KEY_HEX=" + hex.EncodeToString(fx.PublicationKey),
		envEvidenceTimeout + "=5s", envCMSTimeout + "=5s",
		"AWS_LAMBDA_FUNCTION_TIMEOUT=120",
	}
}
