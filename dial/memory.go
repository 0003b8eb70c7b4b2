package dial

import (
	"errors"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Memory remembers, for at most 24 hours, the servers that aborted on a
// ztls ClientHello, so later connections go straight to TLS 1.3. It is
// per-site data like a cookie jar: Clear forgets it.
type Memory struct {
	mu sync.Mutex
	m  map[string]time.Time
}

// RememberFor is how long an abort is remembered (ZTLS-SPEC §6).
const RememberFor = 24 * time.Hour

var defaultMemory = NewMemory()

// NewMemory returns an empty memory.
func NewMemory() *Memory { return &Memory{m: map[string]time.Time{}} }

func key(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }

// RememberAbort notes that host:port aborted on ztls at now.
func (m *Memory) RememberAbort(host string, port int, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.m[key(host, port)] = now.Add(RememberFor)
}

// Aborted reports whether host:port is remembered at now.
func (m *Memory) Aborted(host string, port int, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	until, ok := m.m[key(host, port)]
	if ok && !now.Before(until) {
		delete(m.m, key(host, port))
		return false
	}
	return ok
}

// Clear forgets every server.
func (m *Memory) Clear() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.m = map[string]time.Time{}
}

func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
