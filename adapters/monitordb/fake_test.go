package monitordb

import (
	"testing"

	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/monitor/monitortest"
	"github.com/localeflow/localeflow/dev/dynamofake"
	"github.com/localeflow/localeflow/topology"
)

// TestStoreConformanceOnFake runs the store's conformance suite (the one
// TestStoreConformance runs on DynamoDB Local) on the in-memory DynamoDB
// the simulation uses: the fake is trusted exactly as far as this suite.
func TestStoreConformanceOnFake(t *testing.T) {
	monitortest.RunStoreSuite(t, monitortest.Harness{
		New: func(t *testing.T) monitor.Store {
			spec := topology.New("fake").Monitor
			s, err := New(dynamofake.New(spec), spec.Name)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Tamper: func(t *testing.T, st monitor.Store, id string, edit func(*monitor.Record)) {
			s := st.(*Store)
			db := s.db.(*dynamofake.DB)
			raw := db.Raw(s.table, key(id))
			if raw == nil {
				t.Fatalf("no item %s", id)
			}
			rec := decode(raw)
			edit(&rec)
			av, err := encode(rec)
			if err != nil {
				t.Fatal(err)
			}
			if err := db.SetRaw(s.table, av); err != nil {
				t.Fatalf("put raw: %v", err)
			}
		},
	})
}
