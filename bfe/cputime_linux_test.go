package bfe

import (
	"syscall"
	"time"
)

// threadCPU is the CPU time of the calling OS thread (the benchmark locks
// its goroutine to one), so that a figure counts only the cycles the
// operation got, not the time it waited for a core on a shared machine.
func threadCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	const rusageThread = 1 // RUSAGE_THREAD
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

// processCPU is the CPU time of the whole process.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
