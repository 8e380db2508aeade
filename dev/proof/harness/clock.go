package harness

import (
	"sync"
	"time"
)

// Clock is the wall clock sped up by Speed and shifted by a step the test
// controls (Step), so scenarios can move time backwards or forwards. It is
// safe for concurrent use.
type Clock struct {
	mu     sync.Mutex
	start  time.Time
	speed  time.Duration
	offset time.Duration
}

// NewClock returns a clock running speed times faster than the wall clock
// (speed ≥ 1).
func NewClock(speed int) *Clock {
	return &Clock{start: time.Now().UTC(), speed: time.Duration(max(1, speed))}
}

// Now implements core.Clock (millisecond precision, as stored).
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.start.Add(time.Since(c.start)*c.speed + c.offset).Truncate(time.Millisecond)
}

// Step moves the clock by d (negative: backwards).
func (c *Clock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}
