package localeflow

// AssetDirForTests is the dummy build directory TestMain creates, for the
// external tests (package localeflow_test).
func AssetDirForTests() string { return assetDir }

// IssuersForTests are well-formed receipt issuers (one key per kind), for
// the external tests: New refuses props without them.
func IssuersForTests() ReceiptIssuers { return testProps().ReceiptIssuers }
