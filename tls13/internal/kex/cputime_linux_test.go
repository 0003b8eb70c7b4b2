package kex

import (
	"syscall"
	"time"
)

// threadCPU is the CPU time of the calling OS thread (a benchmark locks its
// goroutine to one): on a machine shared with other work it counts the
// cycles the operation got, not the time it waited for a core.
func threadCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	const rusageThread = 1 // RUSAGE_THREAD
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
