// Package memstore is an in-memory monitor.Store with the same semantics as
// the DynamoDB store (one mutex stands in for DynamoDB's per-item
// conditional writes). Fast core tests and the model test use it; it is
// checked by the same conformance suite as the DynamoDB store.
package memstore
