package wire

import (
	"bytes"
	"errors"
	"fmt"
)

// Reassembler puts a flight back together from fragments that may arrive
// in any order, more than once, or overlapping. Its memory is the flight
// (at most Max bytes) plus a bounded list of received ranges. The zero
// value is ready; set Max before the first Add.
type Reassembler struct {
	// Max bounds the flight length a sender may announce (0: 64 KiB).
	Max    int
	total  int
	buf    []byte
	ranges []span // received, sorted, merged
}

type span struct{ start, end int }

// maxRanges bounds the holes a sender can make us track.
const maxRanges = 64

// Errors of the reassembler.
var (
	ErrFlightTooLong   = errors.New("turbo: announced flight longer than allowed")
	ErrLengthChanged   = errors.New("turbo: fragments announce different flight lengths")
	ErrConflict        = errors.New("turbo: overlapping fragments disagree")
	ErrTooFragmented   = errors.New("turbo: flight too fragmented")
	errOutsideOfFlight = errors.New("turbo: fragment outside the flight")
)

// Add records one fragment of a flight of length total at offset.
// Fragments without bytes only check the length.
func (r *Reassembler) Add(total, offset int, frag []byte) error {
	max := r.Max
	if max <= 0 {
		max = 64 << 10
	}
	if total <= 0 || total > max {
		return fmt.Errorf("%w (%d bytes, limit %d)", ErrFlightTooLong, total, max)
	}
	if r.total == 0 {
		r.total = total
	} else if r.total != total {
		return ErrLengthChanged
	}
	if offset < 0 || offset+len(frag) > total {
		return errOutsideOfFlight
	}
	if len(frag) == 0 {
		return nil
	}
	if r.buf == nil {
		r.buf = make([]byte, total)
	}
	s := span{offset, offset + len(frag)}
	// Bytes already held must match: a sender cannot rewrite the flight.
	for _, have := range r.ranges {
		lo, hi := max2(have.start, s.start), min(have.end, s.end)
		if lo < hi && !bytes.Equal(r.buf[lo:hi], frag[lo-offset:hi-offset]) {
			return ErrConflict
		}
	}
	merged := make([]span, 0, len(r.ranges)+1)
	placed := false
	for _, have := range r.ranges {
		switch {
		case have.end < s.start:
			merged = append(merged, have)
		case s.end < have.start:
			if !placed {
				merged = append(merged, s)
				placed = true
			}
			merged = append(merged, have)
		default:
			s.start, s.end = min(s.start, have.start), max2(s.end, have.end)
		}
	}
	if !placed {
		merged = append(merged, s)
	}
	if len(merged) > maxRanges {
		return ErrTooFragmented
	}
	copy(r.buf[offset:], frag)
	r.ranges = merged
	return nil
}

func max2(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// Complete reports whether every byte of the flight arrived.
func (r *Reassembler) Complete() bool {
	return r.total > 0 && len(r.ranges) == 1 && r.ranges[0].start == 0 && r.ranges[0].end == r.total
}

// Total is the announced flight length (0 before the first fragment).
func (r *Reassembler) Total() int { return r.total }

// Received is how many distinct flight bytes arrived.
func (r *Reassembler) Received() int {
	n := 0
	for _, s := range r.ranges {
		n += s.end - s.start
	}
	return n
}

// Flight returns the whole flight once Complete.
func (r *Reassembler) Flight() []byte {
	if !r.Complete() {
		return nil
	}
	return r.buf
}

// Held is the memory the flight's buffer holds, in bytes.
func (r *Reassembler) Held() int { return cap(r.buf) }
