// Package child starts this executable again as one of the testbed's helper
// processes: the link emulator's relay (netem) and the client workers that
// dial from inside a network namespace (bench).
//
// The role is the helper's first argument. In the testbed's command
// (cmd/ztls-bench) each role is a hidden subcommand; a test binary that
// starts helpers hands its arguments to Dispatch from its TestMain. Nothing
// happens at package init: a process becomes a helper only when its own
// main says so.
package child

import (
	"fmt"
	"os"
	"os/exec"
)

// Role is one kind of helper process.
type Role struct {
	// Name is the helper's first argument, e.g. "netem-relay".
	Name string
	// Short says what the helper does, for a hidden subcommand's help.
	Short string
	// Main runs the helper with the arguments after Name and returns its
	// exit status.
	Main func(args []string) int
}

// Command returns the command that runs role in this executable with args.
// wrap, when not nil, builds the command from a program and its arguments
// (hosts.Host.Command starts it inside a network namespace); nil runs it
// directly.
func Command(role Role, args []string, wrap func(name string, arg ...string) *exec.Cmd) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("testbed: cannot find own executable to start %s: %w", role.Name, err)
	}
	argv := append([]string{role.Name}, args...)
	if wrap == nil {
		return exec.Command(exe, argv...), nil
	}
	return wrap(exe, argv...), nil
}

// Dispatch runs the role named by os.Args[1], if it is one of roles, and
// exits with its status; otherwise it returns. A test binary calls it first
// in TestMain.
func Dispatch(roles ...Role) {
	if len(os.Args) < 2 {
		return
	}
	for _, r := range roles {
		if os.Args[1] == r.Name {
			os.Exit(r.Main(os.Args[2:]))
		}
	}
}
