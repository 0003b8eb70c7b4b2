package ztlshttp_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/dns/authority"
	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/server"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/zdata"
	"github.com/ztls-project/ztls/ztlshttp"
)

// An HTTP client gets ZTLS from NewTransport: its first GET to a server
// that publishes Z-data goes with the first ClientHello and the answer
// comes in the server's first flight. The server is a Proxy in front of
// a backend. The example builds its own site on loopback from the public
// packages (startSite, below): a throwaway CA, the ztls server, and a DNS
// authority publishing the server's address and Z-data.
func ExampleNewTransport() {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from the backend (Early-Data: %q)", r.Header.Get("Early-Data"))
	}))
	defer backend.Close()
	u, err := url.Parse(backend.URL)
	if err != nil {
		log.Fatal(err)
	}
	site, err := startSite(&ztlshttp.Proxy{Backend: u})
	if err != nil {
		log.Fatal(err)
	}
	defer site.Close()
	res, err := resolver.New(resolver.Config{Servers: []string{site.DNSAddr}, Transport: resolver.UDP})
	if err != nil {
		log.Fatal(err)
	}
	defer res.Close()

	tr := ztlshttp.NewTransport(dial.Options{
		TLS:         &tls13.Config{RootCAs: site.Roots}, // trusts the site's CA
		Resolver:    res,                                // finds the address and the Z-data
		ZDataBudget: time.Second,                        // generous for a busy machine; 0 means 20 ms
	})
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	// The connection's report, through httptrace.
	var conn net.Conn
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) { conn = info.Conn }}
	req, err := http.NewRequest("GET", "https://"+site.HostPort()+"/", nil)
	if err != nil {
		log.Fatal(err)
	}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	resp, err := client.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.Status, string(body))
	if rc, ok := conn.(interface{ Report() *dial.Report }); ok {
		r := rc.Report()
		fmt.Println("mode:", r.Mode)
		fmt.Println("early data accepted:", r.EarlyData.Accepted)
		fmt.Println("answer in first flight:", r.AnswerInFirstFlight)
	}
	// Output:
	// 200 OK hello from the backend (Early-Data: "1")
	// mode: ztls
	// early data accepted: true
	// answer in first flight: true
}

// Site is an HTTPS site on loopback served over ztls: the server for
// Host, a DNS authority for its zone publishing its address and Z-data,
// and the CA a client must trust.
type Site struct {
	Host    string
	Port    int
	DNSAddr string // the authority, UDP and TCP
	Roots   *x509.CertPool

	closers []func()
}

// startSite starts www.example.test, its connections served by proxy,
// speaking HTTP/1.1: the protocol its Z-data names for early data.
func startSite(proxy *ztlshttp.Proxy) (s *Site, err error) {
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
	svc, err := zdata.NewService(s.Host, s.Port, cert, zdata.Options{ALPN: "http/1.1"}, nil)
	if err != nil {
		return nil, err
	}
	if _, err := svc.Rotate(now); err != nil {
		return nil, err
	}
	cfg := &tls13.Config{
		Certificates: []tls13.Certificate{cert},
		NextProtos:   []string{"http/1.1"},
		ZData:        svc.Keyring,
		// The keys are new and this server alone uses them, so no early
		// data was ever accepted under them before this register.
		StrikeRegister: tls13.NewMemoryStrikeRegister(1<<16, time.Time{}),
	}
	srv, err := server.New(server.Config{
		TLS:     func() *tls13.Config { return cfg },
		Handler: func(c *server.Conn) { proxy.ServeConnContext(c.Context(), c.Conn) },
	})
	if err != nil {
		return nil, err
	}
	go srv.Serve(ln)
	s.closers = append(s.closers, func() { srv.Shutdown(context.Background()) })

	// The authority: the zone's SOA and NS, the host's address and its
	// Z-data (TXT, TLSA and CERT records).
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
	recs := svc.Records(now)
	rrs = append(rrs, zdata.ZoneRRs(recs, cert.Chain[0], nil, zdata.TTLFor(recs, now, 5*time.Minute))...)
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

// HostPort is the address a client dials by name.
func (s *Site) HostPort() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// Close stops the site's servers.
func (s *Site) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
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
