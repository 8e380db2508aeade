// Package archtest keeps the package boundaries: its test lists every
// package of the root module and of the infra module with `go list` and
// checks each import against the table of layers in layers_test.go
// (which group of packages may import which). A package that is in no
// layer fails the test, so a new package is placed in the table when it
// is added.
package archtest
