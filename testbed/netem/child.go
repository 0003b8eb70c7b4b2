package netem

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/ztls-project/ztls/testbed/child"
)

// RelayRole is the relay's helper process: StartRelay runs this executable
// again with it, so the program that calls StartRelay must dispatch it (a
// hidden subcommand of cmd/ztls-bench, child.Dispatch in a test's TestMain).
var RelayRole = child.Role{
	Name:  "netem-relay",
	Short: "the link emulator's relay (started by the testbed, not by hand)",
	Main:  func([]string) int { return childMain() },
}

// Port is one host's attachment to the relay.
type Port struct {
	// File is the host's TUN device, opened with IFF_TUN|IFF_NO_PI.
	File *os.File
	// Addr is the host's IPv4 address on the TUN: packets to it go to File.
	Addr netip.Addr
}

// Options tune a relay. The zero value is ready to use.
type Options struct {
	// RTPriority is the SCHED_FIFO priority of the relay thread; 0 means 50,
	// negative means normal scheduling. Without the privilege the relay runs
	// at normal priority and Relay.Warning says so.
	RTPriority int
	// Seed seeds the loss and jitter generators (0: a fixed default), so runs
	// can be repeated.
	Seed uint64
	// Stderr receives the child's error output; nil means os.Stderr.
	Stderr io.Writer
}

// Relay is a running link emulator child process. Its methods are safe for
// concurrent use.
type Relay struct {
	mu      sync.Mutex
	cmd     *exec.Cmd
	in      io.WriteCloser
	out     *bufio.Reader
	n       int
	done    chan struct{}
	waitErr error
	closed  bool

	// RealTime reports whether the relay thread got real-time priority.
	RealTime bool
	// Warning explains a degraded start (for example no real-time priority).
	Warning string
}

// StartRelay starts the relay on ports, with every link forwarding at once
// until SetLink configures it. The relay takes its own copies of the TUN
// descriptors; the caller may close its files after StartRelay returns.
func StartRelay(ports []Port, opt Options) (*Relay, error) {
	if len(ports) == 0 || len(ports) > maxPorts {
		return nil, fmt.Errorf("netem: need 1 to %d ports, got %d", maxPorts, len(ports))
	}
	first := command{Op: "init", Seed: opt.Seed, RT: opt.RTPriority}
	if first.RT == 0 {
		first.RT = 50
	}
	if first.RT < 0 {
		first.RT = 0
	}
	if first.Seed == 0 {
		first.Seed = 0x5eed
	}
	cmd, err := child.Command(RelayRole, nil, nil)
	if err != nil {
		return nil, err
	}
	for _, p := range ports {
		if p.File == nil {
			return nil, errors.New("netem: port without TUN file")
		}
		cmd.ExtraFiles = append(cmd.ExtraFiles, p.File)
		first.Ports = append(first.Ports, p.Addr.String())
	}
	cmd.Stderr = opt.Stderr
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	// The relay must not outlive its parent, which owns the namespaces.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("netem: %w", err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("netem: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("netem: start relay: %w", err)
	}
	r := &Relay{cmd: cmd, in: in, out: bufio.NewReader(outPipe), n: len(ports), done: make(chan struct{})}
	go func() {
		r.waitErr = cmd.Wait()
		close(r.done)
	}()
	rep, err := r.call(first)
	if err != nil {
		r.Close()
		return nil, err
	}
	r.RealTime, r.Warning = rep.RT, rep.Warn
	return r, nil
}

// call sends one command and waits for its reply.
func (r *Relay) call(c command) (reply, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var rep reply
	if r.closed {
		return rep, errors.New("netem: relay closed")
	}
	b, err := json.Marshal(c)
	if err != nil {
		return rep, fmt.Errorf("netem: %w", err)
	}
	if _, err := r.in.Write(append(b, '\n')); err != nil {
		return rep, fmt.Errorf("netem: relay control: %w", err)
	}
	line, err := r.out.ReadBytes('\n')
	if err != nil {
		return rep, fmt.Errorf("netem: relay exited: %w", err)
	}
	if err := json.Unmarshal(line, &rep); err != nil {
		return rep, fmt.Errorf("netem: bad relay reply: %w", err)
	}
	if rep.Error != "" {
		return rep, errors.New(rep.Error)
	}
	return rep, nil
}

// SetLink configures the direction from port src to port dst (indices in
// the order given to StartRelay). Packets already queued keep their due time.
func (r *Relay) SetLink(src, dst int, l Link) error {
	if err := l.Validate(); err != nil {
		return err
	}
	_, err := r.call(command{Op: "link", Src: src, Dst: dst, Link: &l})
	return err
}

// SetCompensation takes d off every packet's delay (never below zero): the
// relay's own latency per hop (TUN wake-ups, writes), measured by the caller,
// so that round trips seen by applications match the configured delays.
func (r *Relay) SetCompensation(d time.Duration) error {
	_, err := r.call(command{Op: "compensate", Comp: d})
	return err
}

// Stats returns the relay's counters.
func (r *Relay) Stats() (Stats, error) {
	rep, err := r.call(command{Op: "stats"})
	if err != nil {
		return Stats{}, err
	}
	if rep.Stats == nil {
		return Stats{}, errors.New("netem: relay sent no stats")
	}
	return *rep.Stats, nil
}

// Close stops the relay and waits for it to exit. It is idempotent.
func (r *Relay) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		<-r.done
		return nil
	}
	r.closed = true
	b, _ := json.Marshal(command{Op: "quit"})
	r.in.Write(append(b, '\n'))
	r.in.Close()
	r.mu.Unlock()
	select {
	case <-r.done:
	case <-time.After(2 * time.Second):
		r.cmd.Process.Kill()
		<-r.done
	}
	return nil
}

// childMain is the relay process: it reads the init line, takes a real-time
// locked thread and runs the event loop until told to quit.
func childMain() int {
	runtime.LockOSThread()
	out := os.Stdout
	line, err := readLine(0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "netem relay:", err)
		return 2
	}
	c, err := parseCommand(line, 0)
	if err == nil && c.Op != "init" {
		err = errors.New("netem: first control line must be init")
	}
	var rep reply
	var l *loop
	if err == nil {
		fds := make([]int, len(c.Ports))
		for i := range fds {
			fds[i] = 3 + i
		}
		l, err = newLoop(fds, c.Ports, c.Seed)
	}
	if err != nil {
		rep.Error = err.Error()
		b, _ := json.Marshal(rep)
		out.Write(append(b, '\n'))
		return 2
	}
	if c.RT > 0 {
		if err := setRealtime(c.RT); err != nil {
			rep.Warn = fmt.Sprintf("netem: relay runs without real-time priority: %v", err)
		} else {
			rep.RT = true
		}
	}
	b, _ := json.Marshal(rep)
	out.Write(append(b, '\n'))
	if err := l.run(0, out); err != nil {
		fmt.Fprintln(os.Stderr, "netem relay:", err)
		return 1
	}
	return 0
}

// readLine reads one line from fd byte by byte, so nothing after it is
// consumed before the event loop takes the descriptor over.
func readLine(fd int) ([]byte, error) {
	var line []byte
	b := make([]byte, 1)
	for len(line) < 1<<20 {
		n, err := syscall.Read(fd, b)
		if n == 0 || err != nil {
			return nil, fmt.Errorf("netem: reading init: %v", err)
		}
		if b[0] == '\n' {
			return line, nil
		}
		line = append(line, b[0])
	}
	return nil, errors.New("netem: init line too long")
}
