package tls13

import (
	"bytes"
	"crypto/x509"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/ztls-project/ztls/tls13/internal/kex"
)

// ZTLS (docs/ztls-spec.md): a client that found a server's Z-data in DNS sends
// its first request as early data with its first ClientHello, keyed by an
// ECDH with the Z-data's semi-static share; everything after the
// ServerHello still rests on a fresh (EC)DHE.

// ZDataOffer is verified Z-data in a client's hands. The caller (package
// dial) has already checked its signature, validity window, host and port.
// The leaf itself must pass the client Config's certificate policy, the
// same as a Certificate message (see VerifyZDataOffer), before the engine
// sends a byte encrypted to the Z-data key; an offer that fails it is not
// used (ConnectionState.ZTLSSkipped says why) and the handshake is plain
// TLS 1.3.
type ZDataOffer struct {
	ID           uint32
	Hash         [32]byte // zdata_hash: SHA-256 of the record's signature input
	Group        CurveID  // X25519 or P256
	Share        []byte   // the server's semi-static key_exchange bytes
	MaxEarlyData uint32
	ALPN         string        // the early ALPN protocol; "" means none
	NSC          []CipherSuite // cipher suites the server does not support
	// Leaf is the TLSA leaf the record was signed with. With it the client
	// sends cert_hash and the server may omit its Certificate.
	Leaf *x509.Certificate
	// Intermediates are the CA certificates published with the leaf (CERT
	// records), used to build its chain.
	Intermediates []*x509.Certificate
	// Prepared, if set, holds a key share and ZS made ahead for this
	// offer's Group and Share (PrepareZData), and the BFE encapsulation
	// (ZDataPrepared.EncapsulateBFE); otherwise the engine makes them
	// when the handshake starts.
	Prepared *ZDataPrepared
	// BFE is the Bloom filter encryption public key of a ztls v2 record
	// with bfe= (docs/ztls-spec.md, Section 7); nil for any other record.
	// With it the client sends ztls_bfe and the early secret needs both
	// ZS and the encapsulated key.
	BFE ZDataBFE

	verdict *zdataVerdict // set by VerifyZDataOffer
}

// ZDataBFE is a Z-data record's Bloom filter encryption public key as the
// engine uses it (docs/ztls-spec.md, Section 7); package zdata hands it a
// *bfe.PublicKey, so tls13 itself links no pairing code.
type ZDataBFE interface {
	// Bytes is the BFEPublicKey encoding.
	Bytes() []byte
	// Encapsulate returns a fresh ciphertext and the 32-byte key in it.
	Encapsulate(rand io.Reader) (ciphertext, key []byte, err error)
}

// ZDataPrepared is a client key share for a Z-data record's group and the
// semi-static secret ZS between it and the record's share, computed while
// the record's signature and chain are still being verified: the two
// scalar multiplications then leave the first flight's critical path.
// Nothing is sent until the offer is verified. It is used by at most one
// handshake (a key share is never reused) and only for an offer with the
// same group and share.
type ZDataPrepared struct {
	group  CurveID
	zshare []byte
	share  kex.ClientShare
	zs     []byte
	err    error
	taken  atomic.Bool

	// A BFE encapsulation made ahead (EncapsulateBFE): the key it is for,
	// the ciphertext and the key; nil when none.
	bfePub, bfeCiphertext, bfeKey []byte
}

// EncapsulateBFE encapsulates to pub ahead of the handshake (about ten
// pairings leave the first flight's path; nil rand: crypto/rand). Call it
// before p is handed to an offer; the handshake that takes p sends the
// ciphertext if its offer's BFE key is pub. An error leaves p without one
// (the engine then encapsulates itself).
func (p *ZDataPrepared) EncapsulateBFE(pub ZDataBFE, rand io.Reader) error {
	ct, key, err := pub.Encapsulate(rand)
	if err != nil {
		return err
	}
	p.bfePub, p.bfeCiphertext, p.bfeKey = pub.Bytes(), ct, key
	return nil
}

// PrepareZData makes a key share for group and the ZS between it and the
// Z-data share zshare (nil rand: crypto/rand). An invalid zshare is
// reported when the engine would use it.
func PrepareZData(group CurveID, zshare []byte, rand io.Reader) *ZDataPrepared {
	return (*ZDataKeyShare)(nil).Prepare(group, zshare, rand)
}

// ZDataKeyShare is a client key share made before the Z-data it will be
// used with has arrived (while the DNS answers are awaited): when the
// record lands only the ECDH with its share is left to do. It serves one
// Prepare at most, and a key share is never used twice.
type ZDataKeyShare struct {
	group CurveID
	share kex.ClientShare
	err   error
	taken atomic.Bool
}

