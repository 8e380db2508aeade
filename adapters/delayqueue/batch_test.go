package delayqueue_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/localeflow/localeflow/adapters/delayqueue"
	"github.com/localeflow/localeflow/core"
)

// batchSQS answers SendMessageBatch: entries whose Id is in failIDs of the
// request number fail; dropIDs are left out of the answer; err fails the
// whole request number errAt.
type batchSQS struct {
	requests [][]sqstypes.SendMessageBatchRequestEntry
	failIDs  map[int]map[string]bool
	dropIDs  map[int]map[string]bool
	errAt    int
}

func (f *batchSQS) SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	return nil, errors.New("single send used")
}

func (f *batchSQS) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	n := len(f.requests)
	f.requests = append(f.requests, in.Entries)
	if f.errAt == n+1 {
		return nil, errors.New("sqs unavailable")
	}
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		id := aws.ToString(e.Id)
		switch {
		case f.failIDs[n][id]:
			out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError")})
		case f.dropIDs[n][id]:
		default:
			out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String("m")})
		}
	}
	return out, nil
}

func envelopes(t *testing.T, n int, at time.Time) []delayqueue.Envelope {
	t.Helper()
	var out []delayqueue.Envelope
	for i := range n {
		e, err := delayqueue.NewEnvelope("poll", fmt.Sprintf("evt-%02d", i), "", at)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func TestSendBatchSendsTenPerRequestAndReportsEachEntry(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f := &batchSQS{
		failIDs: map[int]map[string]bool{0: {"3": true}},
		dropIDs: map[int]map[string]bool{1: {"0": true}},
	}
	q := delayqueue.New(f, "https://sqs.local/q")
	envs := envelopes(t, 23, now.Add(30*time.Second))
	envs[21] = delayqueue.Envelope{Schema: "x"} // invalid: never sent
	errs := q.SendBatch(context.Background(), envs, now)
	if len(f.requests) != 3 || len(f.requests[0]) != 10 || len(f.requests[1]) != 10 || len(f.requests[2]) != 2 {
		t.Fatalf("requests of %d entries", len(f.requests))
	}
	if d := f.requests[0][0].DelaySeconds; d != 30 {
		t.Fatalf("DelaySeconds %d", d)
	}
	for i, err := range errs {
		switch i {
		case 3, 10: // failed entry; entry missing from the answer
			if !core.HasCode(err, delayqueue.CodeSendFailed) || !core.IsRetryable(err) {
				t.Fatalf("envelope %d: %v, want retryable %s", i, err, delayqueue.CodeSendFailed)
			}
		case 21:
			if !core.HasCode(err, delayqueue.CodeEnvelopeInvalid) {
				t.Fatalf("invalid envelope: %v", err)
			}
		default:
			if err != nil {
				t.Fatalf("envelope %d: %v", i, err)
			}
		}
	}
}

func TestSendBatchRequestFailureFailsItsEntriesOnly(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f := &batchSQS{errAt: 2}
	errs := delayqueue.New(f, "https://sqs.local/q").SendBatch(context.Background(), envelopes(t, 15, now), now)
	for i, err := range errs {
		if failed := err != nil; failed != (i >= 10) || (failed && !core.HasCode(err, delayqueue.CodeSendFailed)) {
			t.Fatalf("envelope %d: %v", i, err)
		}
	}
}

// A client without SendMessageBatch sends one by one.
func TestSendBatchWithoutBatchAPISendsSingly(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f := &fakeSQS{}
	errs := delayqueue.New(f, "https://sqs.local/q").SendBatch(context.Background(), envelopes(t, 3, now), now)
	if len(f.sent) != 3 || errs[0] != nil || errs[2] != nil {
		t.Fatalf("sent %d, errs %v", len(f.sent), errs)
	}
}
