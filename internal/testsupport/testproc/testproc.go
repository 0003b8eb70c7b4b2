// Package testproc holds what the tests that run other programs (OpenSSL,
// GnuTLS, BIND, Redis, the ztls binary) share: a buffer the program's
// output is written to while the test reads it, and the wait for a
// program told to end.
package testproc

import (
	"bytes"
	"os/exec"
	"sync"
	"time"
)

// Buffer is a bytes.Buffer that a process's output may be written to (as
// its exec.Cmd's Stdout and Stderr) while the test reads it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// WaitOrKill waits up to grace for cmd, told to end, to exit, and kills
// it if it has not; it returns once the process is gone.
func WaitOrKill(cmd *exec.Cmd, grace time.Duration) {
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		cmd.Process.Kill()
		<-done
	}
}
