// Package cputime reads the CPU time a thread or the process used, for
// benchmarks on machines shared with other work: the cycles an operation
// got, not the time it waited for a core.
package cputime

import (
	"syscall"
	"time"
)

// Thread is the CPU time of the calling OS thread (lock the goroutine to
// it with runtime.LockOSThread); ok is false where it cannot be read.
func Thread() (d time.Duration, ok bool) {
	var ru syscall.Rusage
	const rusageThread = 1 // RUSAGE_THREAD
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

// Process is the CPU time of the whole process (other goroutines and the
// garbage collector included).
func Process() (d time.Duration, ok bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
