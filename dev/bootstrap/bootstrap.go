package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/topology"
)

// DynamoDBAPI is the part of *dynamodb.Client that bootstrap uses.
type DynamoDBAPI interface {
	CreateTable(ctx context.Context, params *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, params *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	DeleteTable(ctx context.Context, params *dynamodb.DeleteTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteTableOutput, error)
	UpdateTimeToLive(ctx context.Context, params *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
	DescribeTimeToLive(ctx context.Context, params *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
}

// SQSAPI is the part of *sqs.Client that bootstrap uses.
type SQSAPI interface {
	CreateQueue(ctx context.Context, params *sqs.CreateQueueInput, optFns ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error)
	GetQueueUrl(ctx context.Context, params *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	GetQueueAttributes(ctx context.Context, params *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	SetQueueAttributes(ctx context.Context, params *sqs.SetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.SetQueueAttributesOutput, error)
	DeleteQueue(ctx context.Context, params *sqs.DeleteQueueInput, optFns ...func(*sqs.Options)) (*sqs.DeleteQueueOutput, error)
}

// EventBridgeAPI is the part of *eventbridge.Client that bootstrap uses.
type EventBridgeAPI interface {
	CreateEventBus(ctx context.Context, params *eventbridge.CreateEventBusInput, optFns ...func(*eventbridge.Options)) (*eventbridge.CreateEventBusOutput, error)
	DescribeEventBus(ctx context.Context, params *eventbridge.DescribeEventBusInput, optFns ...func(*eventbridge.Options)) (*eventbridge.DescribeEventBusOutput, error)
	DeleteEventBus(ctx context.Context, params *eventbridge.DeleteEventBusInput, optFns ...func(*eventbridge.Options)) (*eventbridge.DeleteEventBusOutput, error)
	PutRule(ctx context.Context, params *eventbridge.PutRuleInput, optFns ...func(*eventbridge.Options)) (*eventbridge.PutRuleOutput, error)
	DeleteRule(ctx context.Context, params *eventbridge.DeleteRuleInput, optFns ...func(*eventbridge.Options)) (*eventbridge.DeleteRuleOutput, error)
	PutTargets(ctx context.Context, params *eventbridge.PutTargetsInput, optFns ...func(*eventbridge.Options)) (*eventbridge.PutTargetsOutput, error)
	RemoveTargets(ctx context.Context, params *eventbridge.RemoveTargetsInput, optFns ...func(*eventbridge.Options)) (*eventbridge.RemoveTargetsOutput, error)
	ListTargetsByRule(ctx context.Context, params *eventbridge.ListTargetsByRuleInput, optFns ...func(*eventbridge.Options)) (*eventbridge.ListTargetsByRuleOutput, error)
}

var (
	_ DynamoDBAPI    = (*dynamodb.Client)(nil)
	_ SQSAPI         = (*sqs.Client)(nil)
	_ EventBridgeAPI = (*eventbridge.Client)(nil)
)

// Clients are the three service clients bootstrap talks to.
type Clients struct {
	DynamoDB    DynamoDBAPI
	SQS         SQSAPI
	EventBridge EventBridgeAPI
}

func (c Clients) validate() error {
	if c.DynamoDB == nil || c.SQS == nil || c.EventBridge == nil {
		return errors.New("bootstrap: Clients needs DynamoDB, SQS and EventBridge")
	}
	return nil
}

// Resources describes what Apply created (or found), as the functions and
// the tests need it: names, URLs and ARNs.
type Resources struct {
	Prefix       string        `json:"prefix"`
	MonitorTable string        `json:"monitor_table"`
	ReleaseTable string        `json:"release_table"`
	PollQueue    QueueResource `json:"poll_queue"`
	ReleaseQueue QueueResource `json:"release_queue"`
	// QuarantineQueue has no DLQ (its DLQ fields are empty).
	QuarantineQueue QueueResource `json:"quarantine_queue"`
	// EventDLQ is the dead-letter queue of the rule targets (no DLQ of its
	// own). The local stack's EventBridge (kumo) does not deliver to target
	// DLQs: the queue exists for the operator commands (localeflow dlq).
	EventDLQ QueueResource  `json:"event_dlq"`
	BusName  string         `json:"bus_name"`
	BusARN   string         `json:"bus_arn"`
	Rules    []RuleResource `json:"rules"`
}

// QueueResource is one queue and its dead-letter queue.
type QueueResource struct {
	Logical string `json:"logical"`
	Name    string `json:"name"`
	URL     string `json:"url"`
	ARN     string `json:"arn"`
	DLQName string `json:"dlq_name"`
	DLQURL  string `json:"dlq_url"`
	DLQARN  string `json:"dlq_arn"`
}

// RuleResource is one rule on the bus and the queue it delivers to.
type RuleResource struct {
	Name        string   `json:"name"`
	ARN         string   `json:"arn"`
	DetailTypes []string `json:"detail_types"`
	TargetQueue string   `json:"target_queue"`
	TargetARN   string   `json:"target_arn"`
}

// Queue returns the queue resource with the given topology Logical name.
func (r Resources) Queue(logical string) (QueueResource, bool) {
	for _, q := range []QueueResource{r.PollQueue, r.ReleaseQueue} {
		if q.Logical == logical {
			return q, true
		}
	}
	return QueueResource{}, false
}

// Apply creates every resource of topo that does not exist yet and returns
// their identities. It is safe to call again on a complete or partial stack.
func Apply(ctx context.Context, c Clients, topo topology.Topology) (Resources, error) {
	if err := c.validate(); err != nil {
		return Resources{}, err
	}
	if err := topology.ValidatePrefix(topo.Prefix); err != nil {
		return Resources{}, fmt.Errorf("bootstrap: %w", err)
	}
	res := Resources{Prefix: topo.Prefix, MonitorTable: topo.Monitor.Name, ReleaseTable: topo.Release.Name, BusName: topo.BusName}
	for _, t := range topo.Tables() {
		if err := ApplyTable(ctx, c.DynamoDB, t); err != nil {
			return Resources{}, err
		}
	}
	var err error
	if res.PollQueue, err = applyQueue(ctx, c.SQS, topo.PollQueue); err != nil {
		return Resources{}, err
	}
	if res.ReleaseQueue, err = applyQueue(ctx, c.SQS, topo.RelQueue); err != nil {
		return Resources{}, err
	}
	res.QuarantineQueue = QueueResource{Logical: topo.Quarantine.Logical, Name: topo.Quarantine.Name}
	if res.QuarantineQueue.URL, res.QuarantineQueue.ARN, err = ensureQueue(ctx, c.SQS, topo.Quarantine.Name, map[string]string{
		string(sqstypes.QueueAttributeNameMessageRetentionPeriod): strconv.Itoa(topo.Quarantine.RetentionSeconds),
	}); err != nil {
		return Resources{}, err
	}
	res.EventDLQ = QueueResource{Logical: topo.EventDLQ.Logical, Name: topo.EventDLQ.Name}
	if res.EventDLQ.URL, res.EventDLQ.ARN, err = ensureQueue(ctx, c.SQS, topo.EventDLQ.Name, map[string]string{
		string(sqstypes.QueueAttributeNameMessageRetentionPeriod): strconv.Itoa(topo.EventDLQ.RetentionSeconds),
	}); err != nil {
		return Resources{}, err
	}
	if res.BusARN, err = applyBus(ctx, c.EventBridge, topo.BusName); err != nil {
		return Resources{}, err
	}
	for _, r := range topo.Rules {
		q, ok := res.Queue(r.TargetQueue)
		if !ok {
			return Resources{}, fmt.Errorf("bootstrap: rule %s targets unknown queue %q", r.Name, r.TargetQueue)
		}
		rr, err := applyRule(ctx, c.EventBridge, topo.BusName, r, q)
		if err != nil {
			return Resources{}, err
		}
		res.Rules = append(res.Rules, rr)
	}
	return res, nil
}

// Destroy deletes every resource of topo that exists. Missing resources are
// not an error, so Destroy is idempotent too; it tries every resource and
// returns all failures joined.
func Destroy(ctx context.Context, c Clients, topo topology.Topology) error {
	if err := c.validate(); err != nil {
		return err
	}
	var errs []error
	for _, r := range topo.Rules {
		errs = append(errs, destroyRule(ctx, c.EventBridge, topo.BusName, r.Name))
	}
	errs = append(errs, destroyBus(ctx, c.EventBridge, topo.BusName))
	errs = append(errs, destroyQueue(ctx, c.SQS, topo.Quarantine.Name), destroyQueue(ctx, c.SQS, topo.EventDLQ.Name))
	for _, q := range topo.Queues() {
		errs = append(errs, destroyQueue(ctx, c.SQS, q.Name), destroyQueue(ctx, c.SQS, q.DLQName))
	}
	for _, t := range topo.Tables() {
		errs = append(errs, DestroyTable(ctx, c.DynamoDB, t.Name))
	}
	return errors.Join(errs...)
}

// errorCode returns the service error code of err, or "" when err is not a
// service error. Emulators do not always map their codes onto the SDK's
// typed errors (kumo answers a missing queue with the raw
// "AWS.SimpleQueueService.NonExistentQueue"), so matching is by code.
func errorCode(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode()
	}
	return ""
}

func hasCode(err error, codes ...string) bool {
	code := errorCode(err)
	if code == "" {
		return false
	}
	for _, c := range codes {
		if code == c {
			return true
		}
	}
	return false
}

// Names of the variables through which the functions receive the resource
// names (contract names; the CDK stack sets the same ones).
const (
	EnvMonitorTable    = contract.EnvMonitorTable
	EnvReleaseTable    = contract.EnvReleaseTable
	EnvPollQueueURL    = contract.EnvPollQueueURL
	EnvReleaseQueueURL = contract.EnvReleaseQueueURL
	EnvEventBus        = contract.EnvEventBus
	// EnvQuarantineQueueURL is the queue of rejected messages.
	EnvQuarantineQueueURL = contract.EnvQuarantineQueueURL
)

// Env returns the resource variables a function needs to run against these
// resources, e.g. under aws-lambda-rie on the local stack.
func (r Resources) Env() map[string]string {
	return map[string]string{
		EnvMonitorTable:       r.MonitorTable,
		EnvReleaseTable:       r.ReleaseTable,
		EnvPollQueueURL:       r.PollQueue.URL,
		EnvReleaseQueueURL:    r.ReleaseQueue.URL,
		EnvEventBus:           r.BusName,
		EnvQuarantineQueueURL: r.QuarantineQueue.URL,
	}
}
