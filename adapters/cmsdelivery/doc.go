// Package cmsdelivery is the HTTP client of the CMS delivery API
// (docs/design.md "CMS delivery API"): POST
// {base}/v1/sites/{site_id}/changes/{event_id}/deliveries with the signed
// delivery request as body, signed like the lifecycle request plus
// "\n" + hex sha256(body). 2xx means delivered; the CMS is idempotent on
// delivery_id, so re-sending after a lost answer is safe.
//
// It implements release.DeliveryClient. 429, 5xx, timeouts and transport
// errors are retryable ("cms.http_503", "cms.timeout", "cms.unavailable");
// other answers are "cms.http_<status>", not retryable.
package cmsdelivery
