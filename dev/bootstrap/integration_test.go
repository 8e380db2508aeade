package bootstrap_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/dev/bootstrap"
	"github.com/localeflow/localeflow/dev/localtest"
	"github.com/localeflow/localeflow/topology"
)

func ctxFor(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestApplyCreatesTheTopology checks every resource against the topology on
// the real local services, that a second Apply is a no-op, and that Destroy
// removes everything (twice without error).
func TestApplyCreatesTheTopology(t *testing.T) {
	localtest.Require(t)
	t.Parallel()
	ctx := ctxFor(t, 2*time.Minute)
	topo, res := localtest.Stack(t)
	db, q, eb := localtest.DynamoDB(t), localtest.SQS(t), localtest.EventBridge(t)

	t.Run("tables", func(t *testing.T) {
		for _, spec := range topo.Tables() {
			out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(spec.Name)})
			if err != nil {
				t.Fatalf("describe %s: %v", spec.Name, err)
			}
			d := out.Table
			if d.BillingModeSummary == nil || d.BillingModeSummary.BillingMode != ddbtypes.BillingModePayPerRequest {
				t.Errorf("%s: billing %+v, want PAY_PER_REQUEST", spec.Name, d.BillingModeSummary)
			}
			if got := aws.ToString(d.KeySchema[0].AttributeName); got != spec.Partition.Name {
				t.Errorf("%s: partition key %s, want %s", spec.Name, got, spec.Partition.Name)
			}
			if len(d.GlobalSecondaryIndexes) != len(spec.Indexes) {
				t.Fatalf("%s: %d indexes, want %d", spec.Name, len(d.GlobalSecondaryIndexes), len(spec.Indexes))
			}
			for _, g := range d.GlobalSecondaryIndexes {
				if g.Projection.ProjectionType != ddbtypes.ProjectionTypeKeysOnly {
					t.Errorf("%s/%s: projection %s, want KEYS_ONLY", spec.Name, aws.ToString(g.IndexName), g.Projection.ProjectionType)
				}
			}
			ttl, err := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(spec.Name)})
			if err != nil {
				t.Fatalf("describe TTL of %s: %v", spec.Name, err)
			}
			enabled := ttl.TimeToLiveDescription != nil && ttl.TimeToLiveDescription.TimeToLiveStatus == ddbtypes.TimeToLiveStatusEnabled &&
				aws.ToString(ttl.TimeToLiveDescription.AttributeName) == spec.TTLAttribute
			if enabled != (spec.TTLAttribute != "") {
				t.Errorf("%s: TTL %+v, want attribute %q", spec.Name, ttl.TimeToLiveDescription, spec.TTLAttribute)
			}
		}
	})

	t.Run("queues", func(t *testing.T) {
		for _, spec := range topo.Queues() {
			qr, ok := res.Queue(spec.Logical)
			if !ok {
				t.Fatalf("no resource for queue %s", spec.Logical)
			}
			out, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
				QueueUrl:       aws.String(qr.URL),
				AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll},
			})
			if err != nil {
				t.Fatalf("attributes of %s: %v", spec.Name, err)
			}
			if got := out.Attributes["VisibilityTimeout"]; got != strconv.Itoa(spec.VisibilityTimeoutSeconds) {
				t.Errorf("%s: visibility timeout %s, want %d", spec.Name, got, spec.VisibilityTimeoutSeconds)
			}
			target, n := redrivePolicy(t, out.Attributes["RedrivePolicy"])
			if target != qr.DLQARN || qr.DLQARN == "" {
				t.Errorf("%s: redrive target %s, want DLQ %s", spec.Name, target, qr.DLQARN)
			}
			if n != strconv.Itoa(spec.MaxReceiveCount) {
				t.Errorf("%s: maxReceiveCount %s, want %d", spec.Name, n, spec.MaxReceiveCount)
			}
		}
	})

	t.Run("rules", func(t *testing.T) {
		for _, spec := range topo.Rules {
			rule, err := eb.DescribeRule(ctx, &eventbridge.DescribeRuleInput{Name: aws.String(spec.Name), EventBusName: aws.String(topo.BusName)})
			if err != nil {
				t.Fatalf("describe rule %s: %v", spec.Name, err)
			}
			var pattern map[string][]string
			if err := json.Unmarshal([]byte(aws.ToString(rule.EventPattern)), &pattern); err != nil {
				t.Fatalf("rule %s pattern %q: %v", spec.Name, aws.ToString(rule.EventPattern), err)
			}
			if !reflect.DeepEqual(pattern["detail-type"], spec.DetailTypes) || !reflect.DeepEqual(pattern["source"], []string{contract.EventSource}) {
				t.Errorf("rule %s pattern %v", spec.Name, pattern)
			}
			targets, err := eb.ListTargetsByRule(ctx, &eventbridge.ListTargetsByRuleInput{Rule: aws.String(spec.Name), EventBusName: aws.String(topo.BusName)})
			if err != nil {
				t.Fatalf("targets of %s: %v", spec.Name, err)
			}
			want, _ := res.Queue(spec.TargetQueue)
			if len(targets.Targets) != 1 || aws.ToString(targets.Targets[0].Arn) != want.ARN {
				t.Errorf("rule %s targets %v, want only %s", spec.Name, targetARNs(targets.Targets), want.ARN)
			}
		}
	})

	t.Run("apply again is a no-op", func(t *testing.T) {
		again, err := bootstrap.Apply(ctx, localtest.Clients(t), topo)
		if err != nil {
			t.Fatalf("second Apply: %v", err)
		}
		if !reflect.DeepEqual(again, res) {
			t.Errorf("second Apply returned\n%+v\nwant\n%+v", again, res)
		}
	})

	t.Run("apply repairs a drifted queue", func(t *testing.T) {
		spec := topo.PollQueue
		_, err := q.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{
			QueueUrl: aws.String(res.PollQueue.URL),
			Attributes: map[string]string{
				"VisibilityTimeout": "30",
				"RedrivePolicy":     `{"deadLetterTargetArn":"` + res.PollQueue.DLQARN + `","maxReceiveCount":1}`,
			},
		})
		if err != nil {
			t.Fatalf("drift the queue: %v", err)
		}
		if _, err := bootstrap.Apply(ctx, localtest.Clients(t), topo); err != nil {
			t.Fatalf("Apply on a drifted stack: %v", err)
		}
		out, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl:       aws.String(res.PollQueue.URL),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll},
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := out.Attributes["VisibilityTimeout"]; got != strconv.Itoa(spec.VisibilityTimeoutSeconds) {
			t.Errorf("visibility timeout %s after Apply, want %d", got, spec.VisibilityTimeoutSeconds)
		}
		if _, n := redrivePolicy(t, out.Attributes["RedrivePolicy"]); n != strconv.Itoa(spec.MaxReceiveCount) {
			t.Errorf("maxReceiveCount %s after Apply, want %d", n, spec.MaxReceiveCount)
		}
	})

	t.Run("apply removes a stray rule target", func(t *testing.T) {
		rule := topo.Rules[0]
		other, _ := res.Queue(topo.Rules[1].TargetQueue)
		out, err := eb.PutTargets(ctx, &eventbridge.PutTargetsInput{
			Rule:         aws.String(rule.Name),
			EventBusName: aws.String(topo.BusName),
			Targets:      []ebtypes.Target{{Id: aws.String("stray"), Arn: aws.String(other.ARN)}},
		})
		if err != nil || out.FailedEntryCount != 0 {
			t.Fatalf("add a stray target: %v (%d failed)", err, out.FailedEntryCount)
		}
		if _, err := bootstrap.Apply(ctx, localtest.Clients(t), topo); err != nil {
			t.Fatalf("Apply: %v", err)
		}
		targets, err := eb.ListTargetsByRule(ctx, &eventbridge.ListTargetsByRuleInput{Rule: aws.String(rule.Name), EventBusName: aws.String(topo.BusName)})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := res.Queue(rule.TargetQueue)
		if len(targets.Targets) != 1 || aws.ToString(targets.Targets[0].Arn) != want.ARN {
			t.Fatalf("targets after Apply: %v, want only %s", targetARNs(targets.Targets), want.ARN)
		}
	})

	t.Run("destroy removes everything", func(t *testing.T) {
		clients := localtest.Clients(t)
		for i := range 2 {
			if err := bootstrap.Destroy(ctx, clients, topo); err != nil {
				t.Fatalf("Destroy #%d: %v", i+1, err)
			}
		}
		for _, spec := range topo.Tables() {
			_, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(spec.Name)})
			var nf *ddbtypes.ResourceNotFoundException
			if !errors.As(err, &nf) {
				t.Errorf("table %s after Destroy: %v", spec.Name, err)
			}
		}
		for _, spec := range topo.Queues() {
			for _, name := range []string{spec.Name, spec.DLQName} {
				if _, err := q.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)}); err == nil {
					t.Errorf("queue %s still exists", name)
				}
			}
		}
		if _, err := eb.DescribeEventBus(ctx, &eventbridge.DescribeEventBusInput{Name: aws.String(topo.BusName)}); err == nil {
			t.Errorf("bus %s still exists", topo.BusName)
		}
	})
}

