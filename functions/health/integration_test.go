package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/localeflow/localeflow/adapters/monitordb"
	"github.com/localeflow/localeflow/adapters/opsdb"
	"github.com/localeflow/localeflow/adapters/releasedb"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/health"
	"github.com/localeflow/localeflow/core/health/healthtest"
	"github.com/localeflow/localeflow/dev/localtest"
	"github.com/localeflow/localeflow/functions/health/handler"
	"github.com/localeflow/localeflow/internal/emf"
	"github.com/localeflow/localeflow/topology"
)

const base = int64(1_764_460_800_000)

// watchBlocked routes localeflow.health.blocked from the bus to a fresh
// queue (the deployment has no consumer of it; alarms and people do).
func watchBlocked(t *testing.T, topo topology.Topology) (*sqs.Client, string) {
	t.Helper()
	ctx := context.Background()
	q, eb := localtest.SQS(t), localtest.EventBridge(t)
	name := topo.Prefix + "-health-watch"
	created, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = q.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: created.QueueUrl}) })
	attrs, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: created.QueueUrl,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	pattern := fmt.Sprintf(`{"source":[%q],"detail-type":[%q]}`, contract.EventSource, contract.DetailHealthBlocked)
	rule := topo.Prefix + "-health-watch"
	if _, err := eb.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String(rule), EventBusName: aws.String(topo.BusName),
		EventPattern: aws.String(pattern), State: ebtypes.RuleStateEnabled}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_, _ = eb.RemoveTargets(ctx, &eventbridge.RemoveTargetsInput{Rule: aws.String(rule), EventBusName: aws.String(topo.BusName), Ids: []string{"watch"}})
		_, _ = eb.DeleteRule(ctx, &eventbridge.DeleteRuleInput{Name: aws.String(rule), EventBusName: aws.String(topo.BusName)})
	})
	if _, err := eb.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String(rule), EventBusName: aws.String(topo.BusName),
		Targets: []ebtypes.Target{{Id: aws.String("watch"), Arn: aws.String(attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)])}}}); err != nil {
		t.Fatal(err)
	}
	return q, aws.ToString(created.QueueUrl)
}

// receive polls the queue (short polls: kumo's long poll does not wake)
// for up to wait and returns the bodies received.
func receive(t *testing.T, q *sqs.Client, url string, wait time.Duration) []string {
	t.Helper()
	var bodies []string
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		out, err := q.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			bodies = append(bodies, aws.ToString(m.Body))
			_, _ = q.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle})
		}
		if len(bodies) > 0 {
			return bodies
		}
	}
	return bodies
}

func invokeFile(t *testing.T, h lambda.Handler, file string) ([]byte, error) {
	t.Helper()
	payload, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	return h.Invoke(context.Background(), payload)
}

