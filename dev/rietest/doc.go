// Package rietest runs a function's real Lambda binary under
// aws-lambda-rie (the Runtime Interface Emulator) for integration tests:
// Build compiles the function package of the test's directory the way it
// is deployed (bootstrap, lambda.norpc, no cgo, -trimpath), Start runs it
// under the emulator on free loopback ports with the given environment,
// and Invoke posts an event to it. The emulator is named by
// LOCALEFLOW_RIE (`make test` sets it); without it the test is skipped.
package rietest
