package dial

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// Memory remembers, for at most 24 hours, the servers that aborted on a
// ztls ClientHello, so later connections go straight to TLS 1.3 (docs/ztls-spec.md,
// Section 6). It is per-site data like a cookie jar: Clear forgets it. A Memory
// made by OpenMemory keeps it in a file across processes.
type Memory struct {
	mu   sync.Mutex
	m    map[string]time.Time
	path string
}

// RememberFor is how long an abort is remembered (docs/ztls-spec.md, Section 6).
const RememberFor = 24 * time.Hour

var defaultMemory = NewMemory()

// NewMemory returns an empty in-process memory.
func NewMemory() *Memory { return &Memory{m: map[string]time.Time{}} }

// OpenMemory returns a memory kept in path (created when first needed).
// An unreadable or malformed file starts empty: forgetting is safe, it
// costs one retried connection.
func OpenMemory(path string) *Memory {
	m := &Memory{m: map[string]time.Time{}, path: path}
	if data, err := os.ReadFile(path); err == nil {
		json.Unmarshal(data, &m.m)
	}
	return m
}

// DefaultMemoryPath is where the CLI keeps its memory:
// $XDG_CACHE_HOME/ztls/ztls-aborts.json or ~/.cache/ztls/ztls-aborts.json.
func DefaultMemoryPath() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "ztls", "ztls-aborts.json")
}

func key(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }

// RememberAbort notes that host:port aborted on ztls at now.
func (m *Memory) RememberAbort(host string, port int, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.m[key(host, port)] = now.Add(RememberFor)
	m.saveLocked(now)
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
func (m *Memory) Clear() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.m = map[string]time.Time{}
	if m.path == "" {
		return nil
	}
	if err := os.Remove(m.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// saveLocked writes the unexpired entries (best effort).
func (m *Memory) saveLocked(now time.Time) {
	if m.path == "" {
		return
	}
	for k, until := range m.m {
		if !now.Before(until) {
			delete(m.m, k)
		}
	}
	data, err := json.Marshal(m.m)
	if err != nil {
		return
	}
	if err := os.MkdirAll(filepath.Dir(m.path), 0o700); err != nil {
		return
	}
	tmp := m.path + ".tmp"
	if os.WriteFile(tmp, data, 0o600) == nil {
		os.Rename(tmp, m.path)
	}
}
