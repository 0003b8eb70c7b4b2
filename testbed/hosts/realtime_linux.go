package hosts

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// SetProcessRealtime puts every thread of the calling process, and so every
// thread it starts later, under SCHED_FIFO at prio (1 to 99). Measuring
// clients run just below the relay (priority 50) so that a busy machine does
// not delay their wake-ups. prio 0 returns all threads to normal scheduling.
func SetProcessRealtime(prio int) error {
	if prio < 0 || prio > 99 {
		return fmt.Errorf("hosts: real-time priority %d out of range [0, 99]", prio)
	}
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: uint32(prio)}
	if prio == 0 {
		attr.Policy, attr.Priority = 0, 0 // SCHED_OTHER
	}
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return fmt.Errorf("hosts: %w", err)
	}
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetAttr(tid, &attr, 0); err != nil && err != unix.ESRCH {
			return fmt.Errorf("hosts: real-time priority for thread %d: %w", tid, err)
		}
	}
	return nil
}
