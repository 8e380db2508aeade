// Package signedhttp is the plumbing the signed HTTP clients share
// (adapters/cms lifecycle reads, adapters/cmsdelivery deliveries,
// adapters/evidence evidence requests): validation of the base URL, HMAC key
// and timeout, request ids, the signing headers of package signing, one
// attempt bounded by the timeout, bounded body reads, and the mapping of
// transport failures to each client's stable codes.
//
// What an answer means (which statuses succeed, which are retryable, how a
// body is checked) stays with each client. Redirects are never followed: a
// signed request is bound to its path.
package signedhttp
