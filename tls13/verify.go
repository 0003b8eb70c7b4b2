package tls13

// Certificate verification: everything this package checks about a
// peer's certificates, for both roles, in one place (as rustls keeps its
// verify.rs apart from the handshake).
//
//   - The client's policy for a server's chain (checkServerChain): the
//     PKIX path to RootCAs at Config.Time, the name ServerName, the
//     Revocation hook, then VerifyPeerCertificate (runVerifyHook). A
//     Certificate message (startServerCertificateCheck, run beside the
//     CertificateVerify check), a Z-data leaf (VerifyZDataOffer, whose
//     outcome a ZDataOffer carries as its zdataVerdict) and a chain
//     verified ahead of the connection (VerifyServerChain, package dial's
//     prevalidation) all go through it, and reuse chains from
//     Config.VerifiedChains and Config.ChainCache.
//   - The server's policy for a client's chain (checkClientChain), for a
//     Certificate message and for a resumed ticket's chain.
//   - What both roles check of a Certificate message before any chain:
//     its entries' extensions and the leaf key's usage (parseChain,
//     checkCertificateEntries, leafPublicKey), and the alert each failure
//     maps to (certificateError, revocationError).

import (
	"crypto"
	"crypto/x509"
	"errors"
	"sync/atomic"

	"github.com/ztls-project/ztls/revocation"
	"github.com/ztls-project/ztls/tls13/internal/sig"
	"github.com/ztls-project/ztls/tls13/internal/wire"
)

// chainCheck is the server certificate's chain, name and validity check.
// It and the CertificateVerify signature check are the client's
// public-key work on the round trip's critical path, and a second core
// halves it: the check runs through engine.run, beside the signature
// check when the driver lends the engine a goroutine (Conn does). The
// engine waits for the result before it trusts either.
type chainCheck struct {
	raws   [][]byte
	wait   func() // returns once chains, source and err are set
	chains [][]*x509.Certificate
	source string
	err    error
}

// startServerCertificateCheck parses the chain and the leaf's key and
// starts verifying the chain (unless InsecureSkipVerify).
func (e *engine) startServerCertificateCheck(c *wire.Certificate) (*chainCheck, crypto.PublicKey, error) {
	if len(c.Entries) == 0 {
		return nil, nil, errorf(AlertDecodeError, "server sent an empty Certificate")
	}
	if err := checkCertificateEntries(c); err != nil {
		return nil, nil, err
	}
	certs, raws, err := parseChain(c)
	if err != nil {
		return nil, nil, err
	}
	e.info.PeerCertificates = certs
	pub, err := leafPublicKey(certs[0])
	if err != nil {
		return nil, nil, err
	}
	cc := &chainCheck{raws: raws, wait: func() {}}
	if e.cfg.InsecureSkipVerify { // nothing to check
		return cc, pub, nil
	}
	cfg := e.cfg
	cc.wait = e.run(func() { cc.chains, cc.source, cc.err = cfg.checkServerChain(certs) })
	return cc, pub, nil
}

// finishServerCertificateCheck waits for the chain check and runs the
// application's VerifyPeerCertificate hook on the caller's goroutine.
func (e *engine) finishServerCertificateCheck(cc *chainCheck) error {
	cc.wait()
	if cc.err != nil {
		return cc.err
	}
	e.info.VerifiedChains, e.info.ChainSource = cc.chains, cc.source
	return e.cfg.runVerifyHook(cc.raws, cc.chains)
}