func targetARNs(targets []ebtypes.Target) []string {
	arns := make([]string, 0, len(targets))
	for _, t := range targets {
		arns = append(arns, aws.ToString(t.Arn))
	}
	return arns
}

// redrivePolicy decodes an SQS RedrivePolicy attribute into its target ARN
// and maxReceiveCount (a number on AWS, a string on some emulators).
func redrivePolicy(t *testing.T, policy string) (string, string) {
	t.Helper()
	var p struct {
		DeadLetterTargetArn string `json:"deadLetterTargetArn"`
		MaxReceiveCount     any    `json:"maxReceiveCount"`
	}
	if err := json.Unmarshal([]byte(policy), &p); err != nil {
		t.Fatalf("redrive policy %q: %v", policy, err)
	}
	return p.DeadLetterTargetArn, fmt.Sprint(p.MaxReceiveCount)
}

// TestDynamoDBConditionalWriteRefused proves the store's authority
// mechanism on DynamoDB Local: a conditional put on an existing key fails
// with ConditionalCheckFailedException and leaves the item unchanged.
func TestDynamoDBConditionalWriteRefused(t *testing.T) {
	localtest.Require(t)
	t.Parallel()
	ctx := ctxFor(t, time.Minute)
	topo := localtest.Topology(t)
	db := localtest.DynamoDB(t)

	put := func(state string) error {
		item, err := attributevalue.MarshalMap(map[string]any{topology.AttrEventID: "evt-1", "state": state})
		if err != nil {
			t.Fatal(err)
		}
		_, err = db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:           aws.String(topo.Monitor.Name),
			Item:                item,
			ConditionExpression: aws.String("attribute_not_exists(#id)"),
			ExpressionAttributeNames: map[string]string{
				"#id": topology.AttrEventID,
			},
		})
		return err
	}
	if err := put("pending"); err != nil {
		t.Fatalf("first conditional put: %v", err)
	}
	err := put("watching")
	var ccf *ddbtypes.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t.Fatalf("second conditional put: got %v, want ConditionalCheckFailedException", err)
	}
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(topo.Monitor.Name),
		Key:            map[string]ddbtypes.AttributeValue{topology.AttrEventID: &ddbtypes.AttributeValueMemberS{Value: "evt-1"}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ State string }
	if err := attributevalue.UnmarshalMap(out.Item, &got); err != nil {
		t.Fatal(err)
	}
	if got.State != "pending" {
		t.Fatalf("state %q after refused write, want pending", got.State)
	}
}

