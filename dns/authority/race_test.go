//go:build race

package authority

// raceEnabled: the race detector is on; it multiplies resident memory.
const raceEnabled = true
