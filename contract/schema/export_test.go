package schema

// Draft4ForTest exposes the keyword conversion to the tests.
func Draft4ForTest(v any) (any, error) { return draft4(v, "T", "test") }
