package handler_test

import (
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// FuzzSQSBody: any message body is settled (never a batch item failure:
// nothing here is a transient fault) and never panics.
func FuzzSQSBody(f *testing.F) {
	for _, name := range []string{"sqs_plan.json", "sqs_jobs.json", "sqs_invalid.json"} {
		raw := readTestdataF(f, name)
		var ev events.SQSEvent
		if err := jsonUnmarshal(raw, &ev); err != nil {
			f.Fatal(err)
		}
		for _, m := range ev.Records {
			f.Add(m.Body)
		}
	}
	f.Add(`{"schema":"localeflow.delayed.v1","kind":"release.run","event_id":"evt-h-1","not_before_ms":0}`)
	f.Fuzz(sqsBodyTarget(f))
}

// sqsBodyTarget builds the handler fixture once (keys, stores, handler)
// and returns the per-input check; each input only resets the log and the
// recorded sends. Building the fixture per input made the target manage
// under a thousand inputs a minute.
func sqsBodyTarget(tb testing.TB) func(t *testing.T, body string) {
	b := setup(tb)
	return func(t *testing.T, body string) {
		b.logs.Reset()
		b.queue.mu.Lock()
		b.queue.sent = nil
		b.queue.mu.Unlock()
		resp, err := b.h.HandleSQS(b.ctxT(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m", Body: body}}})
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("body %q: %+v %v\n%s", body, resp, err, b.logs.String())
		}
	}
}

// TestFuzzSQSBodyBuildsItsFixtureOnce: the fuzz target rebuilt the whole
// fixture for every input; it now builds it once for any number of inputs.
func TestFuzzSQSBodyBuildsItsFixtureOnce(t *testing.T) {
	before := setups.Load()
	target := sqsBodyTarget(t)
	for _, body := range []string{`{}`, `[]`, `{"schema":"x"}`, `{"detail-type":"x"}`, `not json`} {
		target(t, body)
	}
	if n := setups.Load() - before; n != 1 {
		t.Fatalf("%d fixtures built for 5 inputs, want 1", n)
	}
}
