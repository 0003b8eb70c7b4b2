package child

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

var echoRole = Role{Name: "child-test-echo", Main: func(args []string) int {
	os.Stdout.WriteString(strings.Join(args, ","))
	return 7
}}

func TestMain(m *testing.M) {
	Dispatch(echoRole)
	os.Exit(m.Run())
}

// A helper runs only when its role is the first argument, gets the rest,
// and its status is the process's.
func TestCommandRunsRole(t *testing.T) {
	cmd, err := Command(echoRole, []string{"a", "b"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.Output()
	if string(out) != "a,b" {
		t.Errorf("helper printed %q, want %q", out, "a,b")
	}
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 7 {
		t.Errorf("helper exit: %v; want status 7", err)
	}
}

// wrap builds the command (as hosts.Host.Command does for a namespace).
func TestCommandWrap(t *testing.T) {
	var got []string
	cmd, err := Command(echoRole, []string{"x"}, func(name string, arg ...string) *exec.Cmd {
		got = append([]string{name}, arg...)
		return exec.Command(name, arg...)
	})
	if err != nil || cmd == nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[1] != echoRole.Name || got[2] != "x" {
		t.Errorf("wrap got %q; want [exe %s x]", got, echoRole.Name)
	}
}
