package awsclient

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// DynamoDB returns a DynamoDB client for cfg. If the endpoint is overridden
// (AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL, or the shared config's
// endpoint_url) the response checksum validation is disabled: DynamoDB Local
// and other emulators do not send the x-amz-crc32 header.
func DynamoDB(cfg aws.Config, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	fns := make([]func(*dynamodb.Options), 0, len(optFns)+1)
	// Runs after the SDK resolved BaseEndpoint from the config sources, so
	// BaseEndpoint reflects every configured override.
	fns = append(fns, func(o *dynamodb.Options) {
		if o.BaseEndpoint != nil && *o.BaseEndpoint != "" {
			o.DisableValidateResponseChecksum = true
		}
	})
	fns = append(fns, optFns...)
	return dynamodb.NewFromConfig(cfg, fns...)
}

// SQS returns an SQS client for cfg; AWS_ENDPOINT_URL_SQS is honoured by the
// SDK's endpoint resolution.
func SQS(cfg aws.Config, optFns ...func(*sqs.Options)) *sqs.Client {
	return sqs.NewFromConfig(cfg, optFns...)
}

// EventBridge returns an EventBridge client for cfg;
// AWS_ENDPOINT_URL_EVENTBRIDGE is honoured by the SDK's endpoint resolution.
func EventBridge(cfg aws.Config, optFns ...func(*eventbridge.Options)) *eventbridge.Client {
	return eventbridge.NewFromConfig(cfg, optFns...)
}
