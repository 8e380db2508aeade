// Package reference holds the reference CMS and evidence provider servers
// for local use (the demo, dev/cmd/localeflow-cms, dev/cmd/localeflow-evidence).
// They implement the contracts of docs/design.md on top of the signed test
// servers the adapters' tests use, adding what a standalone server needs:
//
//   - CMS: one base URL serving both the lifecycle API
//     (GET /v1/sites/{site}/changes/{event}/lifecycle, adapters/cms/cmstest:
//     HMAC-verified requests, signed responses bound to the request id) and
//     the delivery API (POST …/deliveries: every check of
//     docs/integrating.md "Verifying a delivery", with peer
//     (VerifyDelivery: bundle signature, each approval, its binding and
//     expiry, sha256(text) = target_sha256), idempotent on delivery_id, 409
//     for another bundle under a known delivery_id). The lifecycle follows the deliveries: a
//     change answers its Before status (processing) until a verified
//     delivery for it arrives, then its AfterDelivery status (published, or
//     e.g. publication_blocked). A change can fail its first FailFirst
//     lifecycle answers with HTTP 503.
//   - Evidence provider: POST /v1/evidence (adapters/evidence/evidencetest:
//     HMAC-verified canonical requests; human review and independent
//     model review answered as the request asks). Each receipt kind is
//     signed with its own issuer's Ed25519 key (quality, human review,
//     independent review), as the coordinator trusts each issuer for one
//     kind only; the independent review receipt names the reviewer.
//
// Both make the request checks docs/integrating.md recommends, in front of
// everything else: the signature (401), a timestamp within RequestWindow
// (5 minutes by default; 401) and a request id not accepted before (409).
// The evidence provider also checks the request's request_id derivation
// and text hashes (peer.CheckEvidenceRequest; 400).
//
// Breaks (tests only) make a server violate the contract one named way
// each, so that `localeflow conformance cms|evidence` can be shown to
// report each violation by its own check (cmd/localeflow/internal/conformance).
//
// Both take Faults: a fixed latency plus jitter, and a rate of requests
// answered with HTTP 503 {"code":…,"retryable":true} before they reach the
// contract logic. The CMS also has a small admin endpoint,
// POST /_admin/v1/changes, to register changes (ChangeSpec JSON) from
// another process; it exists only in this reference server.
//
// The test servers start on their own 127.0.0.1 listeners; this package
// fronts them with a reverse proxy on the listener you choose (Serve binds
// loopback addresses only).
package reference
