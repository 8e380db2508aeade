// Package monitortest is the conformance suite of the monitor.Store port.
// Every store (the in-memory one and the DynamoDB one) runs RunStoreSuite
// from its own tests, so both keep exactly the same semantics.
package monitortest
