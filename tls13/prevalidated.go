package tls13

// Chains verified ahead of the connection (package dial's cache of
// prevalidated services): the hook that lets a handshake take them, the
// entry point that verifies one, and a count of the verifications done.

import (
	"crypto/x509"
	"errors"
	"sync/atomic"
)

// chainVerifications counts the client's chain verifications
// (checkServerChain past InsecureSkipVerify and Config.VerifiedChains).
var chainVerifications atomic.Uint64

// ChainVerifications returns how many server chains clients of this
// process have verified (path building to RootCAs, the name and
// revocation: a Certificate message, a Z-data leaf, VerifyServerChain),
// not counting chains taken from Config.VerifiedChains or skipped with
// InsecureSkipVerify. Tests and benchmarks read it to show that a
// connection verified nothing; it is safe for concurrent use.
func ChainVerifications() uint64 { return chainVerifications.Load() }

// prevalidated returns the chains Config.VerifiedChains holds for certs,
// or nil.
func (c *Config) prevalidated(certs []*x509.Certificate) [][]*x509.Certificate {
	if c.VerifiedChains == nil || len(certs) == 0 {
		return nil
	}
	chains := c.VerifiedChains(certs)
	if len(chains) == 0 {
		return nil
	}
	return chains
}

// VerifyServerChain runs c's certificate policy on a server's chain
// (leaf first) as the handshake runs it on a Certificate message: the
// path to RootCAs at Config.Time, the name ServerName, Revocation, then
// VerifyPeerCertificate; it returns the verified chains (none with
// InsecureSkipVerify). Package dial uses it to prevalidate a chain
// fetched ahead of the connection, which it then hands back through
// Config.VerifiedChains. It is safe for concurrent use.
func (c *Config) VerifyServerChain(certs []*x509.Certificate) ([][]*x509.Certificate, error) {
	chains, _, err := c.verifyServerChain(certs)
	return chains, err
}

// verifyServerChain is VerifyServerChain, also saying where the chains
// came from (ConnectionState.ChainSource).
func (c *Config) verifyServerChain(certs []*x509.Certificate) ([][]*x509.Certificate, string, error) {
	if len(certs) == 0 || certs[0] == nil {
		return nil, "", errors.New("tls13: no certificate to verify")
	}
	if c.ServerName == "" && !c.InsecureSkipVerify {
		return nil, "", errNoServerName
	}
	chains, source, err := c.checkServerChain(certs)
	if err != nil {
		return nil, "", err
	}
	raws := make([][]byte, len(certs))
	for i, cert := range certs {
		raws[i] = cert.Raw
	}
	if err := c.runVerifyHook(raws, chains); err != nil {
		return nil, "", err
	}
	return chains, source, nil
}

// ConnectionState.ChainSource values: where a client's verified chains
// came from.
const (
	// ChainVerified: verified for this connection (or for its Z-data
	// offer, before the ClientHello left).
	ChainVerified = "verified"
	// ChainCached: taken from Config.ChainCache, verified by an earlier
	// connection; revocation was checked again.
	ChainCached = "cache"
	// ChainPrevalidated: taken from Config.VerifiedChains (package dial's
	// prefetch verified it ahead of the connection).
	ChainPrevalidated = "prevalidated"
)

// Public returns the key share the prepared Z-data exchange sends (the
// ClientHello's key_exchange for its group), nil if it failed.
func (p *ZDataPrepared) Public() []byte {
	if p == nil || p.err != nil || p.share == nil {
		return nil
	}
	return p.share.Public()
}
