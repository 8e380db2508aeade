// Package core holds the domain primitives shared by the lifecycle monitor
// (core/monitor) and the release coordinator (core/release): the typed error
// with a stable code, validation of tokens, hashes and error codes, RFC 8785
// canonical JSON with SHA-256 hashing, the injectable clock, the
// integer-millisecond time helpers and Shard, the one partition function of
// both tables' sparse indexes.
//
// core and its sub-packages import no AWS SDK: adapters implement the ports.
package core