// TestDynamoDBSparseWakeIndex checks what due discovery relies on: only
// items carrying both index keys are in the wake index, and removing the
// keys takes an item out of it.
func TestDynamoDBSparseWakeIndex(t *testing.T) {
	localtest.Require(t)
	t.Parallel()
	ctx := ctxFor(t, time.Minute)
	topo := localtest.Topology(t)
	db := localtest.DynamoDB(t)
	const shard = 3

	items := []map[string]any{
		{topology.AttrEventID: "due", topology.AttrWakeShard: shard, topology.AttrWakeMS: int64(1_700_000_000_000)},
		{topology.AttrEventID: "terminal", "state": "published"},
		{topology.AttrEventID: "other-shard", topology.AttrWakeShard: shard + 1, topology.AttrWakeMS: int64(1_700_000_000_000)},
	}
	for _, it := range items {
		av, err := attributevalue.MarshalMap(it)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(topo.Monitor.Name), Item: av}); err != nil {
			t.Fatalf("put %v: %v", it[topology.AttrEventID], err)
		}
	}
	query := func() []string {
		t.Helper()
		cond := expression.Key(topology.AttrWakeShard).Equal(expression.Value(shard)).
			And(expression.Key(topology.AttrWakeMS).LessThanEqual(expression.Value(int64(1_800_000_000_000))))
		expr, err := expression.NewBuilder().WithKeyCondition(cond).Build()
		if err != nil {
			t.Fatal(err)
		}
		out, err := db.Query(ctx, &dynamodb.QueryInput{
			TableName:                 aws.String(topo.Monitor.Name),
			IndexName:                 aws.String(topology.IndexWake),
			KeyConditionExpression:    expr.KeyCondition(),
			ExpressionAttributeNames:  expr.Names(),
			ExpressionAttributeValues: expr.Values(),
		})
		if err != nil {
			t.Fatalf("query wake index: %v", err)
		}
		var ids []string
		for _, it := range out.Items {
			ids = append(ids, it[topology.AttrEventID].(*ddbtypes.AttributeValueMemberS).Value)
		}
		return ids
	}
	if got := query(); !reflect.DeepEqual(got, []string{"due"}) {
		t.Fatalf("wake index shard %d holds %v, want [due]", shard, got)
	}
	upd, err := expression.NewBuilder().WithUpdate(expression.Remove(expression.Name(topology.AttrWakeShard)).Remove(expression.Name(topology.AttrWakeMS))).Build()
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(topo.Monitor.Name),
		Key:                      map[string]ddbtypes.AttributeValue{topology.AttrEventID: &ddbtypes.AttributeValueMemberS{Value: "due"}},
		UpdateExpression:         upd.Update(),
		ExpressionAttributeNames: upd.Names(),
	})
	if err != nil {
		t.Fatalf("remove index keys: %v", err)
	}
	if got := query(); len(got) != 0 {
		t.Fatalf("wake index still holds %v after removing the keys", got)
	}
}

