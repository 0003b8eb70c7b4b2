package dial_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"log"
	"math/big"
	"net"
	"strconv"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/dns/authority"
	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/server"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/zdata"
)

// A first contact with ZTLS. The example builds its own site on loopback
// from the public packages (startSite, below): a throwaway CA, a ztls
// server answering "hello", and a DNS authority publishing the server's
// address and Z-data. The report says how the connection went; its
// timings are in Report.Timing.
func ExampleConnect() {
	site, err := startSite(true)
	if err != nil {
		log.Fatal(err)
	}
	defer site.Close()

	r, answer, err := site.Connect("GET /")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("answer:", answer)
	fmt.Println("mode:", r.Report.Mode)
	fmt.Printf("fallback reason: %q\n", r.Report.FallbackReason)
	fmt.Println("early data accepted:", r.Report.EarlyData.Accepted)
	fmt.Println("certificate from DNS:", r.Report.TLS.CertificateFromDNS)
	fmt.Println("answer in first flight:", r.Report.AnswerInFirstFlight)
	// Output:
	// answer: hello
	// mode: ztls
	// fallback reason: ""
	// early data accepted: true
	// certificate from DNS: true
	// answer in first flight: true
}

// Site is a ZTLS site on loopback: a ztls server for Host, a DNS
// authority for its zone, and the CA a client must trust.
type Site struct {
	Host    string
	Port    int
	DNSAddr string // the authority, UDP and TCP
	Roots   *x509.CertPool

	closers []func()
}

// startSite starts a site for www.example.test; with publishZData its
// authority publishes the server's Z-data, so clients may use ZTLS.
func startSite(publishZData bool) (s *Site, err error) {
	s = &Site{Host: "www.example.test"}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	now := time.Now() // real time: certificates and Z-data for a real program's clock
	cert, roots, err := issueCertificate(s.Host, now)
	if err != nil {
		return nil, err
	}
	s.Roots = roots

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, func() { ln.Close() })
	s.Port = ln.Addr().(*net.TCPAddr).Port

	// The Z-data keys for host:port, made now; the server decrypts ZTLS
	// offers with them and the authority publishes their records.
	svc, err := zdata.NewService(s.Host, s.Port, cert, zdata.Options{}, nil)
	if err != nil {
		return nil, err
	}
	if _, err := svc.Rotate(now); err != nil {
		return nil, err
	}
	cfg := &tls13.Config{
		Certificates: []tls13.Certificate{cert},
		// The keys are new and this server alone uses them, so no early
		// data was ever accepted under them before this register.
		StrikeRegister: tls13.NewMemoryStrikeRegister(1<<16, time.Time{}),
	}
	if publishZData {
		cfg.ZData = svc.Keyring
	}
	srv, err := server.New(server.Config{
		TLS:     func() *tls13.Config { return cfg },
		Handler: func(c *server.Conn) { answerOnce(c.Conn, "hello") },
	})
	if err != nil {
		return nil, err
	}
	go srv.Serve(ln)
	s.closers = append(s.closers, func() { srv.Shutdown(context.Background()) })

	// The authority: the zone's SOA and NS, the host's address and,
	// when published, its Z-data (TXT, TLSA and CERT records).
	const zone = "example.test."
	var rrs []dns.RR
	for _, text := range []string{
		zone + " 3600 IN SOA ns1." + zone + " hostmaster." + zone + " 1 3600 600 86400 60",
		zone + " 3600 IN NS ns1." + zone,
		"ns1." + zone + " 3600 IN A 127.0.0.1",
		s.Host + ". 300 IN A 127.0.0.1",
	} {
		rr, err := dns.NewRR(text)
		if err != nil {
			return nil, err
		}
		rrs = append(rrs, rr)
	}
	if publishZData {
		recs := svc.Records(now)
		rrs = append(rrs, zdata.ZoneRRs(recs, cert.Chain[0], nil, zdata.TTLFor(recs, now, 5*time.Minute))...)
	}
	z, err := authority.NewZone(zone, rrs)
	if err != nil {
		return nil, err
	}
	zones, err := authority.NewZones(z)
	if err != nil {
		return nil, err
	}
	dnsSrv := &authority.Server{Handler: authority.Chain(zones, authority.CheckQuery)}
	pc, dl, err := authority.ListenUDPAndTCP("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.DNSAddr = pc.LocalAddr().String()
	go dnsSrv.ServeUDP(pc)
	go dnsSrv.ServeTCP(dl)
	s.closers = append(s.closers, func() { dnsSrv.Close(); pc.Close(); dl.Close() })
	return s, nil
}

// Connect runs one dial.Connect to the site, sending request and
// reading the answer.
func (s *Site) Connect(request string) (*dial.Result, string, error) {
	res, err := resolver.New(resolver.Config{Servers: []string{s.DNSAddr}, Transport: resolver.UDP})
	if err != nil {
		return nil, "", err
	}
	defer res.Close()
	var answer bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := dial.Connect(ctx, net.JoinHostPort(s.Host, strconv.Itoa(s.Port)), dial.Options{
		Mode:         dial.ModeAuto,                   // ZTLS when valid Z-data is in hand, else TLS 1.3
		TLS:          &tls13.Config{RootCAs: s.Roots}, // trusts the site's CA
		Resolver:     res,                             // addresses and Z-data
		ZDataBudget:  time.Second,                     // generous for a busy machine; 0 means 20 ms
		Request:      []byte(request),                 // sent early under ZTLS
		ReplaySafe:   true,                            // resent after the handshake if the early data is rejected
		ReadResponse: 1 << 16,
		Out:          &answer,
		Memory:       dial.NewMemory(),
	})
	if err != nil {
		return nil, "", err
	}
	r.Conn.Close()
	return r, answer.String(), nil
}

// Close stops the site's servers.
func (s *Site) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}

// answerOnce answers the first request, early or not, with text; an
// early request is answered in the server's first flight.
func answerOnce(c *tls13.Conn, text string) {
	if err := c.HandshakeEarly(context.Background()); err != nil {
		return
	}
	buf := make([]byte, 4096)
	if n, _ := c.ReadEarlyData(buf); n > 0 {
		c.Write([]byte(text))
		c.Handshake()
		c.CloseWrite()
		return
	}
	if n, _ := c.Read(buf); n > 0 {
		c.Write([]byte(text))
	}
	c.CloseWrite()
}

// issueCertificate makes a throwaway CA and an ECDSA P-256 certificate
// for host signed by it, valid from an hour before now for a day.
func issueCertificate(host string, now time.Time) (tls13.Certificate, *x509.CertPool, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls13.Certificate{}, nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "Example CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return tls13.Certificate{}, nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return tls13.Certificate{}, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls13.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls13.Certificate{}, nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls13.Certificate{}, nil, err
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	return tls13.Certificate{Chain: [][]byte{der}, PrivateKey: key, Leaf: leaf}, roots, nil
}
