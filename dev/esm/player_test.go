package esm

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

func batchOf(ids ...string) events.SQSEvent {
	var ev events.SQSEvent
	for _, id := range ids {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: id})
	}
	return ev
}

func TestFailedItems(t *testing.T) {
	ev := batchOf("m1", "m2", "m3")
	tests := []struct {
		name    string
		resp    string
		want    []string
		invalid bool
	}{
		{"EmptyPayloadIsSuccess", ``, nil, false},
		{"NullIsSuccess", `null`, nil, false},
		{"EmptyObjectIsSuccess", `{}`, nil, false},
		{"NullListIsSuccess", `{"batchItemFailures":null}`, nil, false},
		{"EmptyListIsSuccess", `{"batchItemFailures":[]}`, nil, false},
		{"OneFailure", `{"batchItemFailures":[{"itemIdentifier":"m2"}]}`, []string{"m2"}, false},
		{"TwoFailures", `{"batchItemFailures":[{"itemIdentifier":"m3"},{"itemIdentifier":"m1"}]}`, []string{"m1", "m3"}, false},
		{"NotJSON", `Task timed out after 2.00 seconds`, nil, true},
		{"NotAnObject", `"ok"`, nil, true},
		{"ListNotAList", `{"batchItemFailures":{"itemIdentifier":"m1"}}`, nil, true},
		{"EmptyIdentifier", `{"batchItemFailures":[{"itemIdentifier":""}]}`, nil, true},
		{"NullIdentifier", `{"batchItemFailures":[{"itemIdentifier":null}]}`, nil, true},
		{"BadKeyName", `{"batchItemFailures":[{"itemId":"m1"}]}`, nil, true},
		{"UnknownMessageID", `{"batchItemFailures":[{"itemIdentifier":"m9"}]}`, nil, true},
		{"IdentifierNotString", `{"batchItemFailures":[{"itemIdentifier":1}]}`, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FailedItems([]byte(tc.resp), ev)
			if tc.invalid {
				if !errors.Is(err, ErrInvalidResponse) {
					t.Fatalf("err = %v, want ErrInvalidResponse", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for id := range got {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			if !slices.Equal(ids, tc.want) {
				t.Fatalf("failed = %v, want %v", ids, tc.want)
			}
		})
	}
}

// fakeQueue serves one receive of msgs and answers deletes: handles in
// stale come back as ReceiptHandleIsInvalid.
type fakeQueue struct {
	msgs    []types.Message
	stale   map[string]bool
	deleted []string
	calls   []string
}

func (f *fakeQueue) ReceiveMessage(_ context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	f.calls = append(f.calls, "ReceiveMessage")
	n := min(int(in.MaxNumberOfMessages), len(f.msgs))
	out := f.msgs[:n]
	f.msgs = f.msgs[n:]
	return &sqs.ReceiveMessageOutput{Messages: out}, nil
}

func (f *fakeQueue) DeleteMessage(_ context.Context, in *sqs.DeleteMessageInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	f.calls = append(f.calls, "DeleteMessage")
	h := aws.ToString(in.ReceiptHandle)
	if f.stale[h] {
		return nil, &smithy.GenericAPIError{Code: "ReceiptHandleIsInvalid", Message: "stale"}
	}
	f.deleted = append(f.deleted, h)
	return &sqs.DeleteMessageOutput{}, nil
}

func (f *fakeQueue) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	f.calls = append(f.calls, "DeleteMessageBatch")
	out := &sqs.DeleteMessageBatchOutput{}
	for _, e := range in.Entries {
		h := aws.ToString(e.ReceiptHandle)
		if f.stale[h] {
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("ReceiptHandleIsInvalid"), SenderFault: true})
			continue
		}
		f.deleted = append(f.deleted, h)
		out.Successful = append(out.Successful, types.DeleteMessageBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func queued(ids ...string) []types.Message {
	out := make([]types.Message, len(ids))
	for i, id := range ids {
		out[i] = types.Message{MessageId: aws.String(id), ReceiptHandle: aws.String("rh-" + id), Body: aws.String(id)}
	}
	return out
}

type answer []byte

func (a answer) Invoke(context.Context, []byte) ([]byte, error) { return a, nil }

// TestStaleDeletesAreSettledInBothDeleteModes: the runner's batch deletes
// and the proof player's single deletes treat a stale receipt handle the
// same way (counted, settled, not an error); other messages are deleted.
func TestStaleDeletesAreSettledInBothDeleteModes(t *testing.T) {
	for _, each := range []bool{false, true} {
		q := &fakeQueue{msgs: queued("m1", "m2", "m3"), stale: map[string]bool{"rh-m2": true}}
		p := &Player{SQS: q, QueueURL: "http://q", BatchSize: 10, Invoker: answer(`{"batchItemFailures":[{"itemIdentifier":"m3"}]}`), DeleteEach: each}
		b, err := p.PollOnce(context.Background())
		if err != nil || b.DeleteErr != nil {
			t.Fatalf("DeleteEach=%v: %v %v", each, err, b.DeleteErr)
		}
		if b.Received != 3 || b.Deleted != 1 || b.StaleDeletes != 1 || len(b.Settled) != 2 || b.Settled[1].MessageId != "m2" ||
			!slices.Equal(b.FailedIDs, []string{"m3"}) || !slices.Equal(q.deleted, []string{"rh-m1"}) {
			t.Fatalf("DeleteEach=%v: batch %+v, deleted %v", each, b, q.deleted)
		}
		wantDeletes := map[bool][]string{false: {"ReceiveMessage", "DeleteMessageBatch"}, true: {"ReceiveMessage", "DeleteMessage", "DeleteMessage"}}[each]
		if !slices.Equal(q.calls, wantDeletes) {
			t.Fatalf("DeleteEach=%v: calls %v", each, q.calls)
		}
	}
}

// TestSelectChoosesTheInvokedMessages: what Select leaves out is neither
// invoked nor deleted by the player; the rest go in Select's order.
func TestSelectChoosesTheInvokedMessages(t *testing.T) {
	q := &fakeQueue{msgs: queued("m1", "m2", "m3")}
	var got events.SQSEvent
	inv := invokerFunc(func(_ context.Context, payload []byte) ([]byte, error) {
		return nil, json.Unmarshal(payload, &got)
	})
	p := &Player{SQS: q, QueueURL: "http://q", QueueARN: "arn:q", Region: "us-east-1", BatchSize: 10, Invoker: inv,
		Select: func(_ context.Context, msgs []types.Message) ([]types.Message, error) {
			return []types.Message{msgs[2], msgs[0]}, nil
		}}
	b, err := p.PollOnce(context.Background())
	if err != nil || b.Received != 3 || len(b.Records) != 2 {
		t.Fatalf("batch %+v, err %v", b, err)
	}
	if len(got.Records) != 2 || got.Records[0].MessageId != "m3" || got.Records[1].MessageId != "m1" ||
		got.Records[0].EventSourceARN != "arn:q" || got.Records[0].Attributes["ApproximateReceiveCount"] != "1" {
		t.Fatalf("event %+v", got)
	}
	if !slices.Equal(q.deleted, []string{"rh-m3", "rh-m1"}) {
		t.Fatalf("deleted %v", q.deleted)
	}
}

type invokerFunc func(ctx context.Context, payload []byte) ([]byte, error)

func (f invokerFunc) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	return f(ctx, payload)
}
