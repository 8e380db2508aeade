// Package releasetest holds an in-memory release.Store (MemStore) and the
// conformance suite (Run) that every Store implementation must pass: the
// in-memory store in this package's tests and the DynamoDB store in
// adapters/releasedb.
package releasetest
