package monitordb

import (
	"slices"
	"testing"

	"github.com/localeflow/localeflow/topology"
)

// TestCensusAttributesAreTheRecordLayout: the census projection (and the
// health role's dynamodb:Attributes condition) is exactly the attributes a
// monitor record may have; a new record attribute must be added to both.
func TestCensusAttributesAreTheRecordLayout(t *testing.T) {
	var known []string
	for name := range knownAttributes {
		known = append(known, name)
	}
	slices.Sort(known)
	if got := slices.Sorted(slices.Values(topology.MonitorCensusAttributes)); !slices.Equal(got, known) {
		t.Fatalf("topology.MonitorCensusAttributes %v\nrecord layout %v", got, known)
	}
}
