package revocation

import (
	"bytes"
	"crypto/x509"
	"time"
)

// NextUpdate returns the earliest nextUpdate of the CRLs that Check would
// consult for any of chains (each leaf first, as crypto/x509's Verify
// returns them): until then a verdict of Check on them stands, which is
// how long a cache of prevalidated chains (package dial) may keep one.
// The zero time means no CRL here applies or none names a nextUpdate.
func (c *Checker) NextUpdate(chains [][]*x509.Certificate) time.Time {
	var next time.Time
	if c == nil {
		return next
	}
	for _, chain := range chains {
		for i := 0; i+1 < len(chain); i++ {
			issuer := chain[i+1]
			for _, l := range c.byIssuer[string(issuer.RawSubject)] {
				if len(l.crl.AuthorityKeyId) > 0 && len(issuer.SubjectKeyId) > 0 && !bytes.Equal(l.crl.AuthorityKeyId, issuer.SubjectKeyId) {
					continue
				}
				if nu := l.crl.NextUpdate; !nu.IsZero() && (next.IsZero() || nu.Before(next)) {
					next = nu
				}
			}
		}
	}
	return next
}