// checkServerChain is the client's certificate policy for a server's chain
// (leaf first), without the application's hook: the PKIX path to RootCAs
// at Config.Time, the name (ServerName) and revocation. The Certificate
// message and the Z-data leaf (VerifyZDataOffer) both go through it.
// With InsecureSkipVerify it checks nothing and returns no chains. Chains
// Config.VerifiedChains holds are taken as they are, chains
// Config.ChainCache holds with their revocation checked again; it says
// which (ConnectionState.ChainSource).
func (c *Config) checkServerChain(certs []*x509.Certificate) ([][]*x509.Certificate, string, error) {
	if c.InsecureSkipVerify {
		return nil, "", nil
	}
	if chains := c.prevalidated(certs); chains != nil {
		return chains, ChainPrevalidated, nil
	}
	now := c.now()
	cached, key := c.ChainCache.get(c.RootCAs, c.ServerName, certs, now)
	if cached != nil {
		if err := c.Revocation.CheckAny(cached, now); err != nil {
			return nil, "", revocationError(err)
		}
		return cached, ChainCached, nil
	}
	chainVerifications.Add(1)
	opts := x509.VerifyOptions{
		Roots:         c.RootCAs,
		DNSName:       c.ServerName,
		Intermediates: x509.NewCertPool(),
		CurrentTime:   now,
	}
	for _, ic := range certs[1:] {
		opts.Intermediates.AddCert(ic)
	}
	chains, err := certs[0].Verify(opts)
	if err != nil {
		return nil, "", certificateError(err)
	}
	if err := c.Revocation.CheckAny(chains, now); err != nil {
		return nil, "", revocationError(err)
	}
	c.ChainCache.put(key, c.RootCAs, chains)
	return chains, ChainVerified, nil
}

