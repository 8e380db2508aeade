// Package fuzz holds fuzz targets for parsers of outside input that had
// none in their own packages: release table items as stored (possibly
// tampered with) read by adapters/releasedb.Decode and
// adapters/opsdb.DecodeRelease, the HMAC signature headers of
// package signing, and the evidence provider's error answers parsed by
// adapters/evidence. `make fuzz` runs every Fuzz target of the tree for
// FUZZTIME; crashers found are kept under testdata/fuzz as regression
// inputs.
package fuzz
