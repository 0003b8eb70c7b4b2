// Package testproc holds what the tests that run other programs (OpenSSL,
// GnuTLS, BIND, Redis, the ztls binary) share: a buffer the program's
// output is written to while the test reads it.
package testproc

import (
	"bytes"
	"sync"
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
