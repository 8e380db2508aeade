// Package signing implements the signature formats of localeflow's
// contracts (docs/design.md): the HMAC-SHA256 `v1=<hex>` signatures
// of CMS lifecycle and delivery requests, CMS responses, evidence requests
// and signed bus events, and the Ed25519 receipts
// `v1.<b64url(payload)>.<b64url(sig)>`.
//
// Every comparison of a presented signature is constant-time. Keys are raw
// bytes; how they are configured (Secrets Manager, env for local use) is the
// caller's concern.
package signing
