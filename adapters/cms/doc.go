// Package cms is localeflow's HTTP client for the CMS (docs/design.md "CMS
// lifecycle API"). Client reads the signed lifecycle view of one change:
// every attempt carries a fresh request id, a timestamp from the injected
// clock and an HMAC signature over "GET\n{path}\n{request_id}\n{timestamp}";
// the response must be a 200 whose X-Localeflow-Signature covers the exact
// body bytes bound to that request id, and whose body passes the strict
// contract validation of core/lifecycle.
//
// Failures are *core.Error values with stable codes:
//
//	lifecycle_monitor.response_invalid  bad/missing signature, request-id
//	                                    mismatch, oversized or invalid body (not retryable)
//	cms.http_429, cms.http_5xx codes    e.g. cms.http_503 (retryable)
//	cms.timeout                         the client timeout elapsed (retryable)
//	cms.unavailable                     connection failures (retryable)
//	cms.cancelled                       the caller's context ended (retryable)
//	cms.http_<code> for other statuses  e.g. cms.http_404, cms.http_302 (not retryable)
//	cms.target_invalid                  the target is not a set of tokens (not retryable)
//
// The client never logs, and its errors never carry bodies or keys. The
// CMS delivery client (POST .../deliveries) is package cmsdelivery; the
// signed-HTTP plumbing both share is package signedhttp; package cmstest
// holds a signed test CMS server.
package cms
