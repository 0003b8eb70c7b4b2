// Package revocation checks certificates against certificate revocation
// lists (CRLs, RFC 5280, Section 5) that the user supplies as files.
//
// A Checker is loaded once (Load) and shared: the TLS engine runs it on
// every verified chain (tls13.Config.Revocation) and the ZTLS client on the
// leaf a Z-data record is signed with (docs/ztls-spec.md, Section 6: a revoked
// certificate means no ZTLS). A CRL applies to the certificates its issuer
// signed; a CRL whose signature does not verify with that issuer's key, or
// that is past its nextUpdate, makes the check fail rather than pass
// silently: refresh the file. Certificates whose issuer has no CRL here
// are not checked (there is no network fetching).
package revocation

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"sync"
	"time"
)

// ErrRevoked is wrapped by the error for a revoked certificate.
var ErrRevoked = errors.New("revocation: certificate revoked")

// ErrStale is wrapped by the error for a CRL past its nextUpdate.
var ErrStale = errors.New("revocation: CRL past its next update")

// Checker holds CRLs by issuer. It is safe for concurrent use.
type Checker struct {
	byIssuer map[string][]*list // key: the issuer's raw subject
}

type list struct {
	crl     *x509.RevocationList
	source  string
	revoked map[string]time.Time // serial (big-endian bytes) → revocation time

	mu     sync.Mutex
	sigErr map[string]error // issuer certificate DER → signature check result
}

// checkSignature verifies the CRL's signature with issuer once per issuer
// certificate: a handshake should not pay a signature check per CRL.
func (l *list) checkSignature(issuer *x509.Certificate) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err, ok := l.sigErr[string(issuer.Raw)]; ok {
		return err
	}
	err := l.crl.CheckSignatureFrom(issuer)
	if l.sigErr == nil || len(l.sigErr) >= 64 {
		l.sigErr = map[string]error{}
	}
	l.sigErr[string(issuer.Raw)] = err
	return err
}

// New returns a Checker for already parsed CRLs.
func New(crls ...*x509.RevocationList) *Checker {
	c := &Checker{byIssuer: map[string][]*list{}}
	for i, crl := range crls {
		c.add(crl, fmt.Sprintf("CRL %d", i+1))
	}
	return c
}

func (c *Checker) add(crl *x509.RevocationList, source string) {
	l := &list{crl: crl, source: source, revoked: make(map[string]time.Time, len(crl.RevokedCertificateEntries))}
	for _, e := range crl.RevokedCertificateEntries {
		if e.SerialNumber != nil {
			l.revoked[string(e.SerialNumber.Bytes())] = e.RevocationTime
		}
	}
	c.byIssuer[string(crl.RawIssuer)] = append(c.byIssuer[string(crl.RawIssuer)], l)
}

// Load reads CRL files, each DER or PEM ("X509 CRL" blocks, several per
// file allowed).
func Load(paths ...string) (*Checker, error) {
	c := New()
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("revocation: %w", err)
		}
		ders, err := crlDERs(data)
		if err != nil {
			return nil, fmt.Errorf("revocation: %s: %w", p, err)
		}
		for i, der := range ders {
			crl, err := x509.ParseRevocationList(der)
			if err != nil {
				return nil, fmt.Errorf("revocation: %s: CRL %d: %w", p, i+1, err)
			}
			c.add(crl, p)
		}
	}
	return c, nil
}

// crlDERs returns the DER CRLs in a file: PEM blocks of type "X509 CRL",
// or the whole file as DER when it holds no PEM.
func crlDERs(data []byte) ([][]byte, error) {
	if !bytes.Contains(data, []byte("-----BEGIN")) {
		return [][]byte{data}, nil
	}
	var out [][]byte
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type == "X509 CRL" {
			out = append(out, b.Bytes)
		}
	}
	if len(out) == 0 {
		return nil, errors.New(`no "X509 CRL" PEM block`)
	}
	return out, nil
}

// Len returns the number of CRLs held.
func (c *Checker) Len() int {
	if c == nil {
		return 0
	}
	n := 0
	for _, ls := range c.byIssuer {
		n += len(ls)
	}
	return n
}

// Check looks at each certificate of chain (leaf first, each followed by
// its issuer, as crypto/x509's Verify returns them) that has a CRL from
// its issuer here, and fails if one is revoked, or if that CRL's
// signature does not verify or it is stale at now.
func (c *Checker) Check(chain []*x509.Certificate, now time.Time) error {
	if c == nil {
		return nil
	}
	for i := 0; i+1 < len(chain); i++ {
		cert, issuer := chain[i], chain[i+1]
		for _, l := range c.byIssuer[string(issuer.RawSubject)] {
			// Two CAs may share a name: the authority key identifier,
			// when both sides have one, tells whose CRL this is.
			if len(l.crl.AuthorityKeyId) > 0 && len(issuer.SubjectKeyId) > 0 && !bytes.Equal(l.crl.AuthorityKeyId, issuer.SubjectKeyId) {
				continue
			}
			if err := l.checkSignature(issuer); err != nil {
				return fmt.Errorf("revocation: %s names %q as issuer but is not signed by it: %v", l.source, issuer.Subject, err)
			}
			if !l.crl.NextUpdate.IsZero() && now.After(l.crl.NextUpdate) {
				return fmt.Errorf("%w: %s from %q expired %s; fetch a fresh one", ErrStale, l.source, issuer.Subject, l.crl.NextUpdate.UTC().Format(time.RFC3339))
			}
			if at, ok := l.revoked[string(serialBytes(cert.SerialNumber))]; ok {
				return fmt.Errorf("%w: %q (serial %x) revoked by %q at %s (%s)", ErrRevoked, cert.Subject, cert.SerialNumber, issuer.Subject, at.UTC().Format(time.RFC3339), l.source)
			}
		}
	}
	return nil
}

func serialBytes(n *big.Int) []byte {
	if n == nil {
		return nil
	}
	return n.Bytes()
}

// CheckAny passes if at least one of the verified chains passes Check
// (a certificate may chain to the roots several ways); otherwise it
// returns the first chain's error.
func (c *Checker) CheckAny(chains [][]*x509.Certificate, now time.Time) error {
	if c == nil {
		return nil
	}
	var first error
	for _, ch := range chains {
		err := c.Check(ch, now)
		if err == nil {
			return nil
		}
		if first == nil {
			first = err
		}
	}
	return first
}
