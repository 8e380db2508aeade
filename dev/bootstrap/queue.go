package bootstrap

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/localeflow/localeflow/topology"
)

// Codes an SQS endpoint answers for a missing queue: AWS's JSON protocol
// code, the query protocol's legacy code (kumo sends it raw).
var missingQueueCodes = []string{"QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue"}

// redrivePolicy is the SQS RedrivePolicy attribute value.
func redrivePolicy(dlqARN string, maxReceiveCount int) (string, error) {
	b, err := json.Marshal(struct {
		DeadLetterTargetArn string `json:"deadLetterTargetArn"`
		MaxReceiveCount     int    `json:"maxReceiveCount"`
	}{dlqARN, maxReceiveCount})
	if err != nil {
		return "", fmt.Errorf("bootstrap: encode redrive policy: %w", err)
	}
	return string(b), nil
}

func applyQueue(ctx context.Context, q SQSAPI, spec topology.Queue) (QueueResource, error) {
	res := QueueResource{Logical: spec.Logical, Name: spec.Name, DLQName: spec.DLQName}
	var err error
	res.DLQURL, res.DLQARN, err = ensureQueue(ctx, q, spec.DLQName, map[string]string{
		string(types.QueueAttributeNameMessageRetentionPeriod): strconv.Itoa(spec.DLQRetentionSeconds),
	})
	if err != nil {
		return QueueResource{}, err
	}
	policy, err := redrivePolicy(res.DLQARN, spec.MaxReceiveCount)
	if err != nil {
		return QueueResource{}, err
	}
	res.URL, res.ARN, err = ensureQueue(ctx, q, spec.Name, map[string]string{
		string(types.QueueAttributeNameVisibilityTimeout):      strconv.Itoa(spec.VisibilityTimeoutSeconds),
		string(types.QueueAttributeNameMessageRetentionPeriod): strconv.Itoa(spec.RetentionSeconds),
		string(types.QueueAttributeNameRedrivePolicy):          policy,
	})
	if err != nil {
		return QueueResource{}, err
	}
	return res, nil
}

// ensureQueue creates the queue with attrs or finds the existing one, and
// (re)sets attrs on it either way: AWS refuses a CreateQueue whose
// attributes differ from the existing queue's, some emulators silently
// return the existing queue unchanged, and both must end with attrs in
// force. It returns the queue's URL and ARN.
func ensureQueue(ctx context.Context, q SQSAPI, name string, attrs map[string]string) (string, string, error) {
	var url string
	out, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	switch {
	case err == nil:
		url = aws.ToString(out.QueueUrl)
	case hasCode(err, "QueueNameExists", "QueueAlreadyExists"):
		got, gerr := q.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
		if gerr != nil {
			return "", "", fmt.Errorf("bootstrap: get URL of queue %s: %w", name, gerr)
		}
		url = aws.ToString(got.QueueUrl)
	default:
		return "", "", fmt.Errorf("bootstrap: create queue %s: %w", name, err)
	}
	if _, err := q.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(url), Attributes: attrs}); err != nil {
		return "", "", fmt.Errorf("bootstrap: set attributes of queue %s: %w", name, err)
	}
	got, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return "", "", fmt.Errorf("bootstrap: get ARN of queue %s: %w", name, err)
	}
	arn := got.Attributes[string(types.QueueAttributeNameQueueArn)]
	if arn == "" {
		return "", "", fmt.Errorf("bootstrap: queue %s has no QueueArn attribute", name)
	}
	return url, arn, nil
}

func destroyQueue(ctx context.Context, q SQSAPI, name string) error {
	got, err := q.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if hasCode(err, missingQueueCodes...) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("bootstrap: get URL of queue %s: %w", name, err)
	}
	_, err = q.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: got.QueueUrl})
	if err != nil && !hasCode(err, missingQueueCodes...) {
		return fmt.Errorf("bootstrap: delete queue %s: %w", name, err)
	}
	return nil
}
