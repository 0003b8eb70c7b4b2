//go:build !race

package keyschedule

const raceEnabled = false
