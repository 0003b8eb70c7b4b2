package kex

import (
	cryptorand "crypto/rand"
	"io"
	"sync"
	"sync/atomic"

	"github.com/ztls-project/ztls/tls13/internal/mlkem768"
)

// Pool holds ephemeral keys made ahead of need, so that a handshake finds
// its x25519 key (the whole of an x25519 share, the server's half of an
// X25519MLKEM768 answer) and its ML-KEM-768 decapsulation key (a client's
// X25519MLKEM768 share) already made: the handshake then runs only the
// shared-secret computations. Pool keys are made with crypto/rand.
//
// Each kind of key is kept in a stack of at most size keys. A key leaves
// the pool when it is taken, for exactly one share, and the pool keeps no
// reference to it; the share erases it after use (ClientShare.Erase; the
// server's key right after the exchange). Taking a key starts a goroutine
// that refills that kind back to size, unless one is already at work; it
// exits when the stack is full. A kind nobody asked for is never made (a
// server never makes ML-KEM keys), and the first key of each kind is made
// inline. When a stack is empty the key is made inline, as without a pool:
// a handshake never waits for the pool.
//
// A Pool is safe for concurrent use. The zero value is not usable: use
// NewPool.
type Pool struct {
	x      keyStack[*x25519Key]
	mlkem  keyStack[*mlkem768.DecapsulationKey]
	taken  atomic.Uint64
	inline atomic.Uint64
}

// NewPool returns a pool that keeps up to size keys of each kind; size
// below 1 means 1.
func NewPool(size int) *Pool {
	size = max(size, 1)
	p := &Pool{}
	p.x.init(size, func() (*x25519Key, error) { return newX25519Key(cryptorand.Reader) })
	p.mlkem.init(size, func() (*mlkem768.DecapsulationKey, error) { return newMLKEMKey(cryptorand.Reader) })
	return p
}

// Taken returns how many keys handshakes took from the pool.
func (p *Pool) Taken() uint64 { return p.taken.Load() }

// Inline returns how many keys handshakes made themselves because the
// pool had none of the kind they needed.
func (p *Pool) Inline() uint64 { return p.inline.Load() }

// takeX returns an x25519 key from the pool or, when it is dry, a new one
// made by newKey (newX25519Key, or for a server newX25519Scalar, whose
// public key comes with the shared secret).
func (p *Pool) takeX(newKey func(io.Reader) (*x25519Key, error)) (*x25519Key, error) {
	if k, ok := p.x.take(); ok {
		p.taken.Add(1)
		return k, nil
	}
	p.inline.Add(1)
	return newKey(cryptorand.Reader)
}

func (p *Pool) takeMLKEM() (*mlkem768.DecapsulationKey, error) {
	if k, ok := p.mlkem.take(); ok {
		p.taken.Add(1)
		return k, nil
	}
	p.inline.Add(1)
	return newMLKEMKey(cryptorand.Reader)
}

// ClientShare is GenerateClientShare with
// crypto/rand and the keys of X25519 and X25519MLKEM768 shares taken from
// the pool; other groups' shares are made as GenerateClientShare makes them.
func (p *Pool) ClientShare(group uint16) (ClientShare, error) {
	switch group {
	case X25519:
		k, err := p.takeX(newX25519Key)
		if err != nil {
			return nil, err
		}
		return &x25519Share{k: k}, nil
	case X25519MLKEM768:
		dk, err := p.takeMLKEM()
		if err != nil {
			return nil, err
		}
		x, err := p.takeX(newX25519Key)
		if err != nil {
			return nil, err
		}
		return &hybridShare{dk: dk, x: x}, nil
	}
	return GenerateClientShare(group, nil)
}

// ServerShare is ServerShare with crypto/rand and the server's x25519 key
// (for X25519 and X25519MLKEM768) taken from the pool once the client's
// share has been checked.
func (p *Pool) ServerShare(group uint16, clientShare []byte) (serverPublic, shared []byte, err error) {
	return serverShare(group, clientShare, cryptorand.Reader, func() (*x25519Key, error) { return p.takeX(newX25519Scalar) })
}

// Fill makes now, in the caller's goroutine, the keys a ClientHello with
// shares for groups takes, until their stacks are full: what a prefetch
// does ahead of a connection it expects (a background refill may be
// making some at the same time; neither overfills a stack).
func (p *Pool) Fill(groups []uint16) error {
	for _, g := range groups {
		switch g {
		case X25519:
			if err := p.x.fill(); err != nil {
				return err
			}
		case X25519MLKEM768:
			if err := p.mlkem.fill(); err != nil {
				return err
			}
			if err := p.x.fill(); err != nil {
				return err
			}
		}
	}
	return nil
}

// keyStack is one kind of key of a Pool.
type keyStack[K comparable] struct {
	mu        sync.Mutex
	keys      []K // len ≤ size; slots past len hold the zero K
	size      int
	refilling bool // a refill goroutine is at work
	gen       func() (K, error)
}

func (s *keyStack[K]) init(size int, gen func() (K, error)) {
	s.keys, s.size, s.gen = make([]K, 0, size), size, gen
}

// take pops a key, clearing its slot, and starts a refill when the stack
// is below size and no refill runs.
func (s *keyStack[K]) take() (k K, ok bool) {
	s.mu.Lock()
	if n := len(s.keys); n > 0 {
		var zero K
		k, s.keys[n-1], s.keys, ok = s.keys[n-1], zero, s.keys[:n-1], true
	}
	start := !s.refilling && len(s.keys) < s.size
	s.refilling = s.refilling || start
	s.mu.Unlock()
	if start {
		go s.refill()
	}
	return k, ok
}

// fill makes keys in the caller's goroutine until the stack is full.
func (s *keyStack[K]) fill() error {
	for {
		s.mu.Lock()
		full := len(s.keys) >= s.size
		s.mu.Unlock()
		if full {
			return nil
		}
		k, err := s.gen()
		if err != nil {
			return err
		}
		s.mu.Lock()
		if len(s.keys) < s.size {
			s.keys = append(s.keys, k)
		}
		s.mu.Unlock()
	}
}

// refill makes keys until the stack is full. Only one refill runs at a
// time, and takes only shrink the stack, so each key it makes finds room.
// A failing crypto/rand stops it; the next take starts another.
func (s *keyStack[K]) refill() {
	for {
		k, err := s.gen()
		s.mu.Lock()
		if err == nil {
			s.keys = append(s.keys, k)
		}
		if err != nil || len(s.keys) >= s.size {
			s.refilling = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	}
}
