package dial

import (
	"crypto/x509"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Memory remembers, for at most 24 hours, the servers that aborted on a
// ztls ClientHello, so later connections go straight to TLS 1.3 (docs/ztls-spec.md,
// Section 6). It is per-site data like a cookie jar: Clear forgets it. A Memory
// made by OpenMemory keeps it in a file across processes. The services seen
// with a valid post-quantum (v3) record are pinned in it the same way
// (PinPQ, docs/ztls-spec.md, Section 9.6).
//
// It also holds, in the process only, the leaf each service's last
// handshake verified (RememberLeaf), with which the Z-data of its HTTPS
// record is verified without asking TLSA or CERT (docs/ztls-spec.md,
// Section 8.3): the policy checks the leaf again before each use.
type Memory struct {
	mu     sync.Mutex
	m      map[string]time.Time
	path   string
	leaves map[string]heldLeaf
}

// heldLeaf is a service's leaf and intermediates, kept until expires.
type heldLeaf struct {
	chain   []*x509.Certificate // leaf first
	expires time.Time
}

// maxHeldLeaves bounds the leaves a Memory holds; the oldest to expire
// goes first.
const maxHeldLeaves = 256

// RememberFor is how long an abort is remembered (docs/ztls-spec.md, Section 6).
const RememberFor = 24 * time.Hour

var defaultMemory = NewMemory()

// NewMemory returns an empty in-process memory.
func NewMemory() *Memory { return &Memory{m: map[string]time.Time{}, leaves: map[string]heldLeaf{}} }

// OpenMemory returns a memory kept in path (created when first needed).
// An unreadable or malformed file starts empty: forgetting is safe, it
// costs one retried connection.
func OpenMemory(path string) *Memory {
	m := &Memory{m: map[string]time.Time{}, path: path, leaves: map[string]heldLeaf{}}
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

// leafKey is host:port with the host's case and trailing dot dropped.
func leafKey(host string, port int) string {
	return key(strings.ToLower(strings.TrimSuffix(host, ".")), port)
}

// RememberLeaf keeps chain (leaf first), verified by a handshake with
// host:port at now, until the leaf's not-after or RememberFor, whichever
// is first; nil or empty forgets the service's leaf.
func (m *Memory) RememberLeaf(host string, port int, chain []*x509.Certificate, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := leafKey(host, port)
	if len(chain) == 0 || !now.Before(chain[0].NotAfter) {
		delete(m.leaves, k)
		return
	}
	until := now.Add(RememberFor)
	if chain[0].NotAfter.Before(until) {
		until = chain[0].NotAfter
	}
	if _, ok := m.leaves[k]; !ok && len(m.leaves) >= maxHeldLeaves {
		m.dropSoonestLocked()
	}
	m.leaves[k] = heldLeaf{chain: slices.Clone(chain), expires: until}
}

// dropSoonestLocked forgets the leaf that expires first.
func (m *Memory) dropSoonestLocked() {
	var first string
	var at time.Time
	for k, h := range m.leaves {
		if first == "" || h.expires.Before(at) {
			first, at = k, h.expires
		}
	}
	delete(m.leaves, first)
}

// Leaf returns the chain (leaf first) remembered for host:port and
// unexpired at now, or nil. It is unverified input: check it again.
func (m *Memory) Leaf(host string, port int, now time.Time) []*x509.Certificate {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := leafKey(host, port)
	h, ok := m.leaves[k]
	if !ok {
		return nil
	}
	if !now.Before(h.expires) {
		delete(m.leaves, k)
		return nil
	}
	return slices.Clone(h.chain)
}

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
	m.leaves = map[string]heldLeaf{}
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
