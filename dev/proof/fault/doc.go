// Package fault is the fault-injection suite: scenarios on the local stack
// (DynamoDB Local + kumo through dev/localtest) that crash workers
// between steps, disturb SQS delivery (duplicates, late and reordered
// messages), inject DynamoDB throttling and 5xx through SDK middleware
// (dev/proof/faultinject), make the CMS and the evidence provider time out,
// fail and answer garbage, and step the clock backwards. Each scenario
// asserts that nothing is lost, nothing is completed twice, every item
// ends where the rules say, and dev/proof/invariant finds 0 violations.
//
// The tests skip unless LOCALEFLOW_INTEGRATION=1 (make test, make proof).
package fault
