package tls13

import (
	"crypto/x509"
	"sync"
)

// certCache keeps parsed certificates by their DER, so a client that
// talks to the same servers parses each chain once (parsing is about a
// tenth of a full handshake's client time). Parsed certificates are only
// read, so sharing them is safe. It holds at most certCacheMax entries and
// starts afresh when full.
var certCache = struct {
	sync.Mutex
	m map[string]*x509.Certificate
}{m: map[string]*x509.Certificate{}}

const certCacheMax = 512

func parseCertificate(der []byte) (*x509.Certificate, error) {
	certCache.Lock()
	c, ok := certCache.m[string(der)]
	certCache.Unlock()
	if ok {
		return c, nil
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	certCache.Lock()
	if len(certCache.m) >= certCacheMax {
		clear(certCache.m)
	}
	certCache.m[string(der)] = c
	certCache.Unlock()
	return c, nil
}