// TestHealthFunctionOnLocalStack wires the function as a cold start does
// (build from LOCALEFLOW_* env) against DynamoDB Local and kumo: the URL
// answers 503 and the page while a record is failed, the schedule writes
// EMF and puts localeflow.health.blocked on the bus; after a requeue the
// URL answers 200 and the schedule publishes nothing.
func TestHealthFunctionOnLocalStack(t *testing.T) {
	localtest.Require(t)
	topo, res := localtest.Stack(t)
	q, watchURL := watchBlocked(t, topo)
	db := localtest.DynamoDB(t)
	ctx := context.Background()
	store, err := monitordb.New(db, topo.Monitor.Name)
	if err != nil {
		t.Fatal(err)
	}
	// Records of an hour ago: within every age limit.
	base := core.Millis(time.Now().Add(-time.Hour))
	for _, r := range []struct{ id, v string }{{"evt-failed", healthtest.Failed}, {"evt-watching", healthtest.Watching}} {
		if _, _, err := store.Create(ctx, healthtest.MonitorRecord(r.id, r.v, base)); err != nil {
			t.Fatal(err)
		}
	}
	if err := releasedb.New(db, topo.Release.Name).Put(ctx, healthtest.Evidence("evt-watching", "req-1", "pending", base), 0); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{envMonitorTable: topo.Monitor.Name, envReleaseTable: topo.Release.Name, envEventBus: res.BusName}
	var stdout bytes.Buffer
	h, err := build(ctx, func(k string) string { return env[k] }, &stdout, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	handler := lambda.NewHandler(h.Handle)

	out, err := invokeFile(t, handler, "url_get_json.json")
	var resp events.LambdaFunctionURLResponse
	if err != nil || json.Unmarshal(out, &resp) != nil {
		t.Fatalf("URL: %s %v", out, err)
	}
	var doc health.Report
	if err := json.Unmarshal([]byte(resp.Body), &doc); err != nil || resp.StatusCode != 503 || doc.Status != health.StatusBlocked ||
		doc.Monitor.Failed != 1 || doc.Monitor.Counts["watching"] != 1 || doc.Release.Evidence.Counts["pending"] != 1 {
		t.Fatalf("URL answer %d %s", resp.StatusCode, resp.Body)
	}
	out, _ = invokeFile(t, handler, "url_get_html.json")
	if err := json.Unmarshal(out, &resp); err != nil || resp.StatusCode != 503 || !strings.Contains(resp.Body, "evt-failed") ||
		!strings.Contains(resp.Body, "cms.http_503") {
		t.Fatalf("page %d", resp.StatusCode)
	}

	if out, err := invokeFile(t, handler, "scheduled.json"); err != nil || !strings.Contains(string(out), `"blocked"`) {
		t.Fatalf("scheduled: %s %v", out, err)
	}
	if !strings.Contains(stdout.String(), `"HealthBlocked":1`) || !strings.Contains(stdout.String(), `"Namespace":"Localeflow"`) {
		t.Fatalf("EMF: %s", stdout.String())
	}
	bodies := receive(t, q, watchURL, 10*time.Second)
	if len(bodies) != 1 {
		t.Fatalf("blocked events on the bus: %v", bodies)
	}
	var event struct {
		Source     string `json:"source"`
		DetailType string `json:"detail-type"`
		Detail     struct {
			Schema  string   `json:"schema"`
			Reasons []string `json:"reasons"`
		} `json:"detail"`
	}
	if err := json.Unmarshal([]byte(bodies[0]), &event); err != nil || event.Source != contract.EventSource ||
		event.DetailType != contract.DetailHealthBlocked || !slices.Equal(event.Detail.Reasons, []string{health.ReasonMonitorFailed}) ||
		strings.Contains(bodies[0], "evt-") {
		t.Fatalf("event %s (%v)", bodies[0], err)
	}

	// The operator requeues the failed change: health is ok again.
	requeuer, err := opsdb.NewRequeuer(store, db, topo.Monitor.Name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := requeuer.Requeue(ctx, "evt-failed", core.Millis(time.Now())); err != nil {
		t.Fatal(err)
	}
	out, _ = invokeFile(t, handler, "url_get_json.json")
	if err := json.Unmarshal(out, &resp); err != nil || resp.StatusCode != 200 || !strings.Contains(resp.Body, `"status":"ok"`) {
		t.Fatalf("after requeue: %d %s", resp.StatusCode, resp.Body)
	}
	stdout.Reset()
	if out, err := invokeFile(t, handler, "scheduled.json"); err != nil || !strings.Contains(string(out), `"ok"`) {
		t.Fatalf("scheduled after requeue: %s %v", out, err)
	}
	if !strings.Contains(stdout.String(), `"HealthBlocked":0`) {
		t.Fatalf("EMF after requeue: %s", stdout.String())
	}
	if bodies := receive(t, q, watchURL, time.Second); len(bodies) != 0 {
		t.Fatalf("an ok check published %v", bodies)
	}
}

// TestChangeOpenPastItsAgeOnLocalStack: health reported open counts, not
// ages, so a change the CMS kept non-terminal for weeks left health ok. A
// change registered 15 days ago and still watching now turns the
// scheduled check blocked with health.monitor.open_too_long (the default
// limit is 14 days), the EMF line carries its age and the ticket-severity
// flags, and the URL answers 503. A setting of 20 days keeps it ok.
func TestChangeOpenPastItsAgeOnLocalStack(t *testing.T) {
	localtest.Require(t)
	topo, res := localtest.Stack(t)
	db := localtest.DynamoDB(t)
	ctx := context.Background()
	store, err := monitordb.New(db, topo.Monitor.Name)
	if err != nil {
		t.Fatal(err)
	}
	created := core.Millis(time.Now().Add(-15 * 24 * time.Hour))
	rec := healthtest.MonitorRecord("evt-old", healthtest.Watching, created)
	// Polled a moment ago, next poll in 30 s: nothing is due or failed.
	rec.UpdatedMS, rec.NextPollMS = core.Millis(time.Now()), core.Millis(time.Now().Add(30*time.Second))
	if _, _, err := store.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	check := func(env map[string]string) (handler.ScheduledResult, string) {
		t.Helper()
		var stdout bytes.Buffer
		h, err := build(ctx, func(k string) string { return env[k] }, &stdout, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		out, err := invokeFile(t, lambda.NewHandler(h.Handle), "scheduled.json")
		var res handler.ScheduledResult
		if err != nil || json.Unmarshal(out, &res) != nil {
			t.Fatalf("scheduled: %s %v", out, err)
		}
		return res, stdout.String()
	}
	env := map[string]string{envMonitorTable: topo.Monitor.Name, envReleaseTable: topo.Release.Name, envEventBus: res.BusName}
	got, emfOut := check(env)
	if got.Status != health.StatusBlocked || !slices.Equal(got.Reasons, []string{health.ReasonChangeOpenTooLong}) {
		t.Fatalf("15-day-old open change: %+v", got)
	}
	for _, want := range []string{`"HealthBlocked":1`, `"HealthBlockedOperations":0`, `"HealthBlockedBusiness":0`, `"OldestOpenChangeSeconds":129`} {
		if !strings.Contains(emfOut, want) {
			t.Errorf("EMF lacks %s: %s", want, emfOut)
		}
	}
	// Lambda's ApplicationLogLevel at WARN: the metric line is still
	// written, with a level Lambda's filter keeps.
	t.Cleanup(func() { emf.SetLevel(slog.LevelInfo) })
	env[contract.EnvLambdaLogLevel] = "WARN"
	_, emfOut = check(env)
	kept := false
	for line := range strings.Lines(emfOut) {
		var doc struct {
			Level string          `json:"level"`
			AWS   json.RawMessage `json:"_aws"`
		}
		if json.Unmarshal([]byte(line), &doc) == nil && doc.AWS != nil {
			kept = kept || doc.Level == "WARN" && strings.Contains(line, `"HealthBlocked":1`)
		}
	}
	if !kept {
		t.Fatalf("no EMF line Lambda keeps at WARN: %s", emfOut)
	}
	delete(env, contract.EnvLambdaLogLevel)
	env[contract.EnvHealthMaxChangeAge] = "480h"
	if got, _ := check(env); got.Status != health.StatusOK {
		t.Fatalf("with a 20-day limit: %+v", got)
	}
}
