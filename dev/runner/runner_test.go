package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/localeflow/localeflow/dev/bootstrap"
	"github.com/localeflow/localeflow/topology"
)

func TestRIEInvokeClassifiesAnswers(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		body     string
		wantType string
	}{
		{"Success", 200, `{"batchItemFailures":[]}`, ""},
		{"EmptySuccess", 200, ``, ""},
		{"HandlerError", 200, `{"errorMessage":"boom","errorType":"errorString"}`, "errorString"},
		{"Timeout", 200, `Task timed out after 2.00 seconds`, "Runtime.InvalidResponse"},
		{"Panic", 502, `{"errorMessage":"p","errorType":"string","stackTrace":[]}`, "string"},
		{"Crash", 502, `exit status 2`, "Runtime.HTTP502"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			out, err := (&RIE{URL: srv.URL}).Invoke(context.Background(), []byte(`{}`))
			var fe *FunctionError
			switch {
			case tc.wantType == "" && err != nil:
				t.Fatalf("err = %v", err)
			case tc.wantType == "" && string(out) != tc.body:
				t.Fatalf("out = %q", out)
			case tc.wantType != "" && (!errors.As(err, &fe) || fe.Type != tc.wantType):
				t.Fatalf("err = %v, want FunctionError %s", err, tc.wantType)
			}
		})
	}
}

// fakeSQS is an in-memory queue for the unit tests of the mapping's
// bookkeeping; the queue semantics themselves are tested against kumo.
type fakeSQS struct {
	mu         sync.Mutex
	visible    []types.Message
	deleted    []string
	receiveErr error
	receives   []int32
}

func (f *fakeSQS) ReceiveMessage(_ context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.receiveErr != nil {
		return nil, f.receiveErr
	}
	f.receives = append(f.receives, in.MaxNumberOfMessages)
	n := min(int(in.MaxNumberOfMessages), len(f.visible))
	out := f.visible[:n]
	f.visible = f.visible[n:]
	return &sqs.ReceiveMessageOutput{Messages: out}, nil
}

func (f *fakeSQS) DeleteMessage(_ context.Context, in *sqs.DeleteMessageInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted = append(f.deleted, aws.ToString(in.ReceiptHandle))
	return &sqs.DeleteMessageOutput{}, nil
}

