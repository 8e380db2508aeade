package monitordb

import (
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// capacityMeter adds up consumed capacity when it is asked for.
type capacityMeter struct {
	mu    sync.Mutex
	read  float64
	write float64
}

func (m *capacityMeter) mode() types.ReturnConsumedCapacity {
	if m == nil {
		return ""
	}
	return types.ReturnConsumedCapacityTotal
}

// add counts c (mode TOTAL: CapacityUnits) as read or write units.
func (m *capacityMeter) add(c *types.ConsumedCapacity, write bool) {
	if m == nil || c == nil || c.CapacityUnits == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if write {
		m.write += *c.CapacityUnits
	} else {
		m.read += *c.CapacityUnits
	}
}

// MeasureCapacity makes the store request consumed capacity
// (ReturnConsumedCapacity TOTAL) on every call and add it up; it returns a
// function reporting read and write units so far. For benchmarks.
func (s *Store) MeasureCapacity() func() (read, write float64) {
	m := &capacityMeter{}
	s.capacity = m
	return func() (float64, float64) {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.read, m.write
	}
}
