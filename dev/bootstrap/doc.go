// Package bootstrap creates (and destroys) every resource of a
// topology.Topology through the AWS SDK: the DynamoDB tables with their
// sparse KEYS_ONLY indexes and TTL, the SQS queues with their dead-letter
// queues and redrive policy, the EventBridge bus, its rules and their SQS
// targets.
//
// It is meant for the local stacks (DynamoDB Local + kumo, LocalStack);
// on AWS the CDK stack in infra/ creates the same resources from the same
// topology. Apply is idempotent: it can run against a stack that already
// holds some or all of the resources, and it refuses (with an error) a table
// whose key schema or indexes differ from the topology instead of silently
// using it.
package bootstrap
