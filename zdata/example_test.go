package zdata_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"log"
	"math/big"
	"os"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/zdata"
)

// The examples run on a fixed clock, so the records' validity windows are
// the same on every run.
var now = time.Date(2025, 6, 1, 12, 20, 0, 0, time.UTC)

// newCertificate makes a self-signed ECDSA certificate for host, valid
// around now, and a pool that trusts it.
func newCertificate(host string) (tls13.Certificate, *x509.CertPool) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		log.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		NotBefore:    now.Add(-24 * time.Hour),
		NotAfter:     now.Add(90 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		log.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		log.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	return tls13.Certificate{Chain: [][]byte{der}, PrivateKey: key, Leaf: leaf}, roots
}

// A server's side: a Service signs Z-data records with the certificate and
// keeps their private keys in its Keyring, which the TLS server uses.
func ExampleService() {
	cert, _ := newCertificate("www.example.com")
	svc, err := zdata.NewService("www.example.com", 443, cert, zdata.Options{ALPN: "h2"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	// Rotate keeps the current record and the next one in the keyring;
	// a server calls it every minute or so.
	added, err := svc.Rotate(now)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("keys added:", len(added))
	serverCfg := &tls13.Config{Certificates: []tls13.Certificate{cert}, ZData: svc.Keyring}
	_ = serverCfg // serve with it: tls13.Listen("tcp", ":443", serverCfg)

	// What to publish in DNS: the TXT records (with CERT records for
	// intermediates, none here) and the leaf in a TLSA record.
	fmt.Println("TXT at", zdata.TXTName("www.example.com", 443))
	fmt.Println("TLSA at", zdata.TLSAName("www.example.com", 443))
	for _, rec := range svc.Records(now) {
		txt := rec.TXT()
		// The first strings: version, not-before, not-after and
		// max_early_data_size; then come the id, group, key share, ALPN,
		// client-certificate flag, signature scheme and signature.
		fmt.Println(txt[:4], "group", rec.Group.String(), "alpn", rec.ALPN)
	}
	// Output:
	// keys added: 2
	// TXT at _ztls._443._tcp.www.example.com.
	// TLSA at _443._tcp.www.example.com.
	// [v=ztls1 20250601120000Z 20250601130000Z 16384] group x25519 alpn h2
	// [v=ztls1 20250601130000Z 20250601140000Z 16384] group x25519 alpn h2
}

// A TXT record's character-strings parse back into a Record, whose
// signature Verify checks with the TLSA leaf. Other TXT records at the
// same name are not Z-data.
func ExampleParseTXT() {
	cert, _ := newCertificate("www.example.com")
	svc, err := zdata.NewService("www.example.com", 443, cert, zdata.Options{}, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := svc.Rotate(now); err != nil {
		log.Fatal(err)
	}
	published := svc.Records(now)[0].TXT()

	rec, err := zdata.ParseTXT(published)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("valid from", rec.NotBefore, "to", rec.NotAfter)
	fmt.Println("max early data:", rec.MaxEarlyData)
	fmt.Println("signature:", rec.Verify(cert.Leaf, "www.example.com", 443))
	fmt.Println("copied to another port:", zdata.ReasonOf(rec.Verify(cert.Leaf, "www.example.com", 8443)))

	_, err = zdata.ParseTXT([]string{"v=spf1 -all"})
	fmt.Println(err == zdata.ErrNotZTLS)
	_, err = zdata.ParseTXT([]string{"v=ztls1", "tomorrow"})
	fmt.Println(zdata.ReasonOf(err))
	// Output:
	// valid from 2025-06-01 12:00:00 +0000 UTC to 2025-06-01 13:00:00 +0000 UTC
	// max early data: 16384
	// signature: <nil>
	// copied to another port: bad signature
	// true
	// malformed Z-data
}

// A client's side: a Selector takes the DNS answers for a service and
// returns the record to use and its leaf, or the reason to fall back to
// TLS 1.3.
func ExampleSelector() {
	cert, roots := newCertificate("www.example.com")
	svc, err := zdata.NewService("www.example.com", 443, cert, zdata.Options{}, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := svc.Rotate(now); err != nil {
		log.Fatal(err)
	}
	recs := svc.Records(now)
	rrs := zdata.ZoneRRs(recs, cert.Chain[0], nil, zdata.TTLFor(recs, now, 5*time.Minute))

	// The answers a resolver would return for TXTName and TLSAName.
	var txt [][]string
	var tlsa []*dns.TLSA
	var certs []*dns.CERT
	for _, rr := range rrs {
		switch rr := rr.(type) {
		case *dns.TXT:
			txt = append(txt, rr.Txt)
		case *dns.TLSA:
			tlsa = append(tlsa, rr)
		case *dns.CERT:
			certs = append(certs, rr)
		}
	}

	// The chain checks start as soon as the TLSA and CERT answers are in;
	// Select, given the TXT answer, waits for them.
	sel := zdata.NewSelector("www.example.com", 443, zdata.SelectOptions{Roots: roots, Now: now})
	sel.StartChains(tlsa, certs)
	rec, leaf, err := sel.Select(txt)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("use the record valid until", rec.NotAfter.Format(time.Kitchen), "signed by", leaf.Subject.CommonName)
	offer := rec.Offer(leaf) // for tls13.Conn.SetZData
	fmt.Println("offer:", offer.Group.String(), offer.MaxEarlyData, "bytes of early data")

	// Three hours later both records have expired: plain TLS 1.3, and
	// ReasonOf says why for the connection report.
	later := zdata.NewSelector("www.example.com", 443, zdata.SelectOptions{Roots: roots, Now: now.Add(3 * time.Hour)})
	later.StartChains(tlsa, certs)
	_, _, err = later.Select(txt)
	fmt.Println("fallback:", zdata.ReasonOf(err))
	// A service that publishes no Z-data: no TXT answer.
	_, _, err = sel.Select(nil)
	fmt.Println("fallback:", zdata.ReasonOf(err))
	// Output:
	// use the record valid until 1:00PM signed by www.example.com
	// offer: x25519 16384 bytes of early data
	// fallback: Z-data expired
	// fallback: no Z-data
}

// Bloom filter encryption (docs/ztls-spec.md, Section 7): the Service
// generates each period's BFE key in the background and publishes it as a
// v2 twin of the key's record; a serving process (BFEServe) opens the key
// states its Keyring decapsulates with.
func ExampleService_GenerateBFE() {
	cert, _ := newCertificate("www.example.com")
	svc, err := zdata.NewService("www.example.com", 443, cert, zdata.Options{BFEConnections: 16}, nil)
	if err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "bfe")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	svc.BFEDir, svc.BFEServe = dir, true
	defer svc.CloseBFE()
	// In a server: a goroutine, an epoch ahead, never on a handshake's path.
	if _, err := svc.GenerateBFE(context.Background(), now); err != nil {
		log.Fatal(err)
	}
	if _, err := svc.Rotate(now); err != nil {
		log.Fatal(err)
	}
	for _, r := range svc.Records(now) {
		fmt.Println(r.TXT()[0], r.NotBefore.Format("15:04"), len(r.BFE) > 0)
	}
	// Output:
	// v=ztls1 12:00 false
	// v=ztls2 12:00 true
	// v=ztls1 13:00 false
}
