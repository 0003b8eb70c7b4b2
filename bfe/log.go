package bfe

import (
	"context"
	"sync"
)

// A PunctureLog records punctured positions outside one server, so that a
// fleet whose members hold copies of one epoch key punctures it as one: a
// ciphertext replayed to a second member finds its positions set there.
//
// KeyState.Decapsulate calls TestAndSet before it touches a secret-key slot
// and fails closed when it returns an error. The call must be atomic: of
// two racing calls with a common position, exactly one sees it unset. A
// Redis implementation is a Lua script of SETBITs on one key per epoch
// returning the old bits: zdata/redisreg's PunctureLog. Positions are kept per
// epoch: an epoch whose key is generated again needs its positions cleared.
type PunctureLog interface {
	// TestAndSet marks positions of epoch as punctured and reports, for
	// each, whether it had been marked before the call. wasSet has the
	// length of positions.
	TestAndSet(ctx context.Context, epoch uint64, positions []uint32) (wasSet []bool, err error)
}

// MemoryPunctureLog is a PunctureLog in this process's memory: the seam a
// shared log plugs into, and the log of tests that run a fleet in one
// process. The zero value is ready to use and safe for concurrent use.
type MemoryPunctureLog struct {
	mu   sync.Mutex
	sets map[uint64]map[uint32]struct{}
}

// TestAndSet implements PunctureLog.
func (l *MemoryPunctureLog) TestAndSet(ctx context.Context, epoch uint64, positions []uint32) ([]bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sets == nil {
		l.sets = make(map[uint64]map[uint32]struct{})
	}
	set := l.sets[epoch]
	if set == nil {
		set = make(map[uint32]struct{})
		l.sets[epoch] = set
	}
	was := make([]bool, len(positions))
	for j, p := range positions {
		_, was[j] = set[p]
		set[p] = struct{}{}
	}
	return was, nil
}
