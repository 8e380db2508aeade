// Package lambdalog builds the log/slog JSON logger every localeflow
// function writes to stdout: each record carries the Lambda request id
// ("request_id") of the invocation context it was logged with, so one
// invocation's lines can be found in CloudWatch Logs.
package lambdalog
