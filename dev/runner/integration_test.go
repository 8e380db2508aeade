package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/localeflow/localeflow/dev/localtest"
)

// testQueue creates a queue with a 1 s visibility timeout and a DLQ after
// maxReceive receives on the local stack, deleted at the end of the test.
func testQueue(t *testing.T, maxReceive int) (client *sqs.Client, url, arn, dlqURL string) {
	t.Helper()
	localtest.Require(t)
	client = localtest.SQS(t)
	ctx := context.Background()
	name := localtest.UniquePrefix(t)
	create := func(name string, attrs map[string]string) (string, string) {
		out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
		if err != nil {
			t.Fatalf("create queue %s: %v", name, err)
		}
		t.Cleanup(func() { _, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}) })
		a, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.QueueUrl), a.Attributes["QueueArn"]
	}
	dlqURL, dlqARN := create(name+"-dlq", nil)
	policy, _ := json.Marshal(map[string]string{"deadLetterTargetArn": dlqARN, "maxReceiveCount": fmt.Sprint(maxReceive)})
	url, arn = create(name, map[string]string{"VisibilityTimeout": "1", "RedrivePolicy": string(policy)})
	return client, url, arn, dlqURL
}

func send(t *testing.T, client *sqs.Client, url string, bodies ...string) {
	t.Helper()
	for _, b := range bodies {
		if _, err := client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(b)}); err != nil {
			t.Fatal(err)
		}
	}
}

