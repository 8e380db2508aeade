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
	f.Fuzz(func(t *testing.T, body string) {
		b := setup(t)
		resp, err := b.h.HandleSQS(b.ctxT(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m", Body: body}}})
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("body %q: %+v %v\n%s", body, resp, err, b.logs.String())
		}
	})
}
