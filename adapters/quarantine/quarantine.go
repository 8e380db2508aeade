// Package quarantine keeps the SQS messages a consumer rejects for good (a
// bad signature, an idempotency collision, an invalid dispatch or
// envelope): before the consumer acknowledges such a message, Reject puts
// its body on the quarantine queue with the rejection code as a message
// attribute, writes one MessagesRejected metric line (CloudWatch Embedded
// Metric Format, dimensions Function and Function+Code) and logs one WARN
// line with ids and codes only. An operator lists and replays quarantined
// messages with `localeflow quarantine`.
//
// If the quarantine send fails, Reject returns a retryable error: the
// consumer then reports the message as a batch item failure, so it is
// redelivered (and reaches the DLQ after maxReceiveCount), never dropped.
package quarantine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/internal/emf"
)

// Message attributes of a quarantined message.
const (
	// AttrCode is the stable code the message was rejected with.
	AttrCode = "localeflow.code"
	// AttrSource is the topology Logical name of the queue the message came
	// from (PollQueue, ReleaseQueue); a replay sends it back there.
	AttrSource = "localeflow.source"
	// AttrMessageID is the message id on the source queue.
	AttrMessageID = "localeflow.message_id"
)

// Metric names.
const (
	Namespace  = contract.MetricNamespace
	MetricName = contract.MetricMessagesRejected
)

// CodeSendFailed: the quarantine queue refused the message (retryable).
const CodeSendFailed = "quarantine.send_failed"

// SQSAPI is the one SQS method a Rejecter calls.
type SQSAPI interface {
	SendMessage(ctx context.Context, params *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

var _ SQSAPI = (*sqs.Client)(nil)

// Rejecter quarantines, counts and logs rejected messages of one consumer.
// Every field is optional: without a queue the message is only counted and
// logged (local runs without the queue).
type Rejecter struct {
	// SQS and QueueURL name the quarantine queue.
	SQS      SQSAPI
	QueueURL string
	// Source is the Logical name of the consumer's queue.
	Source string
	// Function is the Function dimension of the metric ("poller").
	Function string
	// Deployment is the Deployment dimension of the metric: the resource
	// prefix, so two deployments in one account count apart. Empty means
	// DefaultDeployment.
	Deployment string
	// Metrics receives the EMF lines (os.Stdout in Lambda); nil discards.
	Metrics io.Writer
	// Log receives the WARN line; nil discards.
	Log   *slog.Logger
	Clock core.Clock

	mu sync.Mutex // serializes metric lines
}

// Reject quarantines body (when a queue is configured), then counts and
// logs the rejection. A non-nil error means the message must not be
// acknowledged.
func (r *Rejecter) Reject(ctx context.Context, messageID, body, code string) error {
	if r == nil {
		return nil
	}
	if r.SQS != nil && r.QueueURL != "" {
		_, err := r.SQS.SendMessage(ctx, &sqs.SendMessageInput{
			QueueUrl:    aws.String(r.QueueURL),
			MessageBody: aws.String(body),
			MessageAttributes: map[string]types.MessageAttributeValue{
				AttrCode:      stringAttr(code),
				AttrSource:    stringAttr(r.Source),
				AttrMessageID: stringAttr(messageID),
			},
		})
		if err != nil {
			return core.Wrap(CodeSendFailed, true, fmt.Errorf("quarantine %s: %w", messageID, err))
		}
	}
	r.metric(code)
	if r.Log != nil {
		r.Log.WarnContext(ctx, "message rejected and quarantined", "message_id", messageID, "code", code,
			"quarantined", r.SQS != nil && r.QueueURL != "")
	}
	return nil
}

func stringAttr(v string) types.MessageAttributeValue {
	if v == "" {
		v = "-"
	}
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
}

// DefaultDeployment is the Deployment dimension when none is configured
// (the default resource prefix).
const DefaultDeployment = emf.DefaultDeployment

// MetricLine is the EMF document of one rejection: MessagesRejected = 1
// under the dimension sets [Deployment, Function] and
// [Deployment, Function, Code].
func MetricLine(deployment, function, code string, at time.Time) []byte {
	return emf.Line(deployment, at.UnixMilli(),
		map[string]string{contract.MetricFunctionDimension: function, contract.MetricCodeDimension: code},
		emf.Group{
			Dimensions: [][]string{{contract.MetricFunctionDimension}, {contract.MetricFunctionDimension, contract.MetricCodeDimension}},
			Metrics:    []emf.Metric{{Name: MetricName, Value: 1}},
		})
}

func (r *Rejecter) metric(code string) {
	if r.Metrics == nil {
		return
	}
	now := time.Now()
	if r.Clock != nil {
		now = r.Clock.Now()
	}
	line := append(MetricLine(r.Deployment, r.Function, code, now), '\n')
	r.mu.Lock()
	defer r.mu.Unlock()
	_, _ = r.Metrics.Write(line)
}
