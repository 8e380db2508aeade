// Package handler is the health function's Lambda handler. One handler
// serves both triggers:
//
//   - a Function URL request (events.LambdaFunctionURLRequest): GET or HEAD
//     runs a health check and answers the health document
//     (core/health, "localeflow.health.v1") with 200 when ok and 503 when
//     blocked; with Accept: text/html it answers a page for people instead
//     (state counts, the items needing attention with their error codes,
//     and when each open item is next due; every value HTML-escaped by a
//     small hand-written renderer (page.go), no script, a strict
//     Content-Security-Policy). When the
//     tables cannot be read it answers 503 {"code":"health.unavailable",
//     "retryable":true}. Other methods get 405.
//   - the EventBridge schedule ("Scheduled Event" from aws.events): it runs
//     a health check, writes one CloudWatch Embedded Metric Format line to
//     the metrics writer (stdout in Lambda; namespace Localeflow, metric
//     HealthBlocked 0/1 plus the counts) and, when blocked, publishes a
//     content-free localeflow.health.blocked event (reasons and counts, no
//     ids or texts). A check that cannot read the tables counts as blocked
//     (HealthBlocked 1, HealthCheckFailed 1, reason health.unavailable) and
//     the invocation fails, so the alarm fires and Lambda's retry runs.
//
// Logs are log/slog JSON with the Lambda request id; they carry codes,
// counts and ids only.
package handler
