package delayqueue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/localeflow/localeflow/adapters/delayqueue"
	"github.com/localeflow/localeflow/core"
)

type fakeSQS struct {
	sent []*sqs.SendMessageInput
	err  error
}

func (f *fakeSQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	f.sent = append(f.sent, in)
	if f.err != nil {
		return nil, f.err
	}
	return &sqs.SendMessageOutput{}, nil
}

var now = time.UnixMilli(1764460800123).UTC()

func TestDelay(t *testing.T) {
	tests := []struct {
		name string
		at   time.Time
		want int32
	}{
		{"past", now.Add(-time.Minute), 0},
		{"now", now, 0},
		{"1ms rounds up", now.Add(time.Millisecond), 1},
		{"exact seconds", now.Add(30 * time.Second), 30},
		{"fraction rounds up", now.Add(5*time.Second + 1), 6},
		{"cap", now.Add(900 * time.Second), 900},
		{"over cap", now.Add(time.Hour), 900},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := delayqueue.Delay(tt.at, now); got != tt.want {
				t.Fatalf("Delay = %d, want %d", got, tt.want)
			}
		})
	}
}

// A one-hour wait is chained: each early receipt re-sends the remainder
// until the message is due.
func TestChainingOverCap(t *testing.T) {
	var f fakeSQS
	q := delayqueue.New(&f, "https://sqs.local/q")
	at := now.Add(time.Hour + 1500*time.Millisecond)
	if err := q.Send(context.Background(), "poll", "evt-1", at, now); err != nil {
		t.Fatal(err)
	}
	clock := now
	var delays []int32
	for hops := 0; hops < 10; hops++ {
		msg := f.sent[len(f.sent)-1]
		delays = append(delays, msg.DelaySeconds)
		clock = clock.Add(time.Duration(msg.DelaySeconds) * time.Second)
		e, err := delayqueue.Parse([]byte(*msg.MessageBody))
		if err != nil {
			t.Fatal(err)
		}
		remaining, due := delayqueue.Due(e, clock)
		if due {
			if clock.Before(at) {
				t.Fatalf("due at %v before %v", clock, at)
			}
			want := []int32{900, 900, 900, 900, 2}
			if len(delays) != len(want) {
				t.Fatalf("delays %v, want %v", delays, want)
			}
			for i := range want {
				if delays[i] != want[i] {
					t.Fatalf("delays %v, want %v", delays, want)
				}
			}
			return
		}
		if remaining != at.Sub(clock) {
			t.Fatalf("remaining %v, want %v", remaining, at.Sub(clock))
		}
		if err := q.Resend(context.Background(), e, clock); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("never became due")
}

func TestSendFailureIsRetryable(t *testing.T) {
	f := fakeSQS{err: errors.New("throttled")}
	err := delayqueue.New(&f, "u").Send(context.Background(), "poll", "evt-1", now, now)
	if core.CodeOf(err) != delayqueue.CodeSendFailed || !core.IsRetryable(err) {
		t.Fatalf("err %v", err)
	}
}

func TestSendRejectsInvalid(t *testing.T) {
	var f fakeSQS
	q := delayqueue.New(&f, "u")
	for _, tt := range []struct{ kind, event string }{{"Poll", "evt"}, {"poll", "evt 1"}, {"", "evt"}, {"poll", ""}} {
		if err := q.Send(context.Background(), tt.kind, tt.event, now, now); core.CodeOf(err) != delayqueue.CodeEnvelopeInvalid {
			t.Fatalf("%q/%q: err %v", tt.kind, tt.event, err)
		}
	}
	if len(f.sent) != 0 {
		t.Fatal("invalid envelope sent")
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		body string
		ok   bool
	}{
		{"valid", `{"schema":"localeflow.delayed.v1","kind":"poll","event_id":"evt-1","not_before_ms":1764460800123}`, true},
		{"valid with ref", `{"schema":"localeflow.delayed.v1","kind":"release.step","event_id":"evt-1","ref":"job-7","not_before_ms":0}`, true},
		{"key order free", `{"not_before_ms":5,"event_id":"e","kind":"k","schema":"localeflow.delayed.v1"}`, true},
		{"wrong schema", `{"schema":"localeflow.delayed.v2","kind":"poll","event_id":"evt-1","not_before_ms":1}`, false},
		{"extra key", `{"schema":"localeflow.delayed.v1","kind":"poll","event_id":"evt-1","not_before_ms":1,"x":1}`, false},
		{"missing key", `{"schema":"localeflow.delayed.v1","kind":"poll","not_before_ms":1}`, false},
		{"duplicate key", `{"schema":"localeflow.delayed.v1","kind":"poll","kind":"poll","event_id":"evt-1","not_before_ms":1}`, false},
		{"empty ref", `{"schema":"localeflow.delayed.v1","kind":"poll","event_id":"evt-1","ref":"","not_before_ms":1}`, false},
		{"float time", `{"schema":"localeflow.delayed.v1","kind":"poll","event_id":"evt-1","not_before_ms":1.5}`, false},
		{"exponent time", `{"schema":"localeflow.delayed.v1","kind":"poll","event_id":"evt-1","not_before_ms":1e3}`, false},
		{"negative time", `{"schema":"localeflow.delayed.v1","kind":"poll","event_id":"evt-1","not_before_ms":-1}`, false},
		{"string time", `{"schema":"localeflow.delayed.v1","kind":"poll","event_id":"evt-1","not_before_ms":"1"}`, false},
		{"null time", `{"schema":"localeflow.delayed.v1","kind":"poll","event_id":"evt-1","not_before_ms":null}`, false},
		{"bool time", `{"schema":"localeflow.delayed.v1","kind":"poll","event_id":"evt-1","not_before_ms":true}`, false},
		{"huge time", `{"schema":"localeflow.delayed.v1","kind":"poll","event_id":"evt-1","not_before_ms":99999999999999999999}`, false},
		{"bad event", `{"schema":"localeflow.delayed.v1","kind":"poll","event_id":"evt/1","not_before_ms":1}`, false},
		{"bad kind", `{"schema":"localeflow.delayed.v1","kind":"POLL","event_id":"evt-1","not_before_ms":1}`, false},
		{"trailing data", `{"schema":"localeflow.delayed.v1","kind":"poll","event_id":"evt-1","not_before_ms":1} {}`, false},
		{"array", `[]`, false},
		{"null", `null`, false},
		{"empty", ``, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := delayqueue.Parse([]byte(tt.body))
			if (err == nil) != tt.ok {
				t.Fatalf("err %v, want ok=%v", err, tt.ok)
			}
			if err != nil && (core.CodeOf(err) != delayqueue.CodeEnvelopeInvalid || core.IsRetryable(err)) {
				t.Fatalf("err %v", err)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"schema":"localeflow.delayed.v1","kind":"poll","event_id":"evt-1","not_before_ms":1764460800123}`))
	f.Add([]byte(`{"schema":"localeflow.delayed.v1","kind":"release","event_id":"evt-1","ref":"job-7","not_before_ms":0}`))
	f.Add([]byte(`{"schema":"localeflow.delayed.v1","kind":"poll","kind":"x","event_id":"evt-1","not_before_ms":1}`))
	f.Add([]byte(`{"a":[{"b":null}],"c":1e400}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		e, err := delayqueue.Parse(body)
		if err != nil {
			if core.CodeOf(err) != delayqueue.CodeEnvelopeInvalid {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		// Whatever parses re-encodes and re-parses to the same envelope.
		out, err := e.Marshal()
		if err != nil {
			t.Fatalf("parsed envelope does not marshal: %v", err)
		}
		back, err := delayqueue.Parse(out)
		if err != nil || back != e {
			t.Fatalf("round trip: %+v -> %s -> %+v, %v", e, out, back, err)
		}
	})
}

// traceCtx is an invocation context as the Lambda runtime makes it (the
// trace header under the runtime's own key).
func traceCtx(h string) context.Context {
	return context.WithValue(context.Background(), "x-amzn-trace-id", h) //nolint:staticcheck // the runtime's own key
}

const traceHeader = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"

// TestDelayedMessageCarriesTheTraceHeader: the delayed SendMessage carried
// no AWSTraceHeader, so every poll of one change started its own trace.
// The message (single and batched) now carries the sending invocation's
// trace header; without one, no attribute.
func TestDelayedMessageCarriesTheTraceHeader(t *testing.T) {
	f := &fakeSQS{}
	q := delayqueue.New(f, "https://sqs.example/q")
	if err := q.Send(traceCtx(traceHeader), "poll", "evt-1", now.Add(time.Minute), now); err != nil {
		t.Fatal(err)
	}
	if err := q.Send(context.Background(), "poll", "evt-2", now.Add(time.Minute), now); err != nil {
		t.Fatal(err)
	}
	a := f.sent[0].MessageSystemAttributes["AWSTraceHeader"]
	if aws.ToString(a.DataType) != "String" || aws.ToString(a.StringValue) != traceHeader {
		t.Errorf("AWSTraceHeader = %+v", a)
	}
	if f.sent[1].MessageSystemAttributes != nil {
		t.Errorf("without a trace: %v", f.sent[1].MessageSystemAttributes)
	}
	b := &batchSQS{}
	e, err := delayqueue.NewEnvelope("poll", "evt-3", "", now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if errs := delayqueue.New(b, "https://sqs.example/q").SendBatch(traceCtx(traceHeader), []delayqueue.Envelope{e}, now); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if got := aws.ToString(b.requests[0][0].MessageSystemAttributes["AWSTraceHeader"].StringValue); got != traceHeader {
		t.Errorf("batched AWSTraceHeader = %q", got)
	}
}
