package handler_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/localeflow/localeflow/adapters/delayqueue"
)

// invokeAs drives the handler with the Lambda context of request id.
func (b *bundle) invokeAs(t *testing.T, requestID string, raw []byte) {
	t.Helper()
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: requestID})
	if _, err := lambda.NewHandler(b.h.Handle).Invoke(ctx, raw); err != nil {
		t.Fatalf("invoke: %v", err)
	}
}

// TestEveryLogLineCarriesRequestID: the coordinator's own lines (evidence
// failed, approval, delivered, release blocked, plan and job stored) were
// logged without the invocation context, so they carried no request_id
// and on-call could not tie them to an invocation; the evidence request id
// now is evidence_request_id, so request_id is always the Lambda's.
func TestEveryLogLineCarriesRequestID(t *testing.T) {
	for _, tc := range []struct {
		name      string
		failFirst int
	}{{"delivered", 0}, {"evidence exhausted, blocked", 100}} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t)
			b.resp.FailFirst = tc.failFirst
			b.invokeAs(t, "req-plan", readTestdata(t, "sqs_plan.json"))
			b.invokeAs(t, "req-jobs", readTestdata(t, "sqs_jobs.json"))
			for i := 0; i < 30; i++ {
				batch := b.queue.take(t)
				if len(batch.Records) == 0 {
					break
				}
				for _, m := range batch.Records {
					env, err := delayqueue.Parse([]byte(m.Body))
					if err != nil {
						t.Fatal(err)
					}
					if at := env.NotBefore(); at.After(*b.now) {
						*b.now = at.Add(time.Millisecond)
					}
				}
				raw, err := json.Marshal(events.SQSEvent(batch))
				if err != nil {
					t.Fatal(err)
				}
				b.invokeAs(t, "req-step", raw)
			}
			lines, seen := 0, map[string]bool{}
			sc := bufio.NewScanner(bytes.NewReader(b.logs.Bytes()))
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				var rec map[string]any
				if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
					t.Fatalf("not JSON: %s", sc.Bytes())
				}
				if _, emf := rec["_aws"]; emf {
					continue
				}
				lines++
				seen[rec["msg"].(string)] = true
				if id, _ := rec["request_id"].(string); id == "" || id[:4] != "req-" {
					t.Errorf("line without the invocation's request_id: %s", sc.Bytes())
				}
				if bytes.Count(sc.Bytes(), []byte(`"request_id":`)) != 1 {
					t.Errorf("request_id twice: %s", sc.Bytes())
				}
			}
			want := map[string][]string{
				"delivered":                   {"plan stored", "job stored", "locale approved", "delivered"},
				"evidence exhausted, blocked": {"plan stored", "job stored", "evidence failed", "release blocked"},
			}[tc.name]
			for _, msg := range want {
				if !seen[msg] {
					t.Errorf("no %q line among %v", msg, seen)
				}
			}
			if lines < len(want) {
				t.Fatalf("%d lines", lines)
			}
		})
	}
}
