// Package localtest connects integration tests to the local AWS stack
// (DynamoDB Local + kumo started by `make test`, or LocalStack).
//
// Tests call Require first; without LOCALEFLOW_INTEGRATION=1 they are
// skipped, with it the stack must answer or the test fails (an integration
// run that silently skips everything would prove nothing). Clients read the
// endpoints from the standard AWS_ENDPOINT_URL* variables, use static test
// credentials and default to region us-east-1. Topology and Stack create a
// complete, uniquely named set of resources per test and delete it in
// t.Cleanup, so tests never share a table or a queue.
package localtest
