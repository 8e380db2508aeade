package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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
	"github.com/localeflow/localeflow/internal/localtest"
)

// TestIntegrationBootstrapUnderRIE runs the real Lambda binary under
// aws-lambda-rie against the local stack, the signed evidence server and
// the verifying CMS delivery server: the testdata plan and jobs, then the
// step messages the function queued, until the release is delivered.
func TestIntegrationBootstrapUnderRIE(t *testing.T) {
	localtest.Require(t)
	rie := os.Getenv("LOCALEFLOW_RIE")
	if rie == "" {
		t.Skip("LOCALEFLOW_RIE is not set (make test sets it)")
	}
	_, res := localtest.Stack(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "bootstrap")
	build := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build bootstrap: %v\n%s", err, out)
	}

	fx := releasetest.NewFixture()
	approval, publication := fx.Authorities()
	evidenceKey, cmsKey := []byte("evidence-hmac-key-0123456789"), []byte("cms-hmac-key-0123456789")
	ev := evidencetest.New(evidenceKey, &releasetest.Responder{Fixture: fx})
	defer ev.Close()
	cms := cmsdeliverytest.New(cmsKey, publication.PublicKey(), approval.PublicKey())
	defer cms.Close()

	port, apiPort := freePort(t), freePort(t)
	cmd := exec.Command(rie, "--runtime-interface-emulator-address", "127.0.0.1:"+port, "--runtime-api-address", "127.0.0.1:"+apiPort, bin)
	cmd.Env = append(os.Environ(),
		envReleaseTable+"="+res.ReleaseTable, envReleaseQueueURL+"="+res.ReleaseQueue.URL, envEventBus+"="+res.BusName,
		envEvidenceBaseURL+"="+ev.URL, envCMSBaseURL+"="+cms.URL,
		envReceiptIssuers+"="+fx.Issuer+"="+hex.EncodeToString(fx.IssuerKey.Public().(ed25519.PublicKey)),
		"LOCALEFLOW_EVENT_KEY_HEX="+hex.EncodeToString(fx.EventKey),
		"LOCALEFLOW_EVIDENCE_KEY_HEX="+hex.EncodeToString(evidenceKey),
		"LOCALEFLOW_CMS_KEY_HEX="+hex.EncodeToString(cmsKey),
		"LOCALEFLOW_APPROVAL_KEY_HEX="+hex.EncodeToString(fx.ApprovalSeed),
		"LOCALEFLOW_PUBLICATION_KEY_HEX="+hex.EncodeToString(fx.PublicationKey),
		envEvidenceTimeout+"=5s", envCMSTimeout+"=5s",
		"AWS_LAMBDA_FUNCTION_TIMEOUT=120",
	)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start rie: %v", err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() || testing.Verbose() {
			t.Logf("rie + bootstrap output:\n%s", logs.String())
		}
	}()
	url := "http://127.0.0.1:" + port + "/2015-03-31/functions/function/invocations"
	for _, f := range []string{"testdata/sqs_plan.json", "testdata/sqs_jobs.json"} {
		expectNoFailures(t, invokeRIE(t, url, readFile(t, f)))
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
		expectNoFailures(t, invokeRIE(t, url, raw))
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
		if bytes.Contains(logs.Bytes(), []byte(secret)) {
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

func invokeRIE(t *testing.T, url string, payload []byte) []byte {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Post(url, "application/json", bytes.NewReader(payload))
		if err == nil {
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("invoke: http %d %v: %s", resp.StatusCode, err, body)
			}
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("rie did not answer: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