// runVerifyHook runs Config.VerifyPeerCertificate, if set.
func (c *Config) runVerifyHook(raws [][]byte, chains [][]*x509.Certificate) error {
	if c.VerifyPeerCertificate == nil {
		return nil
	}
	if err := c.VerifyPeerCertificate(raws, chains); err != nil {
		return &LocalError{Alert: AlertBadCertificate, Err: err}
	}
	return nil
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

// VerifyZDataOffer runs c's certificate policy on the offer's leaf and
// intermediates: the chain to RootCAs, the name ServerName, Revocation
// and VerifyPeerCertificate, exactly as for a server's Certificate
// message. It records the outcome in z, so a handshake with c that uses z
// does not repeat it; package dial calls it while TCP connects, off the
// first flight's path; it must not run while a handshake uses z. A
// handshake whose offer was not verified under
// its Config does it before the ClientHello leaves. On success the
// connection's PeerCertificates and VerifiedChains come from it when the
// server omits its Certificate.
func (c *Config) VerifyZDataOffer(z *ZDataOffer) error {
	_, err := c.zdataVerdict(z)
	return err
}

// zdataVerdict records that a Z-data leaf passed one Config's policy.
type zdataVerdict struct {
	cfg    *Config
	leaf   *x509.Certificate
	certs  []*x509.Certificate // leaf first, then the intermediates
	chains [][]*x509.Certificate
	source string // ConnectionState.ChainSource
}

// zdataVerdict is the client's policy on the Z-data leaf and its
// intermediates (docs/ztls-spec.md, Section 4), run once per offer and
// Config: a verdict z already holds for c is taken as it is.
func (c *Config) zdataVerdict(z *ZDataOffer) (*zdataVerdict, error) {
	if v := z.verdict; v != nil && v.cfg == c && v.leaf == z.Leaf && len(v.certs) == 1+len(z.Intermediates) {
		return v, nil
	}
	if z.Leaf == nil {
		return nil, errors.New("tls13: Z-data offer without its TLSA leaf certificate")
	}
	// The same policy as the server's Certificate: roots, name,
	// revocation, VerifyPeerCertificate (docs/ztls-spec.md, Section 4).
	certs := append([]*x509.Certificate{z.Leaf}, z.Intermediates...)
	chains, source, err := c.verifyServerChain(certs)
	if err != nil {
		return nil, err
	}
	v := &zdataVerdict{cfg: c, leaf: z.Leaf, certs: certs, chains: chains, source: source}
	z.verdict = v
	return v, nil
}

// errNoServerName is a client Config that could not check any name.
var errNoServerName = errors.New("tls13: the client Config has no ServerName: set it to the name to verify the server's certificate against (or InsecureSkipVerify, for tests only)")

// checkClientChain is the server's policy for a client's certificate
// chain (leaf first): with ClientAuth >= VerifyClientCertIfGiven the PKIX
// path to ClientCAs at Config.Time and revocation; otherwise only the
// leaf's validity period; then VerifyPeerCertificate. A full handshake's
// Certificate and a resumption's ticket both go through it.
func (c *Config) checkClientChain(certs []*x509.Certificate, raws [][]byte) ([][]*x509.Certificate, error) {
	now := c.now()
	var chains [][]*x509.Certificate
	if c.ClientAuth >= VerifyClientCertIfGiven {
		opts := x509.VerifyOptions{
			Roots:         c.ClientCAs,
			Intermediates: x509.NewCertPool(),
			CurrentTime:   now,
			KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}
		for _, ic := range certs[1:] {
			opts.Intermediates.AddCert(ic)
		}
		var err error
		if chains, err = certs[0].Verify(opts); err != nil {
			return nil, certificateError(err)
		}
		if err := c.Revocation.CheckAny(chains, now); err != nil {
			return nil, revocationError(err)
		}
	} else if leaf := certs[0]; now.After(leaf.NotAfter) || now.Before(leaf.NotBefore) {
		return nil, certificateError(x509.CertificateInvalidError{Cert: leaf, Reason: x509.Expired})
	}
	if err := c.runVerifyHook(raws, chains); err != nil {
		return nil, err
	}
	return chains, nil
}

// parseChain parses a Certificate message's entries, leaf first, and
// returns them with their DER.
func parseChain(c *wire.Certificate) ([]*x509.Certificate, [][]byte, error) {
	var certs []*x509.Certificate
	var raws [][]byte
	for _, entry := range c.Entries {
		cert, err := parseCertificate(entry.Data)
		if err != nil {
			return nil, nil, errorf(AlertBadCertificate, "cannot parse certificate: %v", err)
		}
		certs = append(certs, cert)
		raws = append(raws, entry.Data)
	}
	return certs, raws, nil
}

// checkCertificateEntries enforces RFC 8446, Section 4.4.2 on a peer's
// Certificate: the extensions of its entries must answer extensions we
// sent (in our ClientHello or CertificateRequest), and we ask for none
// (no status_request or signed_certificate_timestamp), so any extension
// there is one we did not request: unsupported_extension (Section 4.2).
func checkCertificateEntries(c *wire.Certificate) error {
	for i, entry := range c.Entries {
		switch {
		case entry.OCSPStaple != nil:
			return errorf(AlertUnsupportedExtension, "certificate %d carries an OCSP staple that was not requested", i)
		case entry.SCTs != nil:
			return errorf(AlertUnsupportedExtension, "certificate %d carries SCTs that were not requested", i)
		case len(entry.Extra) > 0:
			return errorf(AlertUnsupportedExtension, "certificate %d carries extension %d that was not requested", i, entry.Extra[0].Type)
		}
	}
	return nil
}

// leafPublicKey returns the key of the peer's end-entity certificate for
// its CertificateVerify. RFC 8446, Section 4.4.2.2 (and RFC 5280, Section
// 4.2.1.3): when the leaf has a Key Usage extension, it must allow
// digitalSignature. This holds even when the application turned chain
// verification off, and crypto/x509 does not check it.
func leafPublicKey(leaf *x509.Certificate) (crypto.PublicKey, error) {
	if leaf.KeyUsage != 0 && leaf.KeyUsage&x509.KeyUsageDigitalSignature == 0 {
		return nil, errorf(AlertBadCertificate, "the peer's certificate does not allow its key to sign (keyUsage lacks digitalSignature)")
	}
	pub, err := sig.ParsePublicKey(leaf)
	if err != nil {
		return nil, errorf(AlertUnsupportedCert, "unsupported public key in certificate: %v", err)
	}
	return pub, nil
}

// certificateError maps an x509 verification failure to its alert.
func certificateError(err error) error {
	a := AlertBadCertificate
	switch e := err.(type) {
	case x509.CertificateInvalidError:
		if e.Reason == x509.Expired {
			a = AlertCertificateExpired
		}
	case x509.UnknownAuthorityError:
		a = AlertUnknownCA
	case x509.HostnameError:
		a = AlertBadCertificate
	}
	return &LocalError{Alert: a, Err: &CertificateVerificationError{Err: err}}
}

// revocationError maps a failed revocation check to its alert.
func revocationError(err error) error {
	a := AlertBadCertificate
	if errors.Is(err, revocation.ErrRevoked) {
		a = AlertCertificateRevoked
	}
	return &LocalError{Alert: a, Err: &CertificateVerificationError{Err: err}}
}

// CertificateVerificationError is returned when the peer's certificate
// chain, name or validity does not verify.
type CertificateVerificationError struct{ Err error }

func (e *CertificateVerificationError) Error() string {
	return "tls13: certificate verification failed: " + e.Err.Error()
}

func (e *CertificateVerificationError) Unwrap() error { return e.Err }