// pollUntil calls PollOnce until a batch arrives or the deadline passes.
func pollUntil(t *testing.T, m *Mapping, within time.Duration) BatchResult {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		res, err := m.PollOnce(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if res.Messages > 0 || time.Now().After(deadline) {
			return res
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func bodies(ev events.SQSEvent) []string {
	var out []string
	for _, r := range ev.Records {
		out = append(out, r.Body)
	}
	slices.Sort(out)
	return out
}

func TestIntegrationPartialBatchFailureReturnsOnlyTheFailedMessage(t *testing.T) {
	client, url, arn, _ := testQueue(t, 5)
	send(t, client, url, "a", "b", "c")
	rec := &recorder{answer: func(ev events.SQSEvent) ([]byte, error) {
		var failed []string
		for _, r := range ev.Records {
			if r.Body == "b" && r.Attributes["ApproximateReceiveCount"] == "1" {
				failed = append(failed, r.MessageId)
			}
		}
		return failIDs(failed...), nil
	}}
	m := &Mapping{Function: "fn", SQS: client, QueueURL: url, QueueARN: arn, Region: "us-east-1", BatchSize: 10, Invoker: rec}

	first := pollUntil(t, m, 5*time.Second)
	if first.Messages != 3 || first.Deleted != 2 || first.Failed != 1 || first.Err != nil {
		t.Fatalf("first batch %+v", first)
	}
	if res, _ := m.PollOnce(context.Background()); res.Messages != 0 {
		t.Fatalf("the failed message was visible again at once: %+v", res)
	}
	second := pollUntil(t, m, 10*time.Second)
	got := rec.events[len(rec.events)-1]
	if second.Messages != 1 || second.Deleted != 1 || !slices.Equal(bodies(got), []string{"b"}) ||
		got.Records[0].Attributes["ApproximateReceiveCount"] != "2" || got.Records[0].EventSourceARN != arn {
		t.Fatalf("second batch %+v: %+v", second, got)
	}
	time.Sleep(1500 * time.Millisecond)
	if res, _ := m.PollOnce(context.Background()); res.Messages != 0 {
		t.Fatalf("deleted messages came back: %+v", res)
	}
}

func TestIntegrationFunctionErrorFailsTheWholeBatch(t *testing.T) {
	client, url, arn, _ := testQueue(t, 5)
	send(t, client, url, "a", "b")
	var calls atomic.Int64
	rec := &recorder{answer: func(events.SQSEvent) ([]byte, error) {
		if calls.Add(1) == 1 {
			return nil, &FunctionError{Type: "Runtime.InvalidResponse", Message: "Task timed out after 120.00 seconds"}
		}
		return failIDs(), nil
	}}
	m := &Mapping{Function: "fn", SQS: client, QueueURL: url, QueueARN: arn, BatchSize: 10, Invoker: rec}
	first := pollUntil(t, m, 5*time.Second)
	if first.Messages != 2 || first.Deleted != 0 || first.Err == nil {
		t.Fatalf("first batch %+v", first)
	}
	second := pollUntil(t, m, 10*time.Second)
	if second.Messages != 2 || second.Deleted != 2 || !slices.Equal(bodies(rec.events[1]), []string{"a", "b"}) {
		t.Fatalf("second batch %+v", second)
	}
}

// The DLQ move is the queue's own RedrivePolicy (kumo implements it, as
// SQS does): after maxReceiveCount failed receives the message is in the
// DLQ and never reaches the function again.
func TestIntegrationRedriveAfterMaxReceiveCount(t *testing.T) {
	const maxReceive = 3
	client, url, arn, dlqURL := testQueue(t, maxReceive)
	send(t, client, url, "poison", "fine")
	rec := &recorder{answer: func(ev events.SQSEvent) ([]byte, error) {
		var failed []string
		for _, r := range ev.Records {
			if r.Body == "poison" {
				failed = append(failed, r.MessageId)
			}
		}
		return failIDs(failed...), nil
	}}
	m := &Mapping{Function: "fn", SQS: client, QueueURL: url, QueueARN: arn, BatchSize: 10, Invoker: rec}
	deadline := time.Now().Add(30 * time.Second)
	var inDLQ []types.Message
	for time.Now().Before(deadline) && len(inDLQ) == 0 {
		if _, err := m.PollOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		out, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(dlqURL), MaxNumberOfMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		inDLQ = out.Messages
		time.Sleep(200 * time.Millisecond)
	}
	if len(inDLQ) != 1 || aws.ToString(inDLQ[0].Body) != "poison" {
		t.Fatalf("DLQ holds %d messages", len(inDLQ))
	}
	poisonSeen := 0
	for _, ev := range rec.events {
		for _, r := range ev.Records {
			if r.Body == "poison" {
				poisonSeen++
				if r.Attributes["ApproximateReceiveCount"] != fmt.Sprint(poisonSeen) {
					t.Fatalf("receive %d carries ApproximateReceiveCount %s", poisonSeen, r.Attributes["ApproximateReceiveCount"])
				}
			}
		}
	}
	if poisonSeen != maxReceive {
		t.Fatalf("the function saw the poison message %d times, want maxReceiveCount %d", poisonSeen, maxReceive)
	}
	time.Sleep(1500 * time.Millisecond)
	if res, _ := m.PollOnce(context.Background()); res.Messages != 0 {
		t.Fatalf("queue not empty after redrive: %+v", res)
	}
}

// TestIntegrationRIEAnswers runs a real function binary under
// aws-lambda-rie and checks how its answers are classified.
func TestIntegrationRIEAnswers(t *testing.T) {
	localtest.Require(t)
	rie := os.Getenv("LOCALEFLOW_RIE")
	if rie == "" {
		t.Skip("LOCALEFLOW_RIE is not set (make test sets it)")
	}
	bin := filepath.Join(t.TempDir(), "bootstrap")
	build := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", bin, "./testdata/fn")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := StartRIE(ctx, RIEConfig{RIE: rie, Bootstrap: bin, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	tests := []struct {
		mode     string
		wantType string
	}{
		{"echo", ""},
		{"error", "errorString"},
		{"sleep", "Runtime.InvalidResponse"},
		{"echo", ""},
		{"panic", "string"},
		{"echo", ""},
	}
	for i, tc := range tests {
		t.Run(fmt.Sprintf("%d-%s", i, tc.mode), func(t *testing.T) {
			payload := []byte(`{"mode":"` + tc.mode + `"}`)
			out, err := p.Invoke(ctx, payload)
			if tc.wantType == "" {
				if err != nil || string(out) != string(payload) {
					t.Fatalf("out %q err %v", out, err)
				}
				return
			}
			var fe *FunctionError
			if !errors.As(err, &fe) || fe.Type != tc.wantType {
				t.Fatalf("err %v, want FunctionError %s", err, tc.wantType)
			}
		})
	}
}
