package netem

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Link is the emulated behaviour of one direction between two ports. The zero
// value forwards packets at once, without loss or rate limit.
type Link struct {
	// Delay is the one-way delay every packet pays.
	Delay time.Duration `json:"delay_ns"`
	// Jitter spreads each packet's delay uniformly over Delay±Jitter. A
	// packet is never delivered before the one sent ahead of it on the same
	// link, so jitter does not reorder.
	Jitter time.Duration `json:"jitter_ns"`
	// Loss is the probability (0 to 1) that a packet is dropped.
	Loss float64 `json:"loss"`
	// Rate is the link's bandwidth in bits per second; 0 means unlimited.
	// Packets queue behind each other at this rate before they pay Delay.
	Rate int64 `json:"rate_bps"`
	// QueueLimit bounds the time a packet may wait for the rate limiter;
	// longer queues drop the packet (tail drop). 0 means 100 ms.
	QueueLimit time.Duration `json:"queue_limit_ns"`
}

// Validate reports whether l is a usable link configuration.
func (l Link) Validate() error {
	switch {
	case l.Delay < 0 || l.Delay > time.Minute:
		return fmt.Errorf("netem: delay %v out of range [0, 1m]", l.Delay)
	case l.Jitter < 0 || l.Jitter > l.Delay:
		return fmt.Errorf("netem: jitter %v out of range [0, delay]", l.Jitter)
	case !(l.Loss >= 0 && l.Loss <= 1):
		return fmt.Errorf("netem: loss %v out of range [0, 1]", l.Loss)
	case l.Rate < 0:
		return fmt.Errorf("netem: negative rate %d", l.Rate)
	case l.QueueLimit < 0:
		return fmt.Errorf("netem: negative queue limit %v", l.QueueLimit)
	}
	return nil
}

// linkState schedules the packets of one direction. Times are nanoseconds of
// the relay's monotonic clock.
type linkState struct {
	cfg      Link
	lastDue  int64 // due time of the previous packet: jitter never reorders
	txFree   int64 // when the rate limiter is free to send the next packet
	rng      *rand.Rand
	forward  uint64
	lost     uint64
	overflow uint64
}

// schedule returns the due time of a packet of size bytes that arrived at
// now, or ok=false when the link drops it. comp is the relay's own latency,
// taken off the delay (never below zero).
func (s *linkState) schedule(now int64, size int, comp int64) (due int64, ok bool) {
	c := &s.cfg
	if c.Loss > 0 && s.rng.Float64() < c.Loss {
		s.lost++
		return 0, false
	}
	start := now
	if c.Rate > 0 {
		limit := int64(c.QueueLimit)
		if limit == 0 {
			limit = int64(100 * time.Millisecond)
		}
		if s.txFree > now {
			if s.txFree-now > limit {
				s.overflow++
				return 0, false
			}
			start = s.txFree
		}
		// Serialisation time of the packet at the link's rate.
		start += int64(size) * 8 * int64(time.Second) / c.Rate
		s.txFree = start
	}
	due = start + max(int64(c.Delay)-comp, 0)
	if c.Jitter > 0 {
		due += s.rng.Int64N(2*int64(c.Jitter)+1) - int64(c.Jitter)
	}
	if due < s.lastDue {
		due = s.lastDue
	}
	s.lastDue = due
	s.forward++
	return due, true
}
