//go:build !linux

package main

import "os"

// termWidth is unknown off Linux (the demo runs aws-lambda-rie, which is
// Linux-only).
func termWidth(*os.File) int { return 0 }
