package handler_test

import (
	"testing"
)

// FuzzSQSBody feeds arbitrary message bodies to the SQS path. With no
// transient fault anywhere (memory store, in-process CMS, fake SQS and
// bus), every body must be settled without panicking and acknowledged:
// a batch item failure would mean a body that can never succeed is sent
// back to SQS until it reaches the DLQ.
func FuzzSQSBody(f *testing.F) {

	for _, name := range []string{"sqs_intake.json", "sqs_poll.json", "sqs_malformed.json", "sqs_hint.json"} {
		var batch struct {
			Records []struct {
				Body string `json:"body"`
			} `json:"Records"`
		}
		mustUnmarshal(f, testdata(f, name), &batch)
		for _, r := range batch.Records {
			f.Add(r.Body, 1)
		}
	}

	f.Add(`{"schema":"localeflow.delayed.v1","kind":"poll","event_id":"evt-poller-0001","not_before_ms":0}`, 2)
	f.Add(`{"detail-type":"localeflow.change.dispatched","source":"localeflow","detail":{"change":{},"dispatch":{}}}`, 1)
	f.Add(`{"detail-type":"localeflow.change.hint","source":"localeflow","detail":{"event_id":"evt-poller-0001","site_id":"site-berlin"}}`, 2)
	f.Add(`{"detail-type":"localeflow.change.hint","source":"localeflow","detail":{"event_id":"evt-poller-0001"}}`, 1)
	e := setup(f)
	e.intake()
	f.Fuzz(func(t *testing.T, body string, receiveCount int) {
		e.t = t
		resp := e.invokeSQS(batchOf(t, receiveCount, body))
		if len(resp.BatchItemFailures) != 0 {
			t.Fatalf("body %q was not settled: %+v", body, resp.BatchItemFailures)
		}
	})
}
