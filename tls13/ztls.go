package tls13

import (
	"crypto/x509"
	"time"
)

// ZTLS (ZTLS-SPEC.md): a client that found a server's Z-data in DNS sends
// its first request as early data with its first ClientHello, keyed by an
// ECDH with the Z-data's semi-static share; everything after the
// ServerHello still rests on a fresh (EC)DHE.

// ZDataOffer is verified Z-data in a client's hands. The caller (package
// dial) has already checked its signature, validity window, host and port
// and the leaf's chain and name; the engine only uses it.
type ZDataOffer struct {
	ID           uint32
	Hash         [32]byte // zdata_hash: SHA-256 of the record's signature input
	Group        uint16   // X25519 or P256
	Share        []byte   // the server's semi-static key_exchange bytes
	MaxEarlyData uint32
	ALPN         string   // the early ALPN protocol; "" means none
	NSC          []uint16 // cipher suites the server does not support
	// Leaf is the TLSA leaf the record was signed with. With it the client
	// sends cert_hash and the server may omit its Certificate.
	Leaf *x509.Certificate
}

// ZDataKey is one live Z-data record's private side on a server.
type ZDataKey struct {
	ID           uint32
	Hash         [32]byte
	Host         string // the signed host: the SNI must equal it
	Group        uint16
	MaxEarlyData uint32
	ALPN         string
	NotBefore    time.Time
	NotAfter     time.Time
	// ECDH computes the shared secret with a client's key_exchange bytes
	// for Group, validating the share (an invalid share is an error).
	ECDH func(peer []byte) ([]byte, error)
}

// ZDataKeys finds the Z-data key named by a ClientHello's zdata_id and
// zdata_hash among the records live at now (not-before ≤ now ≤ not-after
// plus the freshness window). Implementations must be safe for concurrent use.
type ZDataKeys interface {
	LookupZData(id uint32, hash [32]byte, now time.Time) *ZDataKey
}
