package zdata

import (
	"crypto/ecdh"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ztls-project/ztls/tls13"
)

// DefaultWindow is the server's default freshness window W (docs/ztls-spec.md,
// Section 5).
const DefaultWindow = 10 * time.Second

// Key is a signed Z-data record with its semi-static private key:
// Private for x25519 and secp256r1, KEM for a post-quantum v3 record
// (docs/ztls-spec.md, Section 9); the other is nil.
type Key struct {
	Record  *Record
	Private *ecdh.PrivateKey
	KEM     *tls13.ZDataKEMKey
	// BFE is the key's Bloom filter encryption side (docs/ztls-spec.md,
	// Section 7): its v2 twin record and key file; nil without one.
	BFE *BFEKey
}

type entry struct {
	key     *Key
	hash    [32]byte
	bfeHash [32]byte // zdata_hash of the v2 twin, when key.BFE is set
}

func newEntry(key *Key) entry {
	e := entry{key: key, hash: key.Record.ZDataHash()}
	if key.BFE != nil {
		e.bfeHash = key.BFE.Record.ZDataHash()
	}
	return e
}

// Keyring holds a server's Z-data keys; entries may overlap in time
// (rotation publishes the next record before the current expires). It
// implements tls13.ZDataKeys. A Keyring is safe for concurrent use; the
// zero value is not usable, call NewKeyring.
type Keyring struct {
	mu     sync.RWMutex
	window time.Duration
	keys   map[uint32]entry
	onBFE  atomic.Pointer[func(BFEEvent)]
}

var _ tls13.ZDataKeys = (*Keyring)(nil)

// NewKeyring returns an empty keyring whose keys stay usable for window
// (the freshness window W; 0 means DefaultWindow) after their not-after.
func NewKeyring(window time.Duration) *Keyring {
	if window <= 0 {
		window = DefaultWindow
	}
	return &Keyring{window: window, keys: map[uint32]entry{}}
}

// Window returns the freshness window the keyring was made with.
func (k *Keyring) Window() time.Duration { return k.window }

// Add inserts key, replacing any key with the same Zdata_id. The record
// must have Host, Port and LeafHash set (as Sign, Verify and LoadDir do).
// A nil key or record is ignored.
func (k *Keyring) Add(key *Key) {
	if key == nil || key.Record == nil {
		return
	}
	e := newEntry(key)
	k.mu.Lock()
	k.keys[key.Record.ID] = e
	k.mu.Unlock()
}

// Remove deletes the key with Zdata_id id, if any.
func (k *Keyring) Remove(id uint32) {
	k.mu.Lock()
	delete(k.keys, id)
	k.mu.Unlock()
}

// Get returns the key with Zdata_id id, or nil.
func (k *Keyring) Get(id uint32) *Key {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.keys[id].key
}

// live is tls13.ZDataLive for r with the keyring's window: the one rule
// for when a server decrypts with a key (from not-before, not earlier).
func (k *Keyring) live(r *Record, now time.Time) bool {
	return tls13.ZDataLive(r.NotBefore, r.NotAfter, k.window, now)
}

// sorted returns the entries that pass keep, by not-before then id.
func (k *Keyring) sorted(keep func(*Record) bool) []*Key {
	k.mu.RLock()
	var out []*Key
	for _, e := range k.keys {
		if keep(e.key.Record) {
			out = append(out, e.key)
		}
	}
	k.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Record, out[j].Record
		if !a.NotBefore.Equal(b.NotBefore) {
			return a.NotBefore.Before(b.NotBefore)
		}
		return a.ID < b.ID
	})
	return out
}

// All returns every key, oldest first.
func (k *Keyring) All() []*Key { return k.sorted(func(*Record) bool { return true }) }

// Live returns the keys a server accepts at now (tls13.ZDataLive):
// not-before ≤ now ≤ not-after plus the window; oldest first.
func (k *Keyring) Live(now time.Time) []*Key {
	return k.sorted(func(r *Record) bool { return k.live(r, now) })
}

// Published returns the keys whose records belong in DNS at now: those
// not yet past not-after, including the next ones not yet valid.
func (k *Keyring) Published(now time.Time) []*Key {
	return k.sorted(func(r *Record) bool { return !now.After(r.NotAfter) })
}

// LookupZData implements tls13.ZDataKeys: the live key named by id whose
// zdata_hash is hash, or nil. The hash of a key's v2 twin names the same
// key with its BFE key (docs/ztls-spec.md, Section 7), if its state is
// open in this process.
func (k *Keyring) LookupZData(id uint32, hash [32]byte, now time.Time) *tls13.ZDataKey {
	k.mu.RLock()
	e, ok := k.keys[id]
	k.mu.RUnlock()
	if !ok || !e.key.hasPrivate() || !k.live(e.key.Record, now) {
		return nil
	}
	var decapsulate func([]byte) ([]byte, error)
	switch {
	case e.hash == hash:
	case e.key.BFE != nil && e.bfeHash == hash:
		o := e.key.BFE.state.Load()
		if o == nil {
			return nil
		}
		decapsulate = k.decapsulator(e.key.Record, o)
	default:
		return nil
	}
	r, key := e.key.Record, e.key
	return &tls13.ZDataKey{
		ID:           r.ID,
		Hash:         hash,
		Decapsulate:  decapsulate,
		Host:         r.Host,
		Group:        r.Group,
		MaxEarlyData: r.MaxEarlyData,
		ALPN:         r.ALPN,
		NotBefore:    r.NotBefore,
		NotAfter:     r.NotAfter,
		ECDH:         key.shared,
	}
}

// Prune erases the keys past not-after plus the window (docs/ztls-spec.md,
// Section 1) and returns them. The keyring drops its references; Go
// cannot wipe an ecdh.PrivateKey in place, so the memory goes when the
// garbage collector reclaims it (Dir.Prune also deletes the key files).
func (k *Keyring) Prune(now time.Time) []*Key {
	k.mu.Lock()
	defer k.mu.Unlock()
	var gone []*Key
	for id, e := range k.keys {
		if r := e.key.Record; now.After(r.NotAfter.Add(k.window)) { // past tls13.ZDataLive
			gone = append(gone, e.key)
			delete(k.keys, id)
		}
	}
	return gone
}

// replace swaps the whole key set (Dir.Reload) and reports whether it
// changed.
func (k *Keyring) replace(keys []*Key) bool {
	m := make(map[uint32]entry, len(keys))
	for _, key := range keys {
		m[key.Record.ID] = newEntry(key)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for id, e := range m {
		// A key read again from disk keeps the open BFE key state of the
		// key it replaces, so lookups of its twin never miss it.
		if old, ok := k.keys[id]; ok && old.key.BFE != nil && e.key.BFE != nil && old.key.BFE.Path == e.key.BFE.Path && old.bfeHash == e.bfeHash {
			if o := old.key.BFE.state.Load(); o != nil {
				e.key.BFE.state.CompareAndSwap(nil, o)
			}
		}
	}
	changed := len(m) != len(k.keys)
	for id, e := range m {
		if old, ok := k.keys[id]; !ok || old.hash != e.hash || old.bfeHash != e.bfeHash {
			changed = true
		}
	}
	k.keys = m
	return changed
}