// NewZDataKeyShare makes a key share for group, which should be the
// group the Z-data is expected to use (x25519 in the default profile;
// nil rand: crypto/rand).
func NewZDataKeyShare(group CurveID, rand io.Reader) *ZDataKeyShare {
	ks := &ZDataKeyShare{group: group}
	if ks.err = checkZDataGroup(group); ks.err == nil {
		ks.share, ks.err = kex.GenerateClientShare(uint16(group), rand)
	}
	return ks
}

// checkZDataGroup: ztls v1 takes Z-data for x25519 or secp256r1 only
// (docs/ztls-spec.md, Section 1).
func checkZDataGroup(g CurveID) error {
	if g != X25519 && g != P256 {
		return fmt.Errorf("tls13: Z-data group %s is not usable for ztls v1", g)
	}
	return nil
}

// Prepare is PrepareZData with ks's key share when ks (which may be nil)
// is for group and unused; otherwise it makes a new share.
func (ks *ZDataKeyShare) Prepare(group CurveID, zshare []byte, rand io.Reader) *ZDataPrepared {
	p := &ZDataPrepared{group: group, zshare: bytes.Clone(zshare)}
	if p.err = checkZDataGroup(group); p.err != nil {
		return p
	}
	if ks != nil && ks.err == nil && ks.group == group && ks.taken.CompareAndSwap(false, true) {
		p.share = ks.share
	} else {
		p.share, p.err = kex.GenerateClientShare(uint16(group), rand)
	}
	if p.err == nil {
		p.zs, p.err = p.share.Shared(zshare)
	}
	return p
}

// take hands the prepared share to one handshake for offer z, or nil.
func (p *ZDataPrepared) take(z *ZDataOffer) *ZDataPrepared {
	if p == nil || p.err != nil || p.group != z.Group || !bytes.Equal(p.zshare, z.Share) || !p.taken.CompareAndSwap(false, true) {
		return nil
	}
	return p
}

// ZDataLive is the one definition of when a server decrypts with a Z-data
// key (docs/ztls-spec.md, Section 5): from the record's not-before, never
// earlier, until its not-after plus the freshness window w, bounds
// inclusive. Every guard takes the key's start from here: the restart guard
// and the strike registers (no ClientHello under the key can have been
// accepted before from), the fleet's BFE puncture log (the epoch is the
// not-before), key rings (Keyring.Live, LookupZData) and pruning. A client
// may use a record from 60 s before its not-before when its clock is behind
// and no record is valid by it (package zdata, ClockSkew); the server's
// clock has then reached the not-before.
func ZDataLive(notBefore, notAfter time.Time, w time.Duration, now time.Time) bool {
	return !now.Before(notBefore) && !now.After(notAfter.Add(w))
}

// ZDataKey is one live Z-data record's private side on a server.
type ZDataKey struct {
	ID           uint32
	Hash         [32]byte
	Host         string // the signed host: the SNI must equal it
	Group        CurveID
	MaxEarlyData uint32
	ALPN         string
	// NotBefore and NotAfter are the record's validity. The server takes
	// early data under the key only while ZDataLive, and no earlier than
	// NotBefore: the anti-replay guards measure from it.
	NotBefore time.Time
	NotAfter  time.Time
	// ECDH computes the shared secret with a client's key_exchange bytes
	// for Group, validating the share (an invalid share is an error).
	ECDH func(peer []byte) ([]byte, error)
	// Decapsulate, for a ztls v2 record with bfe= (docs/ztls-spec.md,
	// Section 7), returns the key in a ztls_bfe ciphertext, puncturing
	// the record's BFE key; any error (a replay, a false positive, a full
	// filter, the fleet's puncture log unreachable) rejects early data.
	// nil for any other record. A record with it needs no strike
	// register: the punctured key refuses a replay.
	Decapsulate func(ciphertext []byte) ([]byte, error)
}

// ZDataKeys finds the Z-data key named by a ClientHello's zdata_id and
// zdata_hash among the records live at now (ZDataLive: not-before ≤ now ≤
// not-after plus the freshness window). The server checks the returned
// key's liveness again. Implementations must be safe for concurrent use.
type ZDataKeys interface {
	LookupZData(id uint32, hash [32]byte, now time.Time) *ZDataKey
}

// Public returns the key share the prepared Z-data exchange sends (the
// ClientHello's key_exchange for its group), nil if it failed.
func (p *ZDataPrepared) Public() []byte {
	if p == nil || p.err != nil || p.share == nil {
		return nil
	}
	return p.share.Public()
}
