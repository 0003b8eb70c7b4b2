package zdata

import (
	"sync"
	"time"
)

// RotationClaim is one process's part in rotating a Z-data directory
// that several processes use (ztls serve and ztls dns serve on one DIR):
// the process holding the directory's rotation lock (ClaimRotation)
// rotates it, the others only read what it writes. Each of the others
// keeps trying (Try, on its periodic refresh), so that when the holder
// stops, cleanly or not (the lock dies with its process; a lock file left
// behind holds nothing), one of them takes the rotation over and the
// directory keeps getting its next keys.
//
// A fleet (a directory with a seed) has nothing to claim: every member
// derives the keys itself. Make a RotationClaim with NewRotationClaim;
// its methods may be called concurrently, and on a nil *RotationClaim
// (a process that never rotates the directory) Held is false and Release
// does nothing.
type RotationClaim struct {
	dir     *Dir
	mu      sync.Mutex
	release func() // set while the claim is held
}

// NewRotationClaim returns d's claim, not yet held: call Try.
func NewRotationClaim(d *Dir) *RotationClaim { return &RotationClaim{dir: d} }

// Try takes the claim when this process does not hold it and no other
// process does. Before rotating, it re-reads what the previous holder
// wrote (Refresh), so that the rotation goes on from the keys on disk
// rather than from this process's last look at them; then it marks the
// directory rotating (SetRotating), so that from then on the directory
// behaves as one claimed at start (Rotate writes the keys, Reload issues
// keys for a new certificate at once). took reports whether this call
// took the claim. On error the claim is not held; a later Try tries
// again.
func (c *RotationClaim) Try(now time.Time) (took bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.release != nil || c.dir.Fleet() {
		return false, nil
	}
	release, ok, err := c.dir.ClaimRotation()
	if err != nil || !ok {
		return false, err
	}
	if _, err := c.dir.Refresh(now); err != nil {
		release()
		return false, err
	}
	c.dir.SetRotating(true)
	c.release = release
	return true, nil
}

// Held reports whether this process holds the claim (rotates the
// directory).
func (c *RotationClaim) Held() bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.release != nil
}

// Release stops rotating and gives the claim back, for another process
// to take over.
func (c *RotationClaim) Release() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.release == nil {
		return
	}
	c.dir.SetRotating(false)
	c.release()
	c.release = nil
}