// receiveWithin short-polls the queue until a message arrives or the
// deadline passes. kumo's long polls do not wake when a delayed message
// becomes visible, so short polls in a bounded loop are the portable way.
func receiveWithin(ctx context.Context, t *testing.T, q *sqs.Client, url string, within time.Duration) []sqstypes.Message {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 0})
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		if len(out.Messages) > 0 || time.Now().After(deadline) {
			return out.Messages
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestSQSDelaySeconds: a delayed message is invisible until its delay has
// passed, then delivered.
func TestSQSDelaySeconds(t *testing.T) {
	localtest.Require(t)
	t.Parallel()
	ctx := ctxFor(t, time.Minute)
	_, res := localtest.Stack(t)
	q := localtest.SQS(t)
	const delay = 2 * time.Second

	sent := time.Now()
	if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:     aws.String(res.PollQueue.URL),
		MessageBody:  aws.String(`{"event_id":"evt-delay"}`),
		DelaySeconds: int32(delay / time.Second),
	}); err != nil {
		t.Fatalf("send: %v", err)
	}
	if early := receiveWithin(ctx, t, q, res.PollQueue.URL, 0); len(early) != 0 {
		t.Fatalf("delayed message visible at once: %v", aws.ToString(early[0].Body))
	}
	msgs := receiveWithin(ctx, t, q, res.PollQueue.URL, delay+10*time.Second)
	if len(msgs) != 1 || aws.ToString(msgs[0].Body) != `{"event_id":"evt-delay"}` {
		t.Fatalf("after the delay got %d messages, want the one sent", len(msgs))
	}
	// A little slack for clock granularity between client and emulator.
	if elapsed := time.Since(sent); elapsed < delay-250*time.Millisecond {
		t.Fatalf("message visible after %v, before its %v delay", elapsed, delay)
	}
}

