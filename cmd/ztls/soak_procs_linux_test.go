//go:build linux

package main

// The soak's processes (TestSoak, soak_linux_test.go): each member, Redis
// and the authority is a soakProc that can be killed and started again,
// its output appended to one log file across its lives; a tailer reads
// the members' logs as they grow; metrics are scraped over HTTP.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// soakProc is one program the soak runs, perhaps several times over.
type soakProc struct {
	name    string
	path    string // the program
	args    []string
	logPath string

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{} // closed when the current life ended
	lives  int
	up     bool  // started and ready, not killed since
	exited []int // pids of the lives that ended (waited for)
}

// start runs the program again, its output appended to the log, and
// returns the offset of the log at which this life's lines begin.
func (p *soakProc) start() (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	off, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(p.path, p.args...)
	cmd.Stdout, cmd.Stderr = f, f
	// Killed with the test binary, whatever ends it (a timeout, ^C).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("%s: %v", p.name, err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		p.mu.Lock()
		p.exited = append(p.exited, cmd.Process.Pid)
		p.mu.Unlock()
		close(done)
	}()
	p.cmd, p.done = cmd, done
	p.lives++
	return off, nil
}

// waitLog waits until the log holds a line containing s after offset off,
// or the process ends, or the timeout passes (real time).
func (p *soakProc) waitLog(off int64, s string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout) // real time: a wait
	for {
		if line, ok := logLineAfter(p.logPath, off, s); ok {
			return line, nil
		}
		select {
		case <-p.doneChan():
			return "", fmt.Errorf("%s exited before logging %q: %s", p.name, s, tailFile(p.logPath, off))
		default:
		}
		if time.Now().After(deadline) { // real time: a wait
			return "", fmt.Errorf("%s did not log %q within %v: %s", p.name, s, timeout, tailFile(p.logPath, off))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *soakProc) doneChan() chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

func (p *soakProc) setUp(up bool) {
	p.mu.Lock()
	p.up = up
	p.mu.Unlock()
}

func (p *soakProc) isUp() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.up
}

// pid is the current life's process id (0: never started).
func (p *soakProc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// kill sends SIGKILL and waits for the process to end.
func (p *soakProc) kill() {
	p.signal(syscall.SIGKILL, 0)
}

// stop sends SIGTERM and waits up to grace (real time), then SIGKILL; it
// reports whether the process stopped on SIGTERM.
func (p *soakProc) stop(grace time.Duration) bool {
	return p.signal(syscall.SIGTERM, grace)
}

func (p *soakProc) signal(sig syscall.Signal, grace time.Duration) bool {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.up = false
	p.mu.Unlock()
	if cmd == nil {
		return true
	}
	select {
	case <-done:
		return true
	default:
	}
	cmd.Process.Signal(sig)
	if grace > 0 {
		select {
		case <-done:
			return true
		case <-time.After(grace):
		}
		cmd.Process.Kill()
	}
	<-done
	return sig == syscall.SIGKILL
}

// running reports whether the current life has not ended.
func (p *soakProc) running() bool {
	done := p.doneChan()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// logLineAfter finds the first line containing s in the file after off.
func logLineAfter(path string, off int64, s string) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return "", false
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			return sc.Text(), true
		}
	}
	return "", false
}

// tailFile is the end of a log from off, for an error message.
func tailFile(path string, off int64) string {
	b, _ := os.ReadFile(path)
	if off < int64(len(b)) {
		b = b[off:]
	} else {
		b = nil
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// soakWaitTCP waits until addr accepts a connection (for Redis, which logs in
// its own format).
func soakWaitTCP(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout) // real time: a wait
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) { // real time: a wait
			return fmt.Errorf("%s not accepting connections after %v: %v", addr, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// soakLogLine is a line of a ztls process's JSON log (--log-format json).
type soakLogLine struct {
	Msg    string `json:"msg"`
	Level  string `json:"level"`
	Remote string `json:"remote"`
	State  string `json:"state"`
	Err    string `json:"err"`
	Addr   string `json:"addr"`
}

// soakTail reads a log file as it grows, a complete line at a time.
type soakTail struct {
	path string
	off  int64
	rest []byte
}

// lines returns the complete lines written since the last call.
func (t *soakTail) lines() []string {
	f, err := os.Open(t.path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(t.off, io.SeekStart); err != nil {
		return nil
	}
	b, _ := io.ReadAll(f)
	t.off += int64(len(b))
	b = append(t.rest, b...)
	i := bytes.LastIndexByte(b, '\n')
	if i < 0 {
		t.rest = b
		return nil
	}
	t.rest = append([]byte(nil), b[i+1:]...)
	return strings.Split(string(b[:i]), "\n")
}

func parseLogLine(s string) (soakLogLine, bool) {
	var l soakLogLine
	if !strings.HasPrefix(s, "{") || json.Unmarshal([]byte(s), &l) != nil {
		return l, false
	}
	return l, true
}

// soakSample is what a member's metrics said at one moment.
type soakSample struct {
	sim        time.Time
	life       int
	rss        float64 // bytes
	goroutines float64
}

// scrapeMetrics reads the named samples (no labels) from a Prometheus
// endpoint.
func scrapeMetrics(addr string, names ...string) (map[string]float64, error) {
	c := http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || !want[name] {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
			out[name] = v
		}
	}
	return out, sc.Err()
}

// procRSS reads a process's resident memory from /proc (for dns serve,
// which runs without --metrics), as scrapeMetrics names it.
func procRSS(pid int) (map[string]float64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return nil, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			if err != nil {
				return nil, err
			}
			return map[string]float64{"process_resident_memory_bytes": kb * 1024}, nil
		}
	}
	return nil, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
