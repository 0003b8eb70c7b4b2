package tls13

import (
	"crypto/x509"
	"testing"
)

// A chain handed back by Config.VerifiedChains is taken without a
// verification (ChainVerifications does not move) and is the
// connection's verified chain; VerifyPeerCertificate still runs on it.
func TestVerifiedChainsSkipsVerification(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	leaf, err := x509.ParseCertificate(p.server.Chain[0])
	if err != nil {
		t.Fatal(err)
	}
	chains, err := clientConfig(p).VerifyServerChain([]*x509.Certificate{leaf})
	if err != nil || len(chains) == 0 {
		t.Fatalf("VerifyServerChain: %v", err)
	}
	ccfg := clientConfig(p)
	asked, hooked := 0, 0
	ccfg.VerifiedChains = func(certs []*x509.Certificate) [][]*x509.Certificate {
		asked++
		if certs[0].Equal(leaf) {
			return chains
		}
		return nil
	}
	ccfg.VerifyPeerCertificate = func(_ [][]byte, got [][]*x509.Certificate) error {
		hooked++
		if len(got) == 0 || !got[0][0].Equal(leaf) {
			t.Error("the hook did not get the prevalidated chains")
		}
		return nil
	}
	before := ChainVerifications()
	c, _, cerr, serr := pair(t, ccfg, serverConfig(p))
	if cerr != nil || serr != nil {
		t.Fatalf("client %v, server %v", cerr, serr)
	}
	if n := ChainVerifications() - before; n != 0 || asked != 1 || hooked != 1 {
		t.Fatalf("%d verifications, VerifiedChains asked %d times, hook run %d times", n, asked, hooked)
	}
	if got := c.ConnectionState().VerifiedChains; len(got) == 0 || !got[0][0].Equal(leaf) {
		t.Fatal("the prevalidated chains are not the connection's")
	}

	// Another leaf than the one prevalidated is verified as usual.
	ccfg.VerifiedChains = func([]*x509.Certificate) [][]*x509.Certificate { return nil }
	before = ChainVerifications()
	if _, _, cerr, _ := pair(t, ccfg, serverConfig(p)); cerr != nil {
		t.Fatal(cerr)
	}
	if n := ChainVerifications() - before; n != 1 {
		t.Fatalf("%d verifications without a prevalidated chain, want 1", n)
	}
}
