package releasetest

import (
	"testing"

	"github.com/localeflow/localeflow/core/release"
)

func TestMemStoreConformance(t *testing.T) {
	Run(t, func(t *testing.T) release.Store { return NewMemStore() })
}
