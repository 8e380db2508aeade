// Package evidence is the HTTP client of the evidence provider API
// (docs/design.md "Evidence provider API"): POST {base}/v1/evidence with the
// canonical quality evidence request as body, signed like the CMS delivery
// request (X-Localeflow-Request-Id, -Timestamp, -Signature over
// "POST\n{path}\n{request_id}\n{timestamp}\n" + hex sha256(body)).
//
// The client implements release.EvidenceProvider: it returns the raw 200
// body, which core/release validates strictly. Failures are *core.Error:
// 429, 5xx, timeouts and transport errors are retryable
// ("evidence.http_503", "evidence.timeout", "evidence.unavailable"); a 4xx
// error body {"code": "...", "retryable": bool} becomes "evidence.<code>"
// with the provider's retryability; any other 4xx is
// "evidence.http_<status>", not retryable. Error bodies are never logged or
// wrapped (they may echo request content).
package evidence
