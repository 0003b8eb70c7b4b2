//go:build race

package keyschedule

// raceEnabled: the race detector is on; its sync.Pool drops items at
// random, so pooled workers are allocated again.
const raceEnabled = true
