// Package localeflowtest holds the setup that the construct's tests and the
// app's tests share.
package localeflowtest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/jsii-runtime-go"

	"github.com/localeflow/localeflow/topology"
)

// Main runs m with *assetDir set to a fresh temporary directory (named from
// pattern) that holds a dummy <fn>/bootstrap for every function: CDK only
// zips it, nothing executes it. It removes the directory, closes the jsii
// runtime (without Close every test binary leaks its temp dir) and exits
// with m's code.
func Main(m *testing.M, pattern string, assetDir *string) {
	code := run(m, pattern, assetDir)
	jsii.Close()
	os.Exit(code)
}

func run(m *testing.M, pattern string, assetDir *string) int {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	for _, fn := range topology.New(topology.DefaultPrefix).Functions {
		if err := os.MkdirAll(filepath.Join(dir, fn.Dir), 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := os.WriteFile(filepath.Join(dir, fn.Dir, "bootstrap"), []byte("#!/bin/sh\n# "+fn.Dir+"\n"), 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	*assetDir = dir
	return m.Run()
}
