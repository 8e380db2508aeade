package releasetest

import (
	"time"

	"testing"

	"github.com/localeflow/localeflow/core/release"
)

func TestMemStoreConformance(t *testing.T) {
	Run(t, func(t *testing.T) release.Store { return NewMemStore() })
}

func TestMemStoreDue(t *testing.T) {
	RunDue(t, func(t *testing.T) interface {
		release.Store
		release.DueFinder
	} {
		return NewMemStore()
	})
}

func TestMemStoreSchema(t *testing.T) {
	RunSchema(t, func(t *testing.T) Foreign { return NewMemStore() })
}

func TestMemStoreRetention(t *testing.T) {
	RunRetention(t, func(t *testing.T, retention time.Duration) Expiring {
		m := NewMemStore()
		m.SetRetention(retention)
		return m
	})
}

func TestMemStoreTextExpiry(t *testing.T) {
	RunTextExpiry(t, func(t *testing.T) TextExpiring { return NewMemStore() })
}
