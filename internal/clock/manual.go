package clock

import (
	"sync"
	"time"
)

// Manual is a clock that reads what it was set to, for tests that place
// every component (Config.Time, Options.Now, …) at chosen instants. It is
// safe for concurrent use.
type Manual struct {
	mu sync.Mutex
	t  time.Time
}

// NewManual returns a Manual clock reading t.
func NewManual(t time.Time) *Manual { return &Manual{t: t} }

// Now returns the instant the clock was set to.
func (c *Manual) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Set moves the clock to t.
func (c *Manual) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// Add moves the clock on by d.
func (c *Manual) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
