package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/localeflow/localeflow/adapters/quarantine"
)

// memSQS is an in-memory SQS with visibility: a received message is
// hidden until its visibility is reset or it is deleted.
type memSQS struct {
	mu     sync.Mutex
	n      int
	queues map[string][]*memMsg
}

type memMsg struct {
	id, body string
	attrs    map[string]types.MessageAttributeValue
	hidden   bool
}

func (s *memSQS) GetQueueUrl(_ context.Context, in *sqs.GetQueueUrlInput, _ ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	return &sqs.GetQueueUrlOutput{QueueUrl: aws.String("https://sqs.local/" + *in.QueueName)}, nil
}

func (s *memSQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	id := fmt.Sprintf("q-%d", s.n)
	s.queues[*in.QueueUrl] = append(s.queues[*in.QueueUrl], &memMsg{id: id, body: *in.MessageBody, attrs: in.MessageAttributes})
	return &sqs.SendMessageOutput{MessageId: aws.String(id)}, nil
}

func (s *memSQS) ReceiveMessage(_ context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &sqs.ReceiveMessageOutput{}
	for _, m := range s.queues[*in.QueueUrl] {
		if m.hidden || len(out.Messages) == int(in.MaxNumberOfMessages) {
			continue
		}
		m.hidden = in.VisibilityTimeout > 0
		out.Messages = append(out.Messages, types.Message{MessageId: aws.String(m.id), Body: aws.String(m.body),
			ReceiptHandle: aws.String("rh-" + m.id), MessageAttributes: m.attrs,
			Attributes: map[string]string{"SentTimestamp": "1764460800000"}})
	}
	return out, nil
}

func (s *memSQS) find(url, receipt string) (int, *memMsg) {
	for i, m := range s.queues[url] {
		if "rh-"+m.id == receipt {
			return i, m
		}
	}
	return -1, nil
}

func (s *memSQS) DeleteMessage(_ context.Context, in *sqs.DeleteMessageInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i, _ := s.find(*in.QueueUrl, *in.ReceiptHandle); i >= 0 {
		s.queues[*in.QueueUrl] = append(s.queues[*in.QueueUrl][:i], s.queues[*in.QueueUrl][i+1:]...)
	}
	return &sqs.DeleteMessageOutput{}, nil
}

func (s *memSQS) ChangeMessageVisibility(_ context.Context, in *sqs.ChangeMessageVisibilityInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, m := s.find(*in.QueueUrl, *in.ReceiptHandle); m != nil {
		m.hidden = in.VisibilityTimeout > 0
	}
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}

func (s *memSQS) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	visible := 0
	for _, m := range s.queues[*in.QueueUrl] {
		if !m.hidden {
			visible++
		}
	}
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{"ApproximateNumberOfMessages": fmt.Sprint(visible)}}, nil
}

func (s *memSQS) count(url string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queues[url])
}

const (
	quarantineURL = "https://sqs.local/lf-quarantine"
	pollURL       = "https://sqs.local/lf-poll"
	releaseURL    = "https://sqs.local/lf-release"
)

// quarantineFixture puts n rejected messages on the quarantine queue the
// way the consumers do (quarantine.Rejecter), alternating sources.
func quarantineFixture(t *testing.T, n int) *memSQS {
	t.Helper()
	s := &memSQS{queues: map[string][]*memMsg{}}
	prev := newSQSAPI
	newSQSAPI = func(context.Context) (SQSAPI, error) { return s, nil }
	t.Cleanup(func() { newSQSAPI = prev })
	for i := range n {
		r := &quarantine.Rejecter{SQS: s, QueueURL: quarantineURL, Source: "PollQueue", Function: "poller"}
		if i%2 == 1 {
			r.Source = "ReleaseQueue"
		}
		if err := r.Reject(context.Background(), fmt.Sprintf("m-%d", i), fmt.Sprintf(`{"secret text":%d}`, i), "poller.dispatch.signature_invalid"); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// TestQuarantineListAndReplay: an operator could not see or replay
// rejected messages; `quarantine list` shows ids, codes and sources (never
// a body) and leaves them queued, `quarantine replay` sends them back to
// their source queue and removes them.
func TestQuarantineListAndReplay(t *testing.T) {
	s := quarantineFixture(t, 25)
	env := map[string]string{
		"LOCALEFLOW_QUARANTINE_QUEUE_URL": quarantineURL,
		"LOCALEFLOW_POLL_QUEUE_URL":       pollURL, "LOCALEFLOW_RELEASE_QUEUE_URL": releaseURL,
	}
	r := runCLI(env, "--json", "quarantine", "list")
	if r.code != exitOK {
		t.Fatalf("list: %d %s %s", r.code, r.out, r.err)
	}
	var view quarantineListView
	if err := json.Unmarshal([]byte(r.out), &view); err != nil || len(view.Messages) != 25 || view.Seen != 25 || !view.Complete {
		t.Fatalf("listed %+v (%v):\n%s", view.scanView, err, r.out)
	}
	listed := view.Messages
	if listed[0].MessageID != "m-0" || listed[0].Code != "poller.dispatch.signature_invalid" || listed[0].Source != "PollQueue" || listed[0].BodySHA256 == "" {
		t.Fatalf("first %+v", listed[0])
	}
	if strings.Contains(r.out, "secret text") {
		t.Fatal("list printed a message body")
	}
	if s.count(quarantineURL) != 25 {
		t.Fatal("list consumed messages")
	}
	// Listing again sees everything again (visibility was reset).
	if r := runCLI(env, "quarantine", "list"); r.code != exitOK || !strings.Contains(r.out, "25 quarantined") {
		t.Fatalf("second list: %d %s", r.code, r.out)
	}

	r = runCLI(env, "quarantine", "replay", "m-0", "m-1")
	if r.code != exitOK || !strings.Contains(r.out, "2 replayed") {
		t.Fatalf("replay: %d %s %s", r.code, r.out, r.err)
	}
	if s.count(pollURL) != 1 || s.count(releaseURL) != 1 || s.count(quarantineURL) != 23 {
		t.Fatalf("after replay: poll %d release %d quarantine %d", s.count(pollURL), s.count(releaseURL), s.count(quarantineURL))
	}
	if body := s.queues[pollURL][0].body; body != `{"secret text":0}` || len(s.queues[pollURL][0].attrs) != 0 {
		t.Fatalf("replayed body %q attrs %v", body, s.queues[pollURL][0].attrs)
	}
	if r := runCLI(env, "quarantine", "replay", "m-0"); r.code != exitBad || !strings.Contains(r.err, codeQuarantineNotFound) {
		t.Fatalf("replay of a gone id: %d %s", r.code, r.err)
	}
	if r := runCLI(env, "quarantine", "replay", "--all"); r.code != exitOK || !strings.Contains(r.out, "23 replayed of 23 seen") {
		t.Fatalf("replay --all: %d %s %s", r.code, r.out, r.err)
	}
	if s.count(quarantineURL) != 0 || s.count(pollURL)+s.count(releaseURL) != 25 {
		t.Fatal("replay --all left messages")
	}
}

func TestQuarantineUsage(t *testing.T) {
	quarantineFixture(t, 0)
	for _, args := range [][]string{
		{"quarantine"}, {"quarantine", "list", "x"}, {"quarantine", "replay"},
		{"quarantine", "replay", "m-1", "--all"}, {"quarantine", "purge"},
	} {
		if r := runCLI(nil, args...); r.code != exitUsage {
			t.Errorf("%v: exit %d", args, r.code)
		}
	}
}
