package memstore_test

import (
	"testing"

	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/monitor/memstore"
	"github.com/localeflow/localeflow/core/monitor/monitortest"
)

func TestStoreConformance(t *testing.T) {
	monitortest.RunStoreSuite(t, monitortest.Harness{
		New: func(*testing.T) monitor.Store { return memstore.New() },
		Tamper: func(t *testing.T, s monitor.Store, id string, edit func(*monitor.Record)) {
			if !s.(*memstore.Store).Tamper(id, edit) {
				t.Fatalf("tamper: %s missing", id)
			}
		},
	})
}
