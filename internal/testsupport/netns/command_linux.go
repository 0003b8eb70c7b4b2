package netns

import (
	"fmt"
	"os/exec"
	"syscall"
)

// Command returns a command that runs the program at path with args in a
// new network namespace whose loopback interface is up: a shell brings lo
// up with ip (iproute2), then becomes the program (same pid, so
// /proc/PID/ns/net is its namespace, for DialTCP). Starting it needs root
// or CAP_SYS_ADMIN (the error is then EPERM).
func Command(path string, args ...string) (*exec.Cmd, error) {
	ip, err := exec.LookPath("ip")
	if err != nil {
		return nil, fmt.Errorf("ip (iproute2) is not installed: %w", err)
	}
	cmd := exec.Command("sh", append([]string{"-c", `"$0" link set lo up && exec "$@"`, ip, path}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	return cmd, nil
}

// Path is the network namespace of the process pid, for DialTCP.
func Path(pid int) string { return fmt.Sprintf("/proc/%d/ns/net", pid) }