func (f *fakeSQS) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &sqs.DeleteMessageBatchOutput{}
	for _, e := range in.Entries {
		f.deleted = append(f.deleted, aws.ToString(e.ReceiptHandle))
		out.Successful = append(out.Successful, types.DeleteMessageBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func messages(n int) []types.Message {
	out := make([]types.Message, n)
	for i := range out {
		id := fmt.Sprintf("m%02d", i)
		out[i] = types.Message{MessageId: aws.String(id), ReceiptHandle: aws.String("rh-" + id), Body: aws.String(`{"n":` + fmt.Sprint(i) + `}`),
			Attributes: map[string]string{"ApproximateReceiveCount": "1"}}
	}
	return out
}

// recorder is a fake Lambda that records the events it got and answers by
// a function of the batch.
type recorder struct {
	mu     sync.Mutex
	events []events.SQSEvent
	answer func(events.SQSEvent) ([]byte, error)
}

func (r *recorder) Invoke(_ context.Context, payload []byte) ([]byte, error) {
	var ev events.SQSEvent
	if err := json.Unmarshal(payload, &ev); err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
	return r.answer(ev)
}

func failIDs(ids ...string) []byte {
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	for _, id := range ids {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
	}
	b, _ := json.Marshal(resp)
	return b
}

func TestPollOnceSettlesTheBatch(t *testing.T) {
	tests := []struct {
		name        string
		queued      int
		batch       int
		answer      func(events.SQSEvent) ([]byte, error)
		wantInvoked int
		wantDeleted []string
		wantFailed  int
		wantErr     bool
	}{
		{"AllSucceed", 3, 10, func(events.SQSEvent) ([]byte, error) { return failIDs(), nil }, 3, []string{"rh-m00", "rh-m01", "rh-m02"}, 0, false},
		{"PartialFailureKeepsOnlyTheFailed", 3, 10, func(events.SQSEvent) ([]byte, error) { return failIDs("m01"), nil }, 3, []string{"rh-m00", "rh-m02"}, 1, false},
		{"FunctionErrorKeepsAll", 3, 10, func(events.SQSEvent) ([]byte, error) { return nil, &FunctionError{Type: "errorString"} }, 3, nil, 3, true},
		{"InvalidResponseKeepsAll", 2, 10, func(events.SQSEvent) ([]byte, error) { return failIDs("not-in-batch"), nil }, 2, nil, 2, true},
		{"BatchSizeBoundsTheBatch", 5, 2, func(events.SQSEvent) ([]byte, error) { return nil, nil }, 2, []string{"rh-m00", "rh-m01"}, 0, false},
		{"LargeBatchTakesSeveralReceives", 25, 25, func(events.SQSEvent) ([]byte, error) { return []byte(`{}`), nil }, 25, nil, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := &fakeSQS{visible: messages(tc.queued)}
			rec := &recorder{answer: tc.answer}
			m := &Mapping{Function: "fn", SQS: q, QueueURL: "http://q", QueueARN: "arn:aws:sqs:us-east-1:000000000000:q", Region: "us-east-1", BatchSize: tc.batch, Invoker: rec}
			res, err := m.PollOnce(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(rec.events) != 1 || len(rec.events[0].Records) != tc.wantInvoked {
				t.Fatalf("invocations %d, records %v", len(rec.events), rec.events)
			}
			r0 := rec.events[0].Records[0]
			if r0.EventSource != "aws:sqs" || r0.EventSourceARN != m.QueueARN || r0.AWSRegion != "us-east-1" || r0.ReceiptHandle != "rh-m00" || r0.Attributes["ApproximateReceiveCount"] != "1" {
				t.Fatalf("record shape %+v", r0)
			}
			if tc.wantDeleted != nil && !slices.Equal(q.deleted, tc.wantDeleted) {
				t.Fatalf("deleted %v, want %v", q.deleted, tc.wantDeleted)
			}
			if len(q.deleted) != res.Deleted || res.Failed != tc.wantFailed || (res.Err != nil) != tc.wantErr {
				t.Fatalf("result %+v, deleted %v", res, q.deleted)
			}
			if tc.wantErr && len(q.deleted) != 0 {
				t.Fatal("a failed batch deleted messages")
			}
		})
	}
}

func TestPollOnceEmptyQueueDoesNotInvoke(t *testing.T) {
	rec := &recorder{answer: func(events.SQSEvent) ([]byte, error) { return nil, nil }}
	m := &Mapping{SQS: &fakeSQS{}, QueueURL: "http://q", BatchSize: 10, Invoker: rec}
	res, err := m.PollOnce(context.Background())
	if err != nil || res.Messages != 0 || len(rec.events) != 0 {
		t.Fatalf("res %+v err %v invocations %d", res, err, len(rec.events))
	}
}

func TestPollOnceReceiveError(t *testing.T) {
	m := &Mapping{SQS: &fakeSQS{receiveErr: errors.New("down")}, QueueURL: "http://q", BatchSize: 10, Invoker: &recorder{}}
	if _, err := m.PollOnce(context.Background()); err == nil {
		t.Fatal("receive error not reported")
	}
}

func TestMappingValidation(t *testing.T) {
	valid := func() *Mapping {
		return &Mapping{SQS: &fakeSQS{}, QueueURL: "http://q", BatchSize: 10, Invoker: &recorder{}}
	}
	tests := []struct {
		name   string
		mutate func(*Mapping)
	}{
		{"NoSQS", func(m *Mapping) { m.SQS = nil }},
		{"NoInvoker", func(m *Mapping) { m.Invoker = nil }},
		{"NoQueue", func(m *Mapping) { m.QueueURL = "" }},
		{"ZeroBatch", func(m *Mapping) { m.BatchSize = 0 }},
		{"HugeBatch", func(m *Mapping) { m.BatchSize = MaxBatchSize + 1 }},
		{"FractionalVisibility", func(m *Mapping) { m.VisibilityTimeout = 1500 * time.Millisecond }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := valid()
			tc.mutate(m)
			if _, err := m.PollOnce(context.Background()); err == nil {
				t.Fatal("invalid mapping accepted")
			}
		})
	}
}

func TestScheduleFiresScheduledEvents(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var got []map[string]any
	inv := InvokerFunc(func(_ context.Context, payload []byte) ([]byte, error) {
		var ev map[string]any
		if err := json.Unmarshal(payload, &ev); err != nil {
			return nil, err
		}
		mu.Lock()
		got = append(got, ev)
		if len(got) == 3 {
			cancel()
		}
		mu.Unlock()
		return []byte(`{"polled":0}`), nil
	})
	s := &Schedule{Name: "p-sweep", RuleARN: "arn:aws:events:us-east-1:000000000000:rule/p-sweep", Every: 10 * time.Millisecond, Invoker: inv}
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 || s.Fired() != 3 {
		t.Fatalf("fired %d (%d events)", s.Fired(), len(got))
	}
	ids := map[any]bool{}
	for _, ev := range got {
		res, _ := ev["resources"].([]any)
		if ev["detail-type"] != "Scheduled Event" || ev["source"] != "aws.events" || len(res) != 1 || res[0] != s.RuleARN ||
			ev["version"] != "0" || ev["region"] != "us-east-1" || ev["account"] != "000000000000" {
			t.Fatalf("event %v", ev)
		}
		if _, err := time.Parse(time.RFC3339, ev["time"].(string)); err != nil {
			t.Fatalf("time %v", ev["time"])
		}
		if d, ok := ev["detail"].(map[string]any); !ok || len(d) != 0 {
			t.Fatalf("detail %v", ev["detail"])
		}
		ids[ev["id"]] = true
	}
	if len(ids) != 3 {
		t.Fatal("event ids repeat")
	}
}

func TestFromTopology(t *testing.T) {
	topo := topology.New("demo")
	res := bootstrap.Resources{
		PollQueue:    bootstrap.QueueResource{Logical: topo.PollQueue.Logical, URL: "http://q/poll", ARN: "arn:poll"},
		ReleaseQueue: bootstrap.QueueResource{Logical: topo.RelQueue.Logical, URL: "http://q/release", ARN: "arn:release"},
	}
	inv := &recorder{}
	st, err := FromTopology(topo, res, &fakeSQS{}, map[string]Invoker{"poller": inv, "coordinator": inv}, Options{Speedup: 12})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st.Missing, []string{"health"}) {
		t.Fatalf("missing %v", st.Missing)
	}
	if len(st.Mappings) != 2 || st.Mappings[0].QueueURL != "http://q/poll" || st.Mappings[0].BatchSize != topo.PollQueue.BatchSize ||
		st.Mappings[0].Timeout != topology.PollerTimeoutSeconds*time.Second || st.Mappings[1].QueueARN != "arn:release" {
		t.Fatalf("mappings %+v", st.Mappings)
	}
	if len(st.Schedules) != 2 || st.Schedules[0].Every != 5*time.Second || st.Schedules[1].Every != 25*time.Second ||
		st.Schedules[0].RuleARN != "arn:aws:events:us-east-1:000000000000:rule/demo-sweep" {
		t.Fatalf("schedules %+v", st.Schedules)
	}
}
