//go:build !linux

// Package cputime reads the CPU time a thread or the process used, for
// benchmarks on machines shared with other work: the cycles an operation
// got, not the time it waited for a core.
package cputime

import "time"

// Thread is not available here: ok is false.
func Thread() (d time.Duration, ok bool) { return 0, false }

// Process is not available here: ok is false.
func Process() (d time.Duration, ok bool) { return 0, false }
