package tls13

import "github.com/ztls-project/ztls/tls13/internal/kex"

// KeySharePool makes ephemeral key-exchange keys ahead of need, so that a
// handshake finds the keys of its x25519 and X25519MLKEM768 key shares
// already made and runs only the shared-secret computations on its path:
// a client's x25519 keys and ML-KEM-768 decapsulation keys, a server's
// x25519 keys (an X25519MLKEM768 server still encapsulates inline, as that
// depends on the client's key). Set it as Config.KeySharePool.
//
// The pool keeps at most size keys of each kind. Each key serves exactly
// one key share: it leaves the pool when a handshake takes it, and the
// handshake erases it once the shared secret is made. Taking a key starts
// a goroutine that refills that kind, which exits once the pool is full
// again, so an idle pool holds no goroutine and needs no Close; a kind no
// handshake asked for is never made. When the pool is dry (at the first
// handshake, or when handshakes outrun the refill on a busy machine) the
// handshake makes its key itself, as without a pool: it never waits. The
// refill uses the same CPUs as the handshakes, so a pool lowers handshake
// latency while there is spare CPU, not the CPU a handshake costs.
//
// Keys are made with crypto/rand. A KeySharePool is safe for concurrent
// use and may be shared by many Configs, clients and servers. The zero
// value is an empty pool that is never used: make one with
// NewKeySharePool.
type KeySharePool struct{ p *kex.Pool }

// NewKeySharePool returns a pool that keeps up to size keys of each kind
// (size below 1 means 1). A few per handshake expected during a refill
// suffice: 16 to 64 for a busy server.
func NewKeySharePool(size int) *KeySharePool { return &KeySharePool{p: kex.NewPool(size)} }

// Taken returns how many keys handshakes took from the pool so far.
func (p *KeySharePool) Taken() uint64 { return p.p.Taken() }

// GeneratedInline returns how many keys handshakes made themselves because
// the pool had none of the kind they needed.
func (p *KeySharePool) GeneratedInline() uint64 { return p.p.Inline() }

// Fill makes now, in the caller's goroutine, the keys a ClientHello under
// cfg takes (those of its key share groups, X25519 and X25519MLKEM768),
// until the pool holds size of each: a prefetch calls it, so that the
// connection it prepares finds every key of its key shares made.
func (p *KeySharePool) Fill(cfg *Config) error {
	if p == nil || p.p == nil {
		return nil
	}
	return p.p.Fill(cfg.keyShareGroups())
}
