package localeflow

// AssetDirForTests is the dummy build directory TestMain creates, for the
// external tests (package localeflow_test).
func AssetDirForTests() string { return assetDir }
