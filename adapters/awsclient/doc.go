// Package awsclient builds the AWS SDK clients every localeflow binary uses,
// and the Lambda functions' AWS configuration (FromEnv: region, credentials
// and endpoints from the environment only). Command-line tools and tests
// load the full shared configuration with package awsconfig instead.
//
// Endpoints come only from the standard SDK variables (AWS_ENDPOINT_URL and
// the per-service AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_SQS,
// AWS_ENDPOINT_URL_EVENTBRIDGE, …), so the same binary runs against AWS,
// LocalStack and the Docker-free local stack without code changes. When an
// endpoint override is in force for DynamoDB the client stops validating the
// CRC32 response checksum, which emulators do not send.
//
// Record appends every call of a config's clients to the file
// LOCALEFLOW_AWS_CALL_LOG names (unset: nothing changes): `make test` sets
// it for the IAM sufficiency check, which evaluates each call of the
// functions and of the CLI against the policies the stack grants them.
package awsclient