// TestEventBridgeRuleDeliversToQueue: PutEvents on the bus reaches the
// queue that the matching rule targets, and only that queue.
func TestEventBridgeRuleDeliversToQueue(t *testing.T) {
	localtest.Require(t)
	t.Parallel()
	ctx := ctxFor(t, time.Minute)
	topo, res := localtest.Stack(t)
	eb, q := localtest.EventBridge(t), localtest.SQS(t)

	entries := []ebtypes.PutEventsRequestEntry{
		{EventBusName: aws.String(topo.BusName), Source: aws.String("someone-else"), DetailType: aws.String(contract.DetailChangeDispatched), Detail: aws.String(`{"n":0}`)},
		{EventBusName: aws.String(topo.BusName), Source: aws.String(contract.EventSource), DetailType: aws.String(contract.DetailPlanAccepted), Detail: aws.String(`{"n":1}`)},
		{EventBusName: aws.String(topo.BusName), Source: aws.String(contract.EventSource), DetailType: aws.String(contract.DetailChangeDispatched), Detail: aws.String(`{"n":2}`)},
		{EventBusName: aws.String(topo.BusName), Source: aws.String(contract.EventSource), DetailType: aws.String(contract.DetailChangeHint), Detail: aws.String(`{"n":3}`)},
	}
	out, err := eb.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: entries})
	if err != nil {
		t.Fatalf("put events: %v", err)
	}
	if out.FailedEntryCount != 0 {
		t.Fatalf("put events: %d failed", out.FailedEntryCount)
	}
	tests := []struct {
		queue string
		url   string
		// want maps each detail-type expected on the queue to its detail.
		want map[string]string
	}{
		{"poll", res.PollQueue.URL, map[string]string{contract.DetailChangeDispatched: `{"n":2}`, contract.DetailChangeHint: `{"n":3}`}},
		{"release", res.ReleaseQueue.URL, map[string]string{contract.DetailPlanAccepted: `{"n":1}`}},
	}
	for _, tt := range tests {
		t.Run(tt.queue, func(t *testing.T) {
			var msgs []sqstypes.Message
			for deadline := time.Now().Add(10 * time.Second); len(msgs) < len(tt.want) && time.Now().Before(deadline); {
				msgs = append(msgs, receiveWithin(ctx, t, q, tt.url, time.Until(deadline))...)
			}
			// Anything else routed here would show up in the same or the
			// next receive.
			msgs = append(msgs, receiveWithin(ctx, t, q, tt.url, 0)...)
			if len(msgs) != len(tt.want) {
				t.Fatalf("%s queue got %d messages, want %d", tt.queue, len(msgs), len(tt.want))
			}
			got := map[string]string{}
			for _, m := range msgs {
				var envelope struct {
					Source     string          `json:"source"`
					DetailType string          `json:"detail-type"`
					Detail     json.RawMessage `json:"detail"`
				}
				if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &envelope); err != nil {
					t.Fatalf("body %q is not an event envelope: %v", aws.ToString(m.Body), err)
				}
				if envelope.Source != contract.EventSource {
					t.Fatalf("delivered source %q", envelope.Source)
				}
				got[envelope.DetailType] = string(envelope.Detail)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("delivered %v, want %v", got, tt.want)
			}
		})
	}
}
